"""The call graph cache: built graphs stored on disk, keyed by what they were built from.

The key (:func:`graph_cache_key`) is a digest over every indexed file's path, language and
content hash: an unchanged repository loads its graph (plain marshalled rows) instead of
resolving every call again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from auditor.callgraph.graph import ROW_WIDTH, CallGraph, FileRows
from auditor.index.indexer import collection_paused
from auditor.index.model import INDEX_VERSION, FileIndex
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically

GRAPH_VERSION = 5
"""Version of the graph cache format and of the resolution rules; part of the cache key.
Bump it when either changes so that stale cached graphs are never read."""

MAX_GRAPHS = 8
"""Most graph files one cache directory keeps; the least recently used are deleted first."""

_GRAPH_MAGIC = b"auditor-call-graph\n"

logger = logging.getLogger(__name__)


def graph_cache_key(indexes: Mapping[str, FileIndex]) -> str:
    """A digest naming the graph of ``indexes``: over every file's path, language and
    content hash (an index is a function of its content and language, under one
    ``INDEX_VERSION``), the graph and index format versions, and the Python version (module
    resolution consults its standard-library module names)."""
    # Length-prefixed texts, not marshal: marshal's bytes depend on which equal strings are
    # one object (it writes a repeated object as a back-reference), so equal indexes could
    # get different keys.
    digest = hashlib.sha256(repr((GRAPH_VERSION, INDEX_VERSION, tuple(sys.version_info[:2]))).encode())
    for path in sorted(indexes):
        index = indexes[path]
        for text in (path, index.language, index.content_hash):
            data = text.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return digest.hexdigest()


class CallGraphCache:
    """On-disk cache of built call graphs, keyed by :func:`graph_cache_key`.

    Graphs live under ``directory / f"graph-v{GRAPH_VERSION}"``, one file per key holding
    the key and the graph's rows as marshalled plain tuples behind a magic header and a
    checksum, written atomically. An unreadable, corrupt, mismatched or malformed file
    counts as a miss (and is replaced by the next write); the ``MAX_GRAPHS`` most recently
    used files are kept. Failing to write is logged and otherwise ignored.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"graph-v{GRAPH_VERSION}"

    def graph_path(self, key: str) -> Path:
        """Where the graph with this key is stored."""
        return self.directory / f"{key}.graph"

    def build(self, indexes: Mapping[str, FileIndex]) -> CallGraph:
        """The graph of ``indexes``: the stored one for the same files (paths, languages and
        content hashes), else one built now and stored. Either way it answers every query
        exactly as a fresh :meth:`CallGraph.build` would."""
        graph = self.get(indexes)
        if graph is None:
            graph = CallGraph.build(indexes)
            self.put(indexes, graph)
        return graph

    def get(self, indexes: Mapping[str, FileIndex]) -> CallGraph | None:
        """The stored graph of exactly these files, or None on a miss."""
        key = graph_cache_key(indexes)
        target = self.graph_path(key)
        try:
            with collection_paused():
                stored = unseal(_GRAPH_MAGIC, read_regular_file(target))
                rows = _checked_rows(stored, key, indexes)
                graph = CallGraph(indexes, rows) if rows is not None else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable call graph cache file %s: %s", target, error)
            return None
        if graph is None:
            logger.debug("ignoring malformed call graph cache file %s", target)
            return None
        try:
            os.utime(target)  # pruning keeps the most recently used graphs
        except OSError:
            pass
        return graph

    def put(self, indexes: Mapping[str, FileIndex], graph: CallGraph) -> None:
        """Store ``graph`` as the graph of ``indexes``, then delete graphs beyond ``MAX_GRAPHS``."""
        key = graph_cache_key(indexes)
        target = self.graph_path(key)
        if not write_atomically(target, seal(_GRAPH_MAGIC, (key, graph.rows))):
            return
        prune_least_recent(self.directory, "*.graph", MAX_GRAPHS, spare=target)


def _checked_rows(stored: object, key: str, indexes: Mapping[str, FileIndex]) -> FileRows | None:
    """The rows of a stored ``(key, rows)`` value when it is one for ``key`` and every row
    is well formed for ``indexes`` (files in path order, five typed values per edge); else None."""
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key and isinstance(stored[1], tuple)):
        return None
    rows = stored[1]
    previous = ""
    for entry in rows:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            return None
        path, flat = entry
        if not (isinstance(path, str) and path > previous and path in indexes and isinstance(flat, tuple)):
            return None
        if not flat or len(flat) % ROW_WIDTH:
            return None
        for column, expected in enumerate((str, str, str, int, bool)):
            if set(map(type, flat[column::ROW_WIDTH])) != {expected}:
                return None
        if not all(map(indexes.__contains__, flat[1::ROW_WIDTH])):
            return None
        previous = path
    return rows
