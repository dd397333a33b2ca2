"""The call graph cache: built graphs stored on disk, keyed by what they were built from.

The key (:func:`graph_cache_key`) is a digest over every indexed file's path, language and
content hash: an unchanged repository loads its graph (plain marshalled rows) instead of
resolving every call again.

After an edit that leaves every file's *symbol surface* as it was (:func:`surface_digest`:
what resolving another file's calls can see of a file: its definitions' names, kinds,
parents, bases, decorators and whether they have a body, its imports, its distinct callee
texts; not its line numbers or call sites), the graph is rebuilt from the stored graph of
the same surfaces (:func:`surface_key`): only the changed files' calls are resolved again.
The files' surface digests are kept too (``latest.surfaces``, by path, language and content
hash, for auditor's code of the run that stored them): after an edit only the changed
files' are computed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from auditor.callgraph.graph import ROW_WIDTH, CallGraph, FileRows
from auditor.callgraph.symbols import attachments
from auditor.index.indexer import collection_paused
from auditor.index.model import INDEX_VERSION, FileIndex
from auditor.storage.package import package_digest
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically

GRAPH_VERSION = 9
"""Version of the graph cache format and of the resolution rules; part of the cache key.
Bump it when either changes so that stale cached graphs are never read."""

MAX_GRAPHS = 8
"""Most graph files one cache directory keeps; the least recently used are deleted first."""

_GRAPH_MAGIC = b"auditor-call-graph\n"
_BASE_MAGIC = b"auditor-call-graph-base\n"
_SURFACES_MAGIC = b"auditor-call-graph-surfaces\n"

logger = logging.getLogger(__name__)


def graph_cache_key(indexes: Mapping[str, FileIndex]) -> str:
    """A digest naming the graph of ``indexes``: over every file's path, language and
    content hash (an index is a function of its content and language, under one
    ``INDEX_VERSION``), the graph and index format versions, the Python version (module
    resolution consults its standard-library module names) and auditor's own code
    (:func:`package_digest`: a development checkout changes the resolution rules without a
    new ``GRAPH_VERSION``)."""
    # Length-prefixed texts, not marshal: marshal's bytes depend on which equal strings are
    # one object (it writes a repeated object as a back-reference), so equal indexes could
    # get different keys.
    digest = hashlib.sha256(repr((GRAPH_VERSION, INDEX_VERSION, tuple(sys.version_info[:2]), package_digest())).encode())
    for path in sorted(indexes):
        index = indexes[path]
        for text in (path, index.language, index.content_hash):
            data = text.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return digest.hexdigest()


def surface_digest(index: FileIndex) -> bytes:
    """A digest of what resolving *other* files' calls can read of ``index`` (the lookups of
    ``auditor.callgraph.symbols`` and ``auditor.callgraph.resolve``): the language, each
    definition's name, qualname, kind, parent, bases, decorators and whether it has a body
    (in order), each import's module, name and alias, the distinct callee texts and the
    functions the file attaches to classes (``add_to_class``, whose arguments name them). Line
    numbers and the call sites themselves only shape the file's own edges."""
    surface = (
        index.language,
        tuple(
            (d.name, d.qualname, d.kind, d.body_start_line <= d.end_line, d.decorators, d.bases, d.parent)
            for d in index.definitions
        ),
        tuple((record.module, record.name, record.alias) for record in index.imports),
        tuple(sorted({call.callee for call in index.calls})),
        attachments(index),
    )
    return hashlib.blake2b(repr(surface).encode("utf-8", "surrogatepass"), digest_size=16).digest()


Stamp = tuple[str, str, str]
"""A file's path, language and content hash: what its index, and so its surface digest, is
a function of (with auditor's code)."""


def surface_digests(indexes: Mapping[str, FileIndex], known: Mapping[Stamp, bytes] | None = None) -> dict[str, bytes]:
    """Each file's :func:`surface_digest`, taken from ``known`` (digests stored under a
    file's :data:`Stamp` by an earlier run of the same code) where it has the file's."""
    found: dict[str, bytes] = {}
    for path, index in indexes.items():
        stored = known.get((path, index.language, index.content_hash)) if known else None
        found[path] = stored if stored is not None else surface_digest(index)
    return found


def surface_key(indexes: Mapping[str, FileIndex], digests: Mapping[str, bytes] | None = None) -> str:
    """A digest over every file's path and :func:`surface_digest` (and the versions
    :func:`graph_cache_key` covers): two sets of files with one surface key differ only in
    what shapes each file's own edges. ``digests``: the files' surface digests when the
    caller has them (:func:`surface_digests`)."""
    digests = digests if digests is not None else surface_digests(indexes)
    digest = hashlib.sha256(repr(("surface", GRAPH_VERSION, INDEX_VERSION, tuple(sys.version_info[:2]), package_digest())).encode())
    for path in sorted(indexes):
        data = path.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
        digest.update(digests[path])
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

    def base_path(self, surface: str) -> Path:
        """Where the pointer from a surface key to its latest stored graph is kept."""
        return self.directory / f"{surface}.base"

    @property
    def surfaces_path(self) -> Path:
        """Where the surface digests of the files of the latest graph built are kept."""
        return self.directory / "latest.surfaces"

    def build(self, indexes: Mapping[str, FileIndex], on_change: Callable[[], None] | None = None) -> CallGraph:
        """The graph of ``indexes``: the stored one for the same files (paths, languages and
        content hashes), else one rebuilt from the stored graph of the same surfaces
        (resolving only the changed files' calls), else one built now; stored either way.
        It answers every query exactly as a fresh :meth:`CallGraph.build` would.
        ``on_change`` is called before any resolving starts (see ``prepare_repository``)."""
        graph = self.get(indexes)
        if graph is None:
            if on_change is not None:
                on_change()
            known = self._stored_surfaces()
            digests = surface_digests(indexes, known)
            surface = surface_key(indexes, digests)  # once: both the lookup and the store need it
            graph = self._rebuilt(indexes, surface)
            if graph is None:
                graph = CallGraph.build(indexes)
            self.put(indexes, graph, surface=surface)
            stamps = {(path, index.language, index.content_hash): digests[path] for path, index in indexes.items()}
            if stamps != known:
                self._store_surfaces(stamps)
        return graph

    def _surfaces_context(self) -> tuple[object, ...]:
        """What a stored surface digest is valid for: the versions and auditor's own code
        (the extraction that made the index, and :func:`surface_digest` itself)."""
        return ("surfaces", GRAPH_VERSION, INDEX_VERSION, tuple(sys.version_info[:2]), package_digest())

    def _stored_surfaces(self) -> dict[Stamp, bytes]:
        """The surface digests of the latest graph's files by :data:`Stamp` (empty when there
        are none, they are damaged, or another version of auditor stored them)."""
        try:
            with collection_paused():
                stored = unseal(_SURFACES_MAGIC, read_regular_file(self.surfaces_path))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable surface digests %s: %s", self.surfaces_path, error)
            return {}
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == self._surfaces_context() and isinstance(stored[1], tuple)):
            return {}
        found: dict[Stamp, bytes] = {}
        for entry in stored[1]:
            if not (isinstance(entry, tuple) and len(entry) == 4 and all(isinstance(part, str) for part in entry[:3]) and isinstance(entry[3], bytes)):
                return {}
            found[(entry[0], entry[1], entry[2])] = entry[3]
        return found

    def _store_surfaces(self, stamps: Mapping[Stamp, bytes]) -> None:
        """Keep ``stamps`` (the current files' surface digests) for the next build."""
        rows = tuple((*stamp, digest) for stamp, digest in sorted(stamps.items()))
        write_atomically(self.surfaces_path, seal(_SURFACES_MAGIC, (self._surfaces_context(), rows)))

    def _rebuilt(self, indexes: Mapping[str, FileIndex], surface: str) -> CallGraph | None:
        """The graph rebuilt from the stored graph whose files have the same surfaces
        (``surface``: their :func:`surface_key`), or None when there is none (or it cannot
        be read)."""
        target = self.base_path(surface)
        try:
            with collection_paused():
                pointer = unseal(_BASE_MAGIC, read_regular_file(target))
                if not (
                    isinstance(pointer, tuple) and len(pointer) == 3 and pointer[0] == surface
                    and isinstance(pointer[1], str) and isinstance(pointer[2], tuple)
                ):
                    return None
                _, key, hashes = pointer
                rows = _checked_rows(unseal(_GRAPH_MAGIC, read_regular_file(self.graph_path(key))), key, indexes)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable call graph base %s: %s", target, error)
            return None
        if rows is None or not all(isinstance(entry, tuple) and len(entry) == 2 for entry in hashes):
            return None
        previous = dict(hashes)
        if previous.keys() != indexes.keys():
            return None
        changed = [path for path, index in indexes.items() if previous[path] != index.content_hash]
        return CallGraph.rebuild(indexes, dict(rows), changed)

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

    def put(self, indexes: Mapping[str, FileIndex], graph: CallGraph, *, surface: str | None = None) -> None:
        """Store ``graph`` as the graph of ``indexes`` (and as the latest graph of their surface
        key, ``surface`` when the caller has it), then delete graphs beyond ``MAX_GRAPHS``."""
        key = graph_cache_key(indexes)
        target = self.graph_path(key)
        if not write_atomically(target, seal(_GRAPH_MAGIC, (key, graph.rows))):
            return
        surface = surface if surface is not None else surface_key(indexes)
        base = self.base_path(surface)
        hashes = tuple((path, indexes[path].content_hash) for path in sorted(indexes))
        write_atomically(base, seal(_BASE_MAGIC, (surface, key, hashes)))
        prune_least_recent(self.directory, "*.graph", MAX_GRAPHS, spare=target)
        prune_least_recent(self.directory, "*.base", MAX_GRAPHS, spare=base)


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
