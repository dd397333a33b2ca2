"""The call graph: resolved calls as edges between functions, and the queries over them.

Input: ``FileIndex`` objects keyed by repository path. Output: a :class:`CallGraph` of
:class:`Edge` objects between :class:`FunctionRef` nodes, with queries for callers, callees,
paths between two functions, connected components of files (the packer groups windows by
them) and edge plausibility (grounding model chains). How a call site becomes an edge is
:mod:`auditor.callgraph.resolve`; storing built graphs, :mod:`auditor.callgraph.cache`.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from auditor.callgraph.names import MAIN_FUNCTION, MODULE_FUNCTION, strip_arguments
from auditor.callgraph.resolve import Repository, file_edges
from auditor.callgraph.imports import Symbol
from auditor.index.indexer import collection_paused
from auditor.index.model import Definition, FileIndex

# Enumerating simple paths is exponential in the worst case; a caller asking for paths
# between two functions wants evidence, not an exhaustive listing.
MAX_PATHS = 256


# FunctionRef and Edge are the keys of nearly every table of the call graph and the static
# pass (a million hashes in one analysis of a large repository): each keeps its hash once
# computed, in a slot that is no field (so not in ``fields``, ``astuple``, comparisons or
# pickles). The value is the one the dataclass's own ``__hash__`` gives, the hash of the
# fields' tuple.


@dataclass(frozen=True, order=True)
class FunctionRef:
    """A function or method by repository path and qualified name ("Class.method")."""

    __slots__ = ("path", "qualname", "_hash")

    path: str
    qualname: str

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            value = hash((self.path, self.qualname))
            object.__setattr__(self, "_hash", value)
            return value

    def __reduce__(self) -> tuple[type[FunctionRef], tuple[str, str]]:
        return (FunctionRef, (self.path, self.qualname))  # the fields only: a hash is per process


@dataclass(frozen=True, order=True)
class Edge:
    """One resolved call: ``caller`` calls ``callee`` at ``line`` of the caller's file.

    ``approximate`` is True when the callee was found by a unique-name fallback rather than
    by following scopes, imports or classes.
    """

    __slots__ = ("caller", "callee", "line", "approximate", "_hash")

    caller: FunctionRef
    callee: FunctionRef
    line: int
    approximate: bool

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            value = hash((self.caller, self.callee, self.line, self.approximate))
            object.__setattr__(self, "_hash", value)
            return value

    def __reduce__(self) -> tuple[type[Edge], tuple[FunctionRef, FunctionRef, int, bool]]:
        return (Edge, (self.caller, self.callee, self.line, self.approximate))


ROW_WIDTH = 5
FlatRows = tuple[Any, ...]
"""A file's edges as one flat tuple, ``ROW_WIDTH`` values per edge: caller qualname, callee
path, callee qualname, line, approximate; edges sorted and distinct. One tuple per file
rather than one per edge: the graph holds tens of thousands of edges, and every container
object costs the garbage collector a visit."""

FileRows = tuple[tuple[str, FlatRows], ...]
"""Every file with edges, in path order, with its flat rows: the graph's content, in the
plain form the graph cache stores."""


def rows_of(flat: FlatRows) -> Iterator[tuple[str, str, str, int, bool]]:
    """The (caller, callee path, callee, line, approximate) rows of a flat rows tuple."""
    values = iter(flat)
    return zip(values, values, values, values, values)


class CallGraph:
    """Directed call graph over every function of the indexed files.

    The graph keeps its edges as plain rows per file; :class:`Edge` objects (and the
    repository lookup tables behind :meth:`definition`, :meth:`resolve` and friends) are
    made on first use, so a caller that only asks for file neighbours or components never
    pays for them.
    """

    def __init__(
        self, indexes: Mapping[str, FileIndex], rows: FileRows, repository: Repository | None = None
    ) -> None:
        """A graph over ``indexes`` with the given rows (files in path order, rows sorted
        and distinct, as ``build`` makes them); use :meth:`build` to resolve a repository."""
        self._indexes = indexes
        self._rows = rows
        self._lookup = repository
        self._edges: tuple[Edge, ...] | None = None
        self._outgoing: dict[FunctionRef, tuple[Edge, ...]] = {}
        self._incoming: dict[FunctionRef, tuple[Edge, ...]] = {}
        self._bases: dict[FunctionRef, tuple[FunctionRef, ...]] = {}
        neighbours: dict[str, set[str]] = defaultdict(set)
        for path, flat in rows:
            others = set(flat[1::ROW_WIDTH])
            others.discard(path)
            if others:
                neighbours[path].update(others)
                for other in others:
                    neighbours[other].add(path)
        self._neighbours = {path: tuple(sorted(items)) for path, items in neighbours.items()}

    @classmethod
    def build(cls, indexes: Mapping[str, FileIndex]) -> CallGraph:
        """Resolve every call site of ``indexes`` into edges (unresolvable calls are dropped).

        :meth:`auditor.callgraph.cache.CallGraphCache.build` loads a stored graph of the same
        files instead, when there is one.
        """
        with collection_paused():
            repository = Repository(indexes)
            rows: list[tuple[str, FlatRows]] = []
            for path in sorted(indexes):
                file_rows = file_edges(repository, path, indexes[path])
                if file_rows:
                    rows.append((path, tuple(chain.from_iterable(file_rows))))
            return cls(indexes, tuple(rows), repository)

    @classmethod
    def rebuild(cls, indexes: Mapping[str, FileIndex], base: Mapping[str, FlatRows], changed: Collection[str]) -> CallGraph:
        """The graph of ``indexes`` from ``base``, the rows by path of a graph of the same files
        whose symbol surfaces (``auditor.callgraph.cache.surface_key``) all equal these: only
        the ``changed`` files' calls are resolved again, every other file keeps its rows. The
        result equals a fresh :meth:`build`: a file's edges depend on its own index and on the
        other files' surfaces only."""
        with collection_paused():
            repository = Repository(indexes)
            rows = {path: flat for path, flat in base.items() if path not in changed}
            for path in sorted(changed):
                file_rows = file_edges(repository, path, indexes[path])
                if file_rows:
                    rows[path] = tuple(chain.from_iterable(file_rows))
            return cls(indexes, tuple(sorted(rows.items())), repository)

    @property
    def rows(self) -> FileRows:
        """The graph's content as plain rows (what the graph cache stores)."""
        return self._rows

    @property
    def _repository(self) -> Repository:
        """The lookup tables over the indexes, made on first use."""
        if self._lookup is None:
            with collection_paused():
                self._lookup = Repository(self._indexes)
        return self._lookup

    def _materialize(self) -> tuple[Edge, ...]:
        """Make the Edge objects and the caller/callee tables from the rows (once)."""
        if self._edges is not None:
            return self._edges
        with collection_paused():
            refs: dict[tuple[str, str], FunctionRef] = {}
            edges: list[Edge] = []
            outgoing: dict[FunctionRef, tuple[Edge, ...]] = {}
            incoming: dict[FunctionRef, list[Edge]] = defaultdict(list)
            # Files in path order, each file's rows sorted: the edges come out sorted, and
            # a caller's edges are consecutive.
            for path, flat in self._rows:
                caller_ref: FunctionRef | None = None
                first = len(edges)
                for caller, callee_path, callee, line, approximate in rows_of(flat):
                    if caller_ref is None or caller_ref.qualname != caller:
                        if caller_ref is not None:
                            outgoing[caller_ref] = tuple(edges[first:])
                            first = len(edges)
                        caller_ref = refs.get((path, caller))
                        if caller_ref is None:
                            caller_ref = refs[(path, caller)] = FunctionRef(path, caller)
                    callee_ref = refs.get((callee_path, callee))
                    if callee_ref is None:
                        callee_ref = refs[(callee_path, callee)] = FunctionRef(callee_path, callee)
                    edge = Edge(caller_ref, callee_ref, line, approximate)
                    edges.append(edge)
                    incoming[callee_ref].append(edge)
                if caller_ref is not None:
                    outgoing[caller_ref] = tuple(edges[first:])
            self._outgoing = outgoing
            self._incoming = {ref: tuple(items) for ref, items in incoming.items()}
            self._edges = tuple(edges)
        return self._edges

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge, sorted."""
        return self._materialize()

    def callers(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Edges into ``ref``, sorted by caller and line."""
        self._materialize()
        return self._incoming.get(ref, ())

    def callees(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Edges out of ``ref``, sorted by callee and line."""
        self._materialize()
        return self._outgoing.get(ref, ())

    def definition(self, ref: FunctionRef) -> Definition | None:
        """The index definition behind a reference (None for ``<module>``/``<main>``)."""
        return self._repository.symbols.definitions.get(ref.path, {}).get(ref.qualname)

    def paths(self, source: FunctionRef, target: FunctionRef, max_depth: int = 8) -> tuple[tuple[Edge, ...], ...]:
        """Simple call paths from ``source`` to ``target`` of at most ``max_depth`` edges.

        Between the same two functions only the first call site is used (exact edges before
        approximate ones). Shortest paths come first; at most ``MAX_PATHS`` are returned.
        """
        found: list[tuple[Edge, ...]] = []
        if max_depth < 1:
            return ()
        reaches_target = self._reverse_reach(target, max_depth)
        if source not in reaches_target:
            return ()
        stack: list[tuple[FunctionRef, tuple[Edge, ...], frozenset[FunctionRef]]] = [(source, (), frozenset({source}))]
        while stack and len(found) < MAX_PATHS * 4:
            node, trail, seen = stack.pop()
            for edge in reversed(self._first_edges(node)):
                nxt = edge.callee
                if nxt == target:
                    found.append((*trail, edge))
                    continue
                remaining = max_depth - len(trail) - 1
                if nxt in seen or remaining < 1 or reaches_target.get(nxt, max_depth + 1) > remaining:
                    continue
                stack.append((nxt, (*trail, edge), seen | {nxt}))
        found.sort(key=lambda path: (len(path), path))
        return tuple(found[:MAX_PATHS])

    def _first_edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        best: dict[FunctionRef, Edge] = {}
        for edge in self.callees(ref):
            current = best.get(edge.callee)
            if current is None or (edge.approximate, edge.line) < (current.approximate, current.line):
                best[edge.callee] = edge
        return tuple(best[key] for key in sorted(best))

    def _reverse_reach(self, target: FunctionRef, max_depth: int) -> dict[FunctionRef, int]:
        """Distance (in edges) from each function that can reach ``target``."""
        distance = {target: 0}
        queue = deque([target])
        while queue:
            node = queue.popleft()
            if distance[node] >= max_depth:
                continue
            for edge in self.callers(node):
                if edge.caller not in distance:
                    distance[edge.caller] = distance[node] + 1
                    queue.append(edge.caller)
        return distance

    def components(self) -> tuple[tuple[str, ...], ...]:
        """Connected components of the undirected file graph (every indexed file appears once).

        Each component is sorted; components are ordered by their first path.
        """
        parent = {path: path for path in self._indexes}

        def root(path: str) -> str:
            while parent[path] != path:
                parent[path] = parent[parent[path]]
                path = parent[path]
            return path

        for path, others in self._neighbours.items():
            for other in others:
                left, right = root(path), root(other)
                if left != right:
                    parent[max(left, right)] = min(left, right)
        groups: dict[str, list[str]] = defaultdict(list)
        for path in parent:
            groups[root(path)].append(path)
        return tuple(sorted(tuple(sorted(group)) for group in groups.values()))

    def file_neighbors(self, path: str) -> tuple[str, ...]:
        """Other files linked to ``path`` by any edge, in either direction, sorted."""
        return self._neighbours.get(path, ())

    def _refs_named(self, path: str, function: str) -> list[FunctionRef]:
        """References in ``path`` for a qualname, or for a bare name (all definitions with it)."""
        if function in (MODULE_FUNCTION, MAIN_FUNCTION):
            return [FunctionRef(path, function)]
        table = self._repository.symbols.definitions.get(path, {})
        if function in table:
            return [FunctionRef(path, function)]
        short = function.split(".")[-1]
        return [FunctionRef(path, qualname) for qualname, item in sorted(table.items()) if item.name == short]

    def plausible_edge(self, caller_path: str, caller_function: str, callee_path: str, callee_function: str) -> bool:
        """True when the graph has an edge (exact or approximate) from the caller to the callee.

        Functions may be given as qualified names ("Class.method") or bare names.
        """
        targets = set(self._refs_named(callee_path, callee_function))
        if not targets:
            return False
        for caller in self._refs_named(caller_path, caller_function):
            if any(edge.callee in targets for edge in self.callees(caller)):
                return True
        return False

    def module_path(self, path: str, module: str) -> str | None:
        """The repository file of the Python module ``module`` as an import in ``path``
        names it (``..core``, ``aleph.core``), if the repository has one."""
        imports = self._repository.symbols.imports
        return imports.find_module(imports._absolute_module(path, module), path)

    def resolve(self, path: str, name: str) -> FunctionRef | None:
        """Resolve a dotted name as written at module level of ``path`` (functions and classes).

        Falls back to a unique definition with the same last name among the files of
        ``path``'s language family.
        """
        text = strip_arguments(name)
        if not text:
            return None
        parts = text.split(".")
        resolution = self._repository.resolve_name(path, parts, None)
        if resolution.target is not None:
            return FunctionRef(resolution.path, resolution.target.qualname)
        if resolution.stop:
            return None
        fallback = self._repository.symbols.fallback(path, parts)
        if fallback is None:
            classes = self._repository.symbols.classes_named(path, parts[-1])
            return FunctionRef(classes[0][0], classes[0][1].qualname) if len(classes) == 1 else None
        return FunctionRef(fallback[0], fallback[1].qualname)

    def imported_from(self, path: str, name: str) -> tuple[str, str] | None:
        """The repository file and name a ``from module import name`` binding of ``path``
        names (``name`` as ``path`` spells it, an alias too), or None: not imported so, or
        from a module outside the repository."""
        binding = self._repository.symbols.imports.bindings(path).get(name)
        if not isinstance(binding, Symbol) or ":" in binding.module:
            return None
        module_path = self._repository.symbols.imports.find_module(binding.module, path) if binding.module else None
        return (module_path, binding.name) if module_path is not None else None

    def class_member(self, ref: FunctionRef, member: str) -> FunctionRef | None:
        """The method ``member`` of the class ``ref``, looked up through repository bases."""
        cls = self.definition(ref)
        if cls is None or cls.kind != "class":
            return None
        found = self._repository.class_member(ref.path, cls, member)
        return FunctionRef(found[0], found[1].qualname) if found is not None else None

    def external_bases(self, ref: FunctionRef) -> tuple[str, ...]:
        """The bases the class ``ref`` writes that are no repository class (a library's), as written."""
        cls = self.definition(ref)
        if cls is None or cls.kind != "class":
            return ()
        return self._repository.external_bases(ref.path, cls)

    def base_classes(self, ref: FunctionRef) -> tuple[FunctionRef, ...]:
        """The repository classes ``ref`` derives from, directly (found once per class: the
        indexes and their lookup tables do not change under a graph)."""
        found = self._bases.get(ref)
        if found is None:
            cls = self.definition(ref)
            if cls is None or cls.kind != "class":
                found = ()
            else:
                found = tuple(FunctionRef(path, item.qualname) for path, item in self._repository.base_classes(ref.path, cls))
            self._bases[ref] = found
        return found
