"""Index the files a walk kept: cached entries first, then the misses parsed (by worker
processes when there are many), and the scan's pack file brought up to date.

Input: ``(path, text, language, content_hash)`` per file. Output: one ``FileIndex`` per path.
"""

from __future__ import annotations

import gc
import logging
import marshal
import multiprocessing
import os
import pickle
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import replace

from auditor.index.cache import (
    PACK_DELTA_MIN,
    PACK_DELTA_SHARE,
    IndexCache,
    StoredPack,
    _CacheKey,
    _decode_or_none,
    _file_index_from_record,
    _Record,
    _record_of,
    scan_pack_name,
)
from auditor.index.extract import _source_record, index_source
from auditor.index.model import FileIndex
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

PARALLEL_PARSE_THRESHOLD = 300
"""Parsing is spread over worker processes when more files than this need parsing."""

logger = logging.getLogger(__name__)


MAX_PARSE_WORKERS = 4
"""Most worker processes used for parsing (fewer when fewer CPUs are available)."""


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _index_chunk(sources: list[tuple[str, str, str]]) -> bytes:
    """Worker-process entry point: the records of ``(text, language, content_hash)``
    sources, marshalled (module level, so that a spawned process can import it).

    Marshal rather than the pool's pickle: records are plain tuples, which marshal writes
    about four times faster. The collector is paused: records hold no cycles."""
    with collection_paused():
        return marshal.dumps([_source_record(*source) for source in sources])


def _parse_records(
    sources: list[tuple[str, str, str, str]],
) -> Iterator[tuple[FileIndex, _Record]]:
    """Index each source, yielding results in the order of ``sources``.

    More than ``PARALLEL_PARSE_THRESHOLD`` sources are parsed by a pool of spawned worker
    processes; if the pool cannot run here, the rest is parsed in this process.
    """
    workers = min(MAX_PARSE_WORKERS, _available_cpus())
    done = 0
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
                max_workers=workers, mp_context=multiprocessing.get_context("spawn")
            ) as executor:
                for start, payload in zip(starts, executor.map(_index_chunk, chunks)):
                    # The collector would re-scan every index decoded so far, over and
                    # over; it is paused while decoding (never across a yield).
                    with collection_paused():
                        records = marshal.loads(payload)
                        indexes = [
                            _file_index_from_record(record, source[0])
                            for source, record in zip(
                                sources[start : start + size], records, strict=True
                            )
                        ]
                    for index, record in zip(indexes, records):
                        yield index, record
                        done += 1
        except (OSError, BrokenProcessPool, pickle.PicklingError) as error:
            logger.warning(
                "parallel parsing failed, parsing in this process: %s", error
            )
    for path, text, language, content_hash in sources[done:]:
        index = index_source(path, text, language, content_hash)
        yield index, _record_of(index)


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
) -> dict[str, FileIndex]:
    """Index ``(path, text, language, content_hash)`` sources; returns path -> FileIndex.

    Only cache misses are parsed (by worker processes when there are many), and identical
    content (same hash and language) is parsed once. With a cache, entries are looked up in
    the pack ``pack_name`` (default: ``scan_pack_name`` of the paths), then in the entry
    files; afterwards the pack holds exactly the entries this call used. The result is
    ordered by path and does not depend on where entries came from. Emits
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
                if index is None and cache is not None:
                    index = _decode_or_none(cache._get_record(key, path), key, path)
                if index is None:
                    misses[key] = [source]
                    continue
                found[key] = index
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
    added: dict[_CacheKey, _Record] = {}
    for index, record in _parse_records([group[0] for group in misses.values()]):
        key = (index.content_hash, index.language)
        found[key] = index
        added[key] = record
        if cache is not None:
            cache._put_record(record)
        for _ in misses[key]:
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
    if cache is not None and pack_name is not None:
        if damaged:  # counted as missing, so that their records are written again
            stored = replace(stored, keys=stored.keys - damaged)
        _update_pack(cache, pack_name, found, added, stored, unused=len(pack))
    results: dict[str, FileIndex] = {}
    for path, _, language, content_hash in pending:
        index = found[(content_hash, language)]
        results[path] = index if index.path == path else replace(index, path=path)
    return results
