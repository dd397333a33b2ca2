"""Digest store: a persistent map from a content digest to a small integer, for values that
are pure functions of some text (its token count under one tokenizer, its relevance score
under one rule set), so a later run looks them up instead of recomputing them.

One store is an append-only file of fixed-size records: a 16-byte BLAKE2b digest of the
input, the value (unsigned 32-bit), and a CRC-32 of both. Each batch of new values is one
``write`` on a file opened with ``O_APPEND``, so processes sharing a store add whole records
without a lock. A record whose CRC does not match (a torn write, a damaged disk block) and a
partial record at the end are ignored on load, and the records after a torn one are found
again wherever they start: a damaged store costs recomputation, never a wrong value.

The store is loaded whole by every run, so its size is bounded by two generations: once the
file passes ``max_bytes`` it becomes the previous generation (``.old``) and a fresh file
starts. A value found only in the previous generation is copied into the current one, so
what is still in use survives the next turn and everything else is dropped with it. Stores
kept one per repository in a directory are bounded too (``MAX_STORES``, least recently used
first out). Every I/O failure degrades to "not cached" and is logged; the store never fails
the run that uses it. Store files are opened only as regular files, never through a link
(``O_NOFOLLOW``, also when appending), and read up to a bound: a link, a pipe or a device
in a store's place is ignored and never written through.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from auditor.storage.sealed import (
    DamagedEntry,
    file_kind,
    prune_least_recent,
    read_regular_file,
    writable_directory,
)

logger = logging.getLogger(__name__)

_APPEND_FLAGS = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)

_RECORD = struct.Struct("<16sII")
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
"""One generation's size (about 87,000 values): loading two takes a few tens of ms."""
MAX_STORES = 64
"""Stores kept side by side in one directory (one per repository): creating one more removes
the least recently used beyond this many."""


def digest_of(text: str) -> bytes:
    """The 16-byte key of ``text`` (BLAKE2b of its UTF-8 bytes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _record(key: bytes, value: int) -> bytes:
    return _RECORD.pack(key, value, zlib.crc32(key + value.to_bytes(4, "little")))


class DigestStore:
    """Digest -> value for one namespace, read once at open and appended to as values are computed."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = path
        self.previous_path = path.with_name(path.name + ".old")
        self._max_bytes = max_bytes
        self._values = self._load(path)
        self._previous = self._load(self.previous_path)
        self._exists = bool(self._values) or path.exists()
        self._unwritable = False  # after one failed write, values stay in memory and are not retried
        if self._exists:
            try:
                os.utime(path, follow_symlinks=False)  # in use: pruning keeps the most recently used stores
            except OSError:
                pass

    def _load(self, path: Path) -> dict[bytes, int]:
        values: dict[bytes, int] = {}
        try:
            # A generation passes max_bytes by at most one batch before it is turned over.
            data = read_regular_file(path, self._max_bytes * 4 + 16 * 1024 * 1024)
        except FileNotFoundError:
            return values
        except OSError as exc:
            logger.warning("digest store %s unreadable, starting empty: %s", path, exc)
            return values
        except DamagedEntry as exc:
            logger.warning("digest store %s ignored, starting empty: %s", path, exc)
            return values
        crc32 = zlib.crc32
        size = _RECORD.size
        view = memoryview(data)
        offset = 0
        while len(data) - offset >= size:
            usable = offset + (len(data) - offset) // size * size
            damaged = None
            for index, (key, value, check) in enumerate(_RECORD.iter_unpack(view[offset:usable])):
                if crc32(key + value.to_bytes(4, "little")) == check:
                    values[key] = value
                else:
                    damaged = offset + index * size
                    break
            if damaged is None:
                break
            # A write cut short (a full disk) shifts every record appended after it: look
            # for the next intact record one byte on rather than dropping the rest.
            offset = damaged + 1
        return values

    def __len__(self) -> int:
        return len(self._values.keys() | self._previous.keys())

    def get_many(self, keys: Sequence[bytes]) -> list[int | None]:
        """The stored value of each key, or None; values found only in the previous
        generation are carried into the current one."""
        found: list[int | None] = []
        carried: dict[bytes, int] = {}
        for key in keys:
            value = self._values.get(key)
            if value is None:
                value = self._previous.get(key)
                if value is not None:
                    carried[key] = value
            found.append(value)
        if carried:
            self.put_many(carried)
        return found

    def get(self, key: bytes) -> int | None:
        """The stored value of ``key``, or None."""
        return self.get_many([key])[0]

    def put_many(self, values: Mapping[bytes, int] | Iterable[tuple[bytes, int]]) -> None:
        """Store new values (in memory and on disk, in one append)."""
        items = values.items() if isinstance(values, Mapping) else values
        records = bytearray()
        for key, value in items:
            if self._values.get(key) == value:
                continue
            self._values[key] = value
            records += _record(key, value)
        if not records or self._unwritable:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not writable_directory(self.path.parent):
                raise OSError(errno.ELOOP, "the store's directory is a symbolic link")
            self._remove_damage()
            descriptor = os.open(self.path, _APPEND_FLAGS, 0o644)
            try:
                mode = os.fstat(descriptor).st_mode
                if not stat.S_ISREG(mode):
                    raise OSError(errno.EINVAL, f"{file_kind(mode)} in place of the store")
                os.write(descriptor, bytes(records))
                size = os.fstat(descriptor).st_size
            finally:
                os.close(descriptor)
            if size > self._max_bytes:
                try:
                    os.replace(self.path, self.previous_path)
                except FileNotFoundError:
                    pass  # another process turned the generation over first
                self._previous, self._values = self._values, {}
        except OSError as exc:
            logger.warning("digest store %s not written (values kept for this run only): %s", self.path, exc)
            self._unwritable = True
            return
        if not self._exists:
            self._exists = True
            self._prune_siblings()

    def _remove_damage(self) -> None:
        """Remove a link, pipe, socket or device found in the store's place (removing a
        link never touches its target), so that a fresh store replaces it."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            logger.warning("digest store %s: replacing a %s found in its place", self.path, file_kind(mode))
            os.unlink(self.path)

    def _prune_siblings(self) -> None:
        """Remove the least recently used stores of this directory beyond ``MAX_STORES``."""
        prune_least_recent(
            self.path.parent, "*.bin", MAX_STORES, spare=self.path,
            companions=lambda store: (store.with_name(store.name + ".old"),),
        )
