"""Index the files a walk kept: cached entries first, then the misses parsed (by worker
processes when there are many), and the scan's pack file brought up to date.

Input: ``(path, text, language, content_hash)`` per file. Output: one ``FileIndex`` per path,
and an ``IndexSkip`` per file whose indexing ran past its parse budget (never cached, so a
larger budget indexes it next time). Worker processes exit on their own when the process
that started them dies (even by SIGKILL): none is left running with parent pid 1.
"""

from __future__ import annotations

import gc
import logging
import marshal
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

from auditor import defaults
from auditor.index.cache import (
    ENTRY_FILES_MAX,
    PACK_DELTA_MIN,
    PACK_DELTA_SHARE,
    IndexCache,
    StoredPack,
    _CacheKey,
    _decode_or_none,
    _file_index_from_record,
    _Record,
    _record_of,
    _shared_strings,
    scan_pack_name,
)
from auditor.index.extract import ParseBudgetExceeded, _source_record, index_source
from auditor.index.model import FileIndex
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

PARALLEL_PARSE_THRESHOLD = 300
"""Parsing is spread over worker processes when more files than this need parsing."""

logger = logging.getLogger(__name__)


MAX_PARSE_WORKERS = 4
"""Most worker processes used for parsing (fewer when fewer CPUs are available)."""


PARENT_POLL_S = 0.5
"""How often a worker checks that the process that started it is still alive."""


@dataclass(frozen=True)
class IndexSkip:
    """A file that was not indexed: ``reason`` is a short code ("parse-budget"), ``detail``
    the words a report shows."""

    path: str
    reason: str
    detail: str


@dataclass(frozen=True)
class IndexOutcome:
    """Indexes by path, and the files that could not be indexed (sorted by path)."""

    indexes: dict[str, FileIndex]
    skipped: tuple[IndexSkip, ...]


def _exit_with_parent(parent_pid: int) -> None:
    """Worker-process initializer: end this process as soon as ``parent_pid`` is gone
    (the worker is then re-parented, so its parent pid changes)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="auditor-parent-watch", daemon=True).start()


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _record_or_skip(text: str, language: str, content_hash: str, budget_s: float | None) -> _Record | str:
    """The record of one source, or why it has none (a string, the skip's detail)."""
    try:
        return _source_record(text, language, content_hash, budget_s)
    except ParseBudgetExceeded as error:
        return f"{error} ({budget_s:g} s)"


def _index_chunk(sources: list[tuple[str, str, str]], budget_s: float | None = None) -> bytes:
    """Worker-process entry point: for each ``(text, language, content_hash)`` source its
    record, marshalled on its own (or a skip's detail), the list marshalled (module level,
    so that a spawned process can import it).

    Marshal rather than the pool's pickle: records are plain tuples, which marshal writes
    about four times faster. Each record's bytes are what its cache entry stores, so the
    parent writes them as they are instead of marshalling every record again. The
    collector is paused: records hold no cycles."""
    with collection_paused():
        return marshal.dumps([
            outcome if isinstance(outcome, str) else marshal.dumps(outcome)
            for outcome in (_record_or_skip(*source, budget_s) for source in sources)
        ])


def _parse_records(
    sources: list[tuple[str, str, str, str]],
    budget_s: float | None = None,
) -> Iterator[tuple[str, FileIndex, _Record, bytes | None] | tuple[str, None, str, None]]:
    """Index each source, yielding (path, index, record, the record marshalled when a worker
    sent it so, else None) or (path, None, skip detail, None) in the order of ``sources``.

    More than ``PARALLEL_PARSE_THRESHOLD`` sources are parsed by a pool of spawned worker
    processes; if the pool cannot run here, the rest is parsed in this process.
    """
    workers = min(MAX_PARSE_WORKERS, _available_cpus())
    done = 0
    shared: dict[str, str] = {}
    if (
        len(sources) > PARALLEL_PARSE_THRESHOLD
        and workers > 1
        and not multiprocessing.current_process().daemon  # daemons cannot have children
    ):
        size = max(8, -(-len(sources) // (workers * 16)))
        starts = range(0, len(sources), size)
        # Workers need no paths: they only get each source's text, language and hash.
        chunks = [
            [source[1:] for source in sources[start : start + size]] for start in starts
        ]
        try:
            with ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with_parent,
                initargs=(os.getpid(),),
            ) as executor:
                work = partial(_index_chunk, budget_s=budget_s)
                for start, payload in zip(starts, executor.map(work, chunks)):
                    # The collector would re-scan every index decoded so far, over and
                    # over; it is paused while decoding (never across a yield).
                    with collection_paused():
                        outcomes = []
                        for source, sent in zip(sources[start : start + size], marshal.loads(payload), strict=True):
                            if isinstance(sent, str):
                                outcomes.append((source[0], None, sent, None))
                                continue
                            # One object per distinct string across files, as a pack's load
                            # makes them: half the memory of each record's own copies.
                            record = _shared_strings(marshal.loads(sent), shared)
                            outcomes.append((source[0], _file_index_from_record(record, source[0]), record, sent))
                    for outcome in outcomes:
                        yield outcome  # type: ignore[misc]
                        done += 1
        except (OSError, BrokenProcessPool, pickle.PicklingError) as error:
            logger.warning(
                "parallel parsing failed, parsing in this process: %s", error
            )
    for path, text, language, content_hash in sources[done:]:
        try:
            index = index_source(path, text, language, content_hash, budget_s)
        except ParseBudgetExceeded as error:
            yield path, None, f"{error} ({budget_s:g} s)", None
            continue
        yield path, index, _record_of(index), None


def _update_pack(
    cache: IndexCache,
    name: str,
    found: Mapping[_CacheKey, FileIndex],
    added: Mapping[_CacheKey, _Record],
    stored: StoredPack,
    unused: int,
) -> None:
    """Make the pack of ``name`` hold every entry in ``found`` (the entries this call used).

    Entries the pack lacked go to its small delta file, so an edit does not rewrite the
    whole pack (~0.5 s on a 4,000-file repository). The pack is rewritten whole, and the
    delta dropped, when there is no pack yet or when the delta plus the entries no longer
    used (old versions of edited files, deleted files) pass ``PACK_DELTA_SHARE`` of it.
    """
    missing = [key for key in found if key not in stored.keys]
    if not missing and unused == 0:
        return  # the pack already holds exactly what was used
    delta = {key: added[key] if key in added else _record_of(found[key]) for key in missing}
    for key in stored.delta_keys:
        if key in found:
            delta[key] = _record_of(found[key])
    limit = max(PACK_DELTA_MIN, int(len(found) * PACK_DELTA_SHARE))
    if stored.base_size and len(delta) + unused <= limit:
        if missing:
            cache._write_delta(name, delta)
        return
    cache._write_pack(name, {key: added[key] if key in added else _record_of(index) for key, index in found.items()})


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (restoring its previous state).

    For code that allocates hundreds of thousands of objects it keeps, such as decoding
    indexes or building the call graph: collections there would only re-scan live objects.
    On leaving the block, every object the collector tracks is moved to its oldest
    generation (``gc.freeze`` then ``gc.unfreeze``), so that the next young collection does
    not scan them all either; they stay collectable, by the next full collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def index_files(
    sources: Iterable[tuple[str, str, str, str]],
    cache: IndexCache | None = None,
    progress: ProgressCallback = no_progress,
    *,
    pack_name: str | None = None,
    parse_budget_s: float | None = defaults.PARSE_BUDGET_S,
) -> dict[str, FileIndex]:
    """Path -> FileIndex of ``index_sources`` (files skipped over budget are absent)."""
    return index_sources(
        sources, cache, progress, pack_name=pack_name, parse_budget_s=parse_budget_s
    ).indexes


def index_sources(
    sources: Iterable[tuple[str, str, str, str]],
    cache: IndexCache | None = None,
    progress: ProgressCallback = no_progress,
    *,
    pack_name: str | None = None,
    parse_budget_s: float | None = defaults.PARSE_BUDGET_S,
) -> IndexOutcome:
    """Index ``(path, text, language, content_hash)`` sources.

    A file whose indexing takes more than ``parse_budget_s`` seconds (None: no limit) is
    skipped (``IndexOutcome.skipped``, reason "parse-budget") and not cached.

    Only cache misses are parsed (by worker processes when there are many), and identical
    content (same hash and language) is parsed once. With a cache, entries are looked up in
    the pack ``pack_name`` (default: ``scan_pack_name`` of the paths), then, when that scan
    has no pack yet, in the most recently used pack of another scan, then in the entry
    files; afterwards the pack holds exactly the entries this call used. Parsed records
    are also written as entry files, except when the scan had no pack and more than
    ``ENTRY_FILES_MAX`` were parsed (then the pack written whole holds them). The result
    is ordered by path and does not depend on where entries came from. Emits
    ProgressEvent(stage="index") per file.
    """
    pending = sorted(sources, key=lambda source: source[0])
    total = len(pending)
    if cache is not None and pack_name is None:
        pack_name = scan_pack_name(source[0] for source in pending)
    found: dict[_CacheKey, FileIndex] = {}
    misses: dict[_CacheKey, list[tuple[str, str, str, str]]] = {}
    damaged: set[_CacheKey] = set()
    completed = 0
    with collection_paused():
        pack, stored = (
            cache._read_pack(pack_name)
            if cache is not None and pack_name is not None
            else ({}, StoredPack(frozenset(), frozenset(), 0))
        )
        # A scan without a pack of its own borrows the newest other pack's records.
        donor = cache._read_donor(pack_name) if cache is not None and pack_name is not None and not stored.keys else {}
        for source in pending:
            path, _, language, content_hash = source
            key = (content_hash, language)
            if key in misses:
                misses[key].append(source)
                continue
            if key not in found:
                # Popping lets each record be freed once decoded, and leaves in the pack
                # only the entries this scan did not use.
                record = pack.pop(key, None)
                index = _decode_or_none(record, key, path)
                if index is None and record is not None:
                    damaged.add(key)  # stored but unusable: the pack must be repaired
                if index is None and key in donor:
                    index = _decode_or_none(donor.pop(key), key, path)
                if index is None and cache is not None:
                    index = _decode_or_none(cache._get_record(key, path), key, path)
                if index is None:
                    misses[key] = [source]
                    continue
                found[key] = index
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
        del donor
    added: dict[_CacheKey, _Record] = {}
    # A first index of a large tree keeps its records in the pack written whole only.
    write_entries = cache is not None and (bool(stored.keys) or len(misses) <= ENTRY_FILES_MAX)
    skipped: list[IndexSkip] = []
    over_budget: set[_CacheKey] = set()
    for path, index, record, marshalled in _parse_records([group[0] for group in misses.values()], parse_budget_s):
        if index is None:
            source_key = next(key for key, group in misses.items() if group[0][0] == path)
            over_budget.add(source_key)
            skipped.extend(IndexSkip(source[0], "parse-budget", record) for source in misses[source_key])  # type: ignore[arg-type]
            completed += len(misses[source_key])
            progress(ProgressEvent(stage="index", completed=completed, total=total, message=f"{path}: not indexed, {record}"))
            continue
        key = (index.content_hash, index.language)
        found[key] = index
        added[key] = record
        if write_entries:
            cache._put_record(record, marshalled)  # type: ignore[union-attr]
        for _ in misses[key]:
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
    if cache is not None and pack_name is not None:
        if damaged:  # counted as missing, so that their records are written again
            stored = replace(stored, keys=stored.keys - damaged)
        _update_pack(cache, pack_name, found, added, stored, unused=len(pack))
    results: dict[str, FileIndex] = {}
    for path, _, language, content_hash in pending:
        if (content_hash, language) in over_budget:
            continue
        index = found[(content_hash, language)]
        results[path] = index if index.path == path else replace(index, path=path)
    return IndexOutcome(results, tuple(sorted(skipped, key=lambda skip: skip.path)))
