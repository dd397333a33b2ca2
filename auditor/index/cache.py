"""The persistent index cache: one sealed entry file per (content hash, language) and one
pack file per scan scope (so repeating a scan reads a single file), with small delta files
for edits, bounded by least-recently-used pruning. A scope without a pack borrows the most
recently used other pack's records (a first index of a large tree writes its records to
its pack only: ``ENTRY_FILES_MAX``). Entries are checked on read: a damaged or foreign
entry is recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, make_dataclass
from itertools import starmap
from operator import attrgetter
from pathlib import Path
from typing import Any

from auditor.index.model import (
    INDEX_VERSION,
    CallSite,
    ContextBlock,
    Definition,
    FileIndex,
    Import,
)
from auditor.storage.sealed import (
    prune_least_recent,
    read_regular_file,
    seal,
    seal_marshalled,
    unseal,
    write_atomically,
)

_SAFE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")

logger = logging.getLogger(__name__)


_ENTRY_MAGIC = b"auditor-index-entry\n"


_PACK_MAGIC = b"auditor-index-pack\n"


MAX_PACKS = 16
"""Most pack files one cache directory keeps; the least recently used are deleted first."""


MAX_ENTRIES = 200_000
"""Most entry files one cache directory keeps (~1-3 GB at most); when a pack is written whole
and there are more, the oldest are deleted down to 80% of this (their files sit in packs
too, so deleting one costs at most a parse)."""


# A pack's delta (entries added since it was written whole) and its entries no longer used
# may together reach this share of its size (at least PACK_DELTA_MIN) before a full rewrite.
PACK_DELTA_SHARE = 0.125


PACK_DELTA_MIN = 64


ENTRY_FILES_MAX = 300
"""Most entry files one index run writes when its scan has no pack yet: past this (a first,
cold index of a large repository) the new records are kept in the pack written whole
only, and a later scan of another name without a pack finds them there
(:meth:`IndexCache._read_donor`). Writing thousands of small files costs ~2 s of CPU on
4,000 files, most of it the file system's (``sys`` time), for a copy the pack holds too."""


_CacheKey = tuple[str, str]  # (content hash, language)


_Record = tuple[Any, ...]
"""A FileIndex without its path, as nested tuples of its fields in declaration order (the
form stored on disk with marshal and sent back by parsing workers)."""


_definition_fields = attrgetter(*(item.name for item in fields(Definition)))


_call_fields = attrgetter(*(item.name for item in fields(CallSite)))


_context_block_fields = attrgetter(*(item.name for item in fields(ContextBlock)))


_import_fields = attrgetter(*(item.name for item in fields(Import)))


def _record_of(index: FileIndex) -> _Record:
    return (
        index.language,
        index.content_hash,
        index.line_count,
        tuple(map(_definition_fields, index.definitions)),
        tuple(map(_call_fields, index.calls)),
        tuple(map(_context_block_fields, index.context_blocks)),
        tuple(map(_import_fields, index.imports)),
        index.main_block,
        index.string_assignments,
        index.has_errors,
    )


def _builder(cls: type) -> Any:
    """A constructor equivalent to ``cls(*values)`` for a frozen, slotted dataclass, about
    three times faster.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; the
    builder is a mutable twin with the same slots (plain, fast attribute stores) whose
    instance is then re-labelled as ``cls``. Python allows that ``__class__`` assignment
    only between identical layouts and raises TypeError otherwise, so a twin that drifted
    from ``cls`` fails loudly rather than building a wrong object.
    """

    def relabel(self: Any) -> None:
        self.__class__ = cls

    return make_dataclass(
        f"_{cls.__name__}Builder",
        [(item.name, item.type) for item in fields(cls)],
        namespace={"__post_init__": relabel},
        slots=True,
        eq=False,
        repr=False,
    )


# Decoding a cached scan builds hundreds of thousands of these, so they are built this way.
_build_definition = _builder(Definition)


_build_call = _builder(CallSite)


_build_context_block = _builder(ContextBlock)


_build_import = _builder(Import)


_build_file_index = _builder(FileIndex)


def _file_index_from_record(record: _Record, path: str) -> FileIndex:
    """Rebuild a FileIndex from its record; raises TypeError/ValueError if malformed."""
    (
        language,
        content_hash,
        line_count,
        definitions,
        calls,
        context_blocks,
        imports,
        main_block,
        string_assignments,
        has_errors,
    ) = record
    return _build_file_index(  # type: ignore[no-any-return]
        path,
        language,
        content_hash,
        line_count,
        tuple(starmap(_build_definition, definitions)),
        tuple(starmap(_build_call, calls)),
        tuple(starmap(_build_context_block, context_blocks)),
        tuple(starmap(_build_import, imports)),
        main_block,
        string_assignments,
        has_errors,
    )


def _shared_strings(record: _Record, shared: dict[str, str]) -> _Record:
    """``record`` with equal strings replaced by one object (the first met, kept in
    ``shared``), so that marshal stores each distinct string once and loading it creates
    one object per distinct string. The record's value is unchanged."""
    intern = shared.setdefault

    def optional(text: str | None) -> str | None:
        return None if text is None else intern(text, text)

    (
        language,
        content_hash,
        line_count,
        definitions,
        calls,
        context_blocks,
        imports,
        main_block,
        string_assignments,
        has_errors,
    ) = record
    return (
        intern(language, language),
        content_hash,
        line_count,
        tuple(
            [
                (
                    intern(name, name),
                    intern(qualname, qualname),
                    intern(kind, kind),
                    start_line,
                    end_line,
                    body_start_line,
                    tuple([intern(text, text) for text in decorators]),
                    tuple([intern(text, text) for text in bases]),
                    optional(parent),
                )
                for (
                    name,
                    qualname,
                    kind,
                    start_line,
                    end_line,
                    body_start_line,
                    decorators,
                    bases,
                    parent,
                ) in definitions
            ]
        ),
        tuple(
            [
                (
                    intern(callee, callee),
                    intern(name, name),
                    line,
                    optional(enclosing),
                    intern(arguments, arguments),
                )
                for callee, name, line, enclosing, arguments in calls
            ]
        ),
        tuple(
            [
                (
                    intern(expression, expression),
                    start_line,
                    end_line,
                    optional(enclosing),
                )
                for expression, start_line, end_line, enclosing in context_blocks
            ]
        ),
        tuple(
            [
                (intern(module, module), optional(name), optional(alias), line)
                for module, name, alias, line in imports
            ]
        ),
        main_block,
        tuple([(intern(name, name), line) for name, line in string_assignments]),
        has_errors,
    )


def _record_matches(record: object, key: _CacheKey) -> bool:
    return (
        isinstance(record, tuple)
        and len(record) > 2
        and record[1] == key[0]
        and record[0] == key[1]
    )


@dataclass(frozen=True)
class StoredPack:
    """What a scan's pack held when read: every key, the keys from its delta file, and the
    size of the pack file proper (0: no pack yet)."""

    keys: frozenset[_CacheKey]
    delta_keys: frozenset[_CacheKey]
    base_size: int


class IndexCache:
    """On-disk cache of FileIndex entries keyed by content hash and language.

    Everything lives under ``directory / f"v{INDEX_VERSION}"``: one entry file per content
    and language, and in ``packs/`` one pack file per scan name holding every entry that
    scan used last time, so that repeating a scan reads one file instead of thousands
    (plus a small delta file with entries added since the pack was last written whole).
    Files are marshalled tuples behind a magic header and a checksum, written atomically;
    an unreadable, corrupt or mismatched entry or pack, or anything but a regular file in its
    place (a link, a pipe, a device), counts as a miss (and is replaced by the next write). Failing to write is logged and otherwise ignored: the cache only saves
    time.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"v{INDEX_VERSION}"
        self._entries_unwritable = False  # after one failed entry write, stop trying (and warning)

    def entry_path(self, content_hash: str, language: str) -> Path:
        """Where the entry for this content and language is stored."""
        key = f"{content_hash}-{language}"
        if not _SAFE_KEY.fullmatch(key):
            key = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / key[:2] / f"{key}.index"

    def pack_path(self, name: str) -> Path:
        """Where the pack file of the scan called ``name`` is stored."""
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / "packs" / f"{digest[:32]}.pack"

    def get(self, content_hash: str, language: str, path: str) -> FileIndex | None:
        """The cached index for this content, re-pointed at ``path``; None on a miss."""
        key = (content_hash, language)
        return _decode_or_none(self._get_record(key, path), key, path)

    def put(self, index: FileIndex) -> None:
        """Store ``index`` (replacing any entry for the same content and language)."""
        self._put_record(_record_of(index))

    def _get_record(self, key: _CacheKey, path: str) -> object:
        """The stored record for ``key`` (not yet checked), or None."""
        try:
            return unseal(_ENTRY_MAGIC, read_regular_file(self.entry_path(*key)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug(
                "ignoring unreadable index cache entry for %s: %s", path, error
            )
            return None

    def _put_record(self, record: _Record, marshalled: bytes | None = None) -> None:
        """Store ``record`` as its entry; ``marshalled``: its marshal bytes, when at hand."""
        if self._entries_unwritable:
            return
        target = self.entry_path(record[1], record[0])
        sealed = seal(_ENTRY_MAGIC, record) if marshalled is None else seal_marshalled(_ENTRY_MAGIC, marshalled)
        if not write_atomically(target, sealed):
            self._entries_unwritable = True

    def delta_path(self, name: str) -> Path:
        """Where the records added to the pack of ``name`` since it was last written whole are kept."""
        return self.pack_path(name).with_suffix(".delta")

    def _read_sealed_dict(self, target: Path) -> dict[_CacheKey, _Record]:
        try:
            records = unseal(_PACK_MAGIC, read_regular_file(target))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable index pack %s: %s", target, error)
            return {}
        if not isinstance(records, dict):
            logger.debug("ignoring malformed index pack %s", target)
            return {}
        return records

    def _read_pack(self, name: str) -> tuple[dict[_CacheKey, _Record], StoredPack]:
        """The records of a scan's pack and its delta (empty when missing or unreadable),
        and what was stored where; marks the pack used.

        Records are keyed by content, so any pack and any delta combine correctly, even
        when written by different processes."""
        target = self.pack_path(name)
        records = self._read_sealed_dict(target)
        base_size = len(records)
        delta = self._read_sealed_dict(self.delta_path(name))
        records.update(delta)
        if base_size:
            try:
                os.utime(target, follow_symlinks=False)  # pruning keeps the most recently used packs
            except OSError:
                pass
        return records, StoredPack(frozenset(records), frozenset(delta), base_size)

    def _read_donor(self, name: str) -> dict[_CacheKey, _Record]:
        """The records of the most recently used pack of another scan (with its delta), for a
        scan of ``name`` that has no pack yet: a worktree of the same repository, or the
        same tree under another name, holds mostly the same contents. Empty when there is
        none or it cannot be read; not marked used. Records are checked against their key
        when decoded, as the scan's own pack's are."""
        own = self.pack_path(name)
        aged: list[tuple[float, str, Path]] = []
        try:
            for path in (self.directory / "packs").glob("*.pack"):
                if path != own and not path.name.startswith(".tmp-"):
                    aged.append((path.lstat().st_mtime, path.name, path))
        except OSError:
            return {}
        if not aged:
            return {}
        donor = max(aged)[2]
        records = self._read_sealed_dict(donor)
        records.update(self._read_sealed_dict(donor.with_suffix(".delta")))
        return records

    def _write_delta(self, name: str, records: Mapping[_CacheKey, _Record]) -> None:
        """Replace the delta of a scan's pack by ``records`` (the pack itself is kept)."""
        write_atomically(self.delta_path(name), seal(_PACK_MAGIC, dict(sorted(records.items()))))

    def _write_pack(self, name: str, records: Mapping[_CacheKey, _Record]) -> None:
        """Replace a scan's pack by ``records``, then delete packs beyond ``MAX_PACKS``."""
        target = self.pack_path(name)
        shared: dict[str, str] = {}
        ordered = {
            (key[0], shared.setdefault(key[1], key[1])): _shared_strings(
                records[key], shared
            )
            for key in sorted(records)
        }
        if not write_atomically(target, seal(_PACK_MAGIC, ordered)):
            return
        self.delta_path(name).unlink(missing_ok=True)
        prune_least_recent(
            target.parent, "*.pack", MAX_PACKS, spare=target, companions=lambda pack: (pack.with_suffix(".delta"),)
        )
        self._prune_entries()

    def _prune_entries(self) -> None:
        """Delete the oldest entry files when there are more than ``MAX_ENTRIES``."""
        entries: list[os.DirEntry[str]] = []
        try:
            shards = [shard for shard in os.scandir(self.directory) if shard.is_dir() and len(shard.name) == 2]
            for shard in shards:
                entries.extend(entry for entry in os.scandir(shard.path) if entry.name.endswith(".index"))
        except OSError as error:
            logger.debug("cannot list index cache entries: %s", error)
            return
        if len(entries) <= MAX_ENTRIES:
            return
        aged: list[tuple[float, str]] = []
        for entry in entries:
            try:
                aged.append((entry.stat().st_mtime, entry.path))
            except OSError:
                continue  # removed meanwhile by another process
        aged.sort()
        for _, path in aged[: len(aged) - MAX_ENTRIES * 4 // 5]:
            Path(path).unlink(missing_ok=True)


def scan_pack_name(paths: Iterable[str]) -> str:
    """The default pack name of a scan of ``paths``: the set of their directories cut to
    two levels, so that a scan of the same tree finds its pack again after files inside it
    are added, removed or edited (a pack is checked entry by entry, so sharing a name with
    another tree only costs time)."""
    directories = {"/".join(path.split("/")[:-1][:2]) for path in paths}
    return "\n".join(sorted(directories))


def _decode_or_none(record: object, key: _CacheKey, path: str) -> FileIndex | None:
    """The FileIndex of a cached record for ``key``; None if absent, mismatched or malformed."""
    if record is None or not _record_matches(record, key):
        return None
    try:
        return _file_index_from_record(record, path)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        logger.debug("ignoring malformed index cache record for %s: %s", path, error)
        return None
