"""Reachability for the transaction analysis: which functions the production entry
points reach, over the call graph plus approximate dispatch edges (:mod:`.dispatch`) and
the framework's calls into the project (:mod:`.framework_calls`), and which functions have
any effect below them.

Inputs: the index, the call graph, the dispatch edges, the framework's calls and the
per-file facts. Output:
:class:`Reach` (``callees`` out of a function, the call site behind an edge, whether an
effect lies below a function, a breadth-first ``search`` from the entry points) and
:func:`production_entries`.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.languages import PYTHON_BUILTINS
from auditor.callgraph.names import MAIN_FUNCTION, MODULE_FUNCTION
from auditor.analysis.entrypoints import DRF_HOOK_ACTIONS, EntryPoint, find_entry_points, framework_invoked, is_test_path
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.dispatch import OVERRIDE, Dispatch, class_of
from auditor.analysis.transactions.facts import FileFacts, enclosing_of
from auditor.analysis.transactions.framework_calls import FrameworkCalls
from auditor.index.model import CallSite, FileIndex
from auditor.rules.loader import Rule

Trail = tuple[Edge, ...]
"""The calls from an entry point to a function, in order."""

_DEV_DATA_COMMAND = re.compile(r"(?:^|/)management/commands/(?:populate\w*|seed\w*|clear\w*|\w*fake\w*|\w*demo\w*|\w*sample\w*|load_?\w*data)\.py$")
# A dev-data script sits at the top of the tree or in scripts/, tools/ or bin/; deeper
# (an app's tasks/populate_balances.py, say), the name says nothing.
_DEV_DATA_SCRIPT = re.compile(r"^(?:(?:scripts?|tools|bin)/)?(?:populate\w*|seed\w*|\w*fake\w*)\.py$")
_HOOK_SEARCH = 4
"""How many calls deep :func:`unrun_hook_action` looks for a call that may run the action."""
_FIXTURE_DIRECTORIES = frozenset({"fixtures", "fixture", "testdata", "test_data", "examples", "example"})
# A stand-in for another service (galaxy_ng's profiles/community/github_mock/flaskapp.py):
# ``mock``/``mocks``, ``github_mock``, ``mock-server``/``mock_server``/``mockserver``; not
# ``mock_exam`` or ``mock_gateway``, which may be a product's own app.
_MOCK_DIRECTORY = re.compile(r"(?i)^(?:mocks?|\w+[_-]mocks?|mock[_-]?servers?)$")


def production_entries(
    indexes: Mapping[str, FileIndex], graph: CallGraph, rule: Rule, texts: Mapping[str, str], include_tests: bool,
    framework_entries: tuple[EntryPoint, ...] = (),
) -> tuple[EntryPoint, ...]:
    """The rule's entry points and ``framework_entries`` (the view actions DRF runs, see
    :mod:`.framework_calls`), less tests, fixtures and dev-data commands and scripts unless
    ``include_tests``."""
    found = find_entry_points(indexes, graph, rule, texts, include_tests=include_tests)
    known = {entry.ref for entry in found}
    found = tuple(sorted((*found, *(entry for entry in framework_entries if entry.ref not in known))))
    if include_tests:
        return found
    return tuple(entry for entry in found if not dev_or_fixture_path(entry.ref.path))


def real_entries(entries: tuple[EntryPoint, ...], reach: Reach) -> tuple[EntryPoint, ...]:
    """The entry points less those the framework calls (a serializer's ``create``, a view's
    ``perform_create``, a signal receiver) that a real entry point reaches by a resolved call
    (a view's ``create`` action, ``serializer.save()``, a ``signal.send``): each of those is
    reached through its callers, so it is covered when every such path runs through a
    boundary, and reported from the entry point of one that does not. A framework-called
    function no real path is seen to reach stays an entry point of its own, unless it is a
    ``perform_*`` hook its class's own action never runs (:func:`unrun_hook_action`)."""
    called = [entry for entry in entries if framework_invoked(entry)]
    if not called:
        return entries
    reachable = reach.reachable_ignoring_boundaries(entry for entry in entries if not framework_invoked(entry))
    reached = {
        entry.ref for entry in called
        if any(edge.caller in reachable and not edge.approximate and edge.caller != entry.ref for edge in reach.callers(entry.ref))
        or _hook_never_run(entry, reach)
    }  # fmt: skip
    return tuple(entry for entry in entries if entry.ref not in reached)


def _hook_never_run(entry: EntryPoint, reach: Reach) -> bool:
    return entry.kind == "http" and unrun_hook_action(entry.ref, reach) is not None


def unrun_hook_action(ref: FunctionRef, reach: Reach) -> FunctionRef | None:
    """The action override that keeps a view's ``perform_*`` hook from running, or None:
    the hook's own class, which no repository class derives from, overrides the action
    (``update`` for ``perform_update``: first in its MRO) with a method in whose text,
    nested functions included, neither the hook's nor the action's name occurs
    (``super().update``, ``UpdateModelMixin.update(self, ...)``, ``partial(super().update)``)
    and that hands ``self`` to no function outside the repository; the same holds for the
    class's other methods it reaches, and no other repository function it reaches calls a
    function of either name (:data:`_HOOK_SEARCH` calls deep). DRF's hooks are called only from
    its mixins' actions (rest_framework/mixins.py, ``UpdateModelMixin.update`` ->
    ``self.perform_update(serializer)``)."""
    hook = ref.qualname.rsplit(".", 1)[-1]
    action = DRF_HOOK_ACTIONS.get(hook) if "." in ref.qualname else None
    cls = class_of(ref)
    own = FunctionRef(cls.path, f"{cls.qualname}.{action}") if action is not None else None
    if own is None or reach.graph.definition(own) is None or reach.dispatch.descendants(cls):
        return None
    names = re.compile(rf"\b(?:{hook}|{action})\b")
    seen, frontier = {own}, [own]
    for _ in range(_HOOK_SEARCH):
        following: list[FunctionRef] = []
        for function in frontier:
            facts = reach.facts.get(function.path)
            definition = reach.graph.definition(function)
            if facts is None or definition is None:
                return None  # a function whose calls are not known: it may run the action
            if function.qualname.startswith(cls.qualname + "."):  # the view's own: any mention may run it
                body = (facts.line_text(line) for line in range(definition.body_start_line, definition.end_line + 1))
                if any(names.search(text) for text in body) or _hands_self_out(reach, function, facts):
                    return None
            elif any(call.enclosing == function.qualname and call.name in (hook, action) for call in facts.index.calls):
                return None  # another class's function: only a call of the name on the view may
            for edge in reach.callees(function):
                if edge.callee not in seen and reach.graph.definition(edge.callee) is not None:
                    seen.add(edge.callee)
                    following.append(edge.callee)
        frontier = following
    return None if frontier else own


def _hands_self_out(reach: Reach, function: FunctionRef, facts: FileFacts) -> bool:
    """Whether ``function`` (nested functions included) passes ``self`` bare to a call the
    call graph does not resolve (a library's ``bulk_update(self, request)``)."""
    resolved = {edge.line for edge in reach.callees(function)}
    return any(
        (call.enclosing == function.qualname or (call.enclosing or "").startswith(function.qualname + "."))
        and call.line not in resolved and re.search(r"(?:^|,)\s*self\s*(?:,|$)", call.arguments)
        for call in facts.index.calls
    )


def dev_or_fixture_path(path: str) -> bool:
    """Code that is not how production is entered: tests, fixtures, mock services, dev-data
    commands and scripts (``populate.py``, ``seed_*.py``, ``*fake*.py``)."""
    directories = path.split("/")[:-1]
    dev_data = _DEV_DATA_COMMAND.search(path) or _DEV_DATA_SCRIPT.search(path)
    return is_test_path(path) or bool(dev_data) or any(part in _FIXTURE_DIRECTORIES or _MOCK_DIRECTORY.match(part) for part in directories)


class Reach:
    """The call edges the analysis follows, and what lies below a function."""

    def __init__(
        self, indexes: Mapping[str, FileIndex], graph: CallGraph, dispatch: Dispatch, framework: FrameworkCalls, facts: Mapping[str, FileFacts]
    ) -> None:
        self.indexes = indexes
        self.graph = graph
        self.dispatch = dispatch
        self.framework = framework
        self.facts = facts
        self._site_refs = frozenset(ref for file_facts in facts.values() for ref in file_facts.sites)
        self._callees: dict[FunctionRef, tuple[Edge, ...]] = {}
        self._calls_by_line: dict[str, dict[tuple[str | None, int], list[CallSite]]] = {}
        self._edge_calls: dict[Edge, CallSite | None] = {}
        self._supers: dict[FunctionRef, bool] = {}
        self._effectful: dict[FunctionRef, bool] = {}
        self._dispatch_into: dict[FunctionRef, list[Edge]] | None = None

    def callees(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Graph edges out of ``ref``, then the framework's calls, then dispatch edges."""
        found = self._callees.get(ref)
        if found is None:
            graph_edges = self.graph.callees(ref) + self.framework.edges(ref)
            known = {(edge.callee, edge.line) for edge in graph_edges}
            extra = tuple(
                edge for edge in self.dispatch.edges(ref)
                if (edge.callee, edge.line) not in known and self._base_runs_for(edge)
            )
            found = self._callees[ref] = graph_edges + extra
        return found

    def callers(self, ref: FunctionRef) -> list[Edge]:
        """Graph edges into ``ref``, then the framework's calls and dispatch edges into it."""
        if self._dispatch_into is None:
            self._dispatch_into = defaultdict(list)
            for edge in sorted(self.dispatch.kinds):
                self._dispatch_into[edge.callee].append(edge)
        return [*self.graph.callers(ref), *self.framework.callers(ref), *self._dispatch_into.get(ref, [])]

    def call_for(self, edge: Edge) -> CallSite | None:
        """The call site behind an edge (same caller and line, preferring the callee's name)."""
        if edge in self._edge_calls:
            return self._edge_calls[edge]
        found = self._edge_calls[edge] = self._find_call(edge)
        return found

    def calls_super(self, override: FunctionRef, method: str) -> bool:
        """Whether an override runs the base method too (``super().method(...)``) outside a
        transaction of its own: then the class's other overrides still shape the base
        method's path (kept per override: every dispatching base method asks)."""
        known = self._supers.get(override)
        if known is None:
            known = self._supers[override] = self._compute_calls_super(override, method)
        return known

    def reaches_effect(self, ref: FunctionRef) -> bool:
        """Whether any effect site lies in ``ref`` or below it (over every edge, blocked or
        not): a function with none has an empty path whatever is switched off, and most
        functions an entry point reaches are such. Answered for a whole strongly connected
        component at once (Tarjan's algorithm, iterative), so recursion needs no special case."""
        known = self._effectful.get(ref)
        if known is not None:
            return known
        order: dict[FunctionRef, int] = {}
        low: dict[FunctionRef, int] = {}
        reaches: dict[FunctionRef, bool] = {}
        stack: list[FunctionRef] = []
        work: list[tuple[FunctionRef, Iterator[Edge]]] = []

        def enter(node: FunctionRef) -> None:
            order[node] = low[node] = len(order)
            reaches[node] = node in self._site_refs
            stack.append(node)
            work.append((node, iter(self.callees(node))))

        enter(ref)
        while work:
            node, edges = work[-1]
            for edge in edges:
                callee = edge.callee
                done = self._effectful.get(callee)
                if done is not None:
                    reaches[node] = reaches[node] or done
                elif callee not in order:
                    enter(callee)
                    break
                else:  # on the stack: the same component
                    low[node] = min(low[node], order[callee])
            else:
                work.pop()
                if low[node] == order[node]:
                    start = stack.index(node)
                    members = stack[start:]
                    del stack[start:]
                    value = any(reaches[member] for member in members)
                    for member in members:
                        self._effectful[member] = value
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                    if node in self._effectful:
                        reaches[parent] = reaches[parent] or self._effectful[node]
        return self._effectful[ref]

    def search(
        self, starts: Iterable[EntryPoint], passable: Callable[[Edge], bool]
    ) -> dict[FunctionRef, tuple[EntryPoint, Trail]]:
        """Breadth-first from ``starts`` over the edges ``passable`` admits: each function
        reached with the first entry point and the shortest trail that reach it."""
        reached: dict[FunctionRef, tuple[EntryPoint, Trail]] = {}
        queue: deque[FunctionRef] = deque()
        for entry in starts:
            if entry.ref not in reached:
                reached[entry.ref] = (entry, ())
                queue.append(entry.ref)
        while queue:
            node = queue.popleft()
            entry, trail = reached[node]
            for edge in self.callees(node):
                if edge.callee not in reached and passable(edge):
                    reached[edge.callee] = (entry, (*trail, edge))
                    queue.append(edge.callee)
        return reached

    def reachable_ignoring_boundaries(self, entries: Iterable[EntryPoint]) -> set[FunctionRef]:
        """Every function an entry point reaches over any edge."""
        seen = {entry.ref for entry in entries}
        queue = deque(sorted(seen))
        while queue:
            for edge in self.callees(queue.popleft()):
                if edge.callee not in seen:
                    seen.add(edge.callee)
                    queue.append(edge.callee)
        return seen

    def unresolved(self, reached: Iterable[FunctionRef]) -> int:
        """Calls in reached functions through ``self``/``cls``/``this`` or a bare name that
        resolve to nothing in the repository (imports and builtins excluded)."""
        by_function: dict[str, dict[str, list[CallSite]]] = {}
        imported_names: dict[str, set[str]] = {}
        count = 0
        for ref in sorted(reached):
            index = self.indexes.get(ref.path)
            if index is None or ref.qualname in (MAIN_FUNCTION, MODULE_FUNCTION):
                continue
            if ref.path not in by_function:
                table: dict[str, list[CallSite]] = defaultdict(list)
                for call in index.calls:
                    if call.enclosing is not None:
                        table[call.enclosing].append(call)
                by_function[ref.path] = table
                imported_names[ref.path] = {record.alias or record.name or record.module.split(".")[0] for record in index.imports}
            calls = by_function[ref.path].get(ref.qualname, ())
            if not calls:
                continue
            resolved = {edge.line for edge in self.callees(ref)}
            imported = imported_names[ref.path]
            for call in calls:
                if call.line in resolved:
                    continue
                parts = call.callee.split(".")
                bare = len(parts) == 1 and parts[0] not in PYTHON_BUILTINS and parts[0] not in imported
                if bare or (len(parts) == 2 and parts[0] in SELF_RECEIVERS):
                    count += 1
        return count

    def _base_runs_for(self, edge: Edge) -> bool:
        """Whether the class of a subclass override that a base method dispatches to runs
        that base method at all: not when the class (below the base) overrides the base
        method itself without calling ``super()`` outside its own transaction (saleor's
        ``perform_mutation`` overrides that open ``atomic`` and call ``cls.save``)."""
        if self.dispatch.kinds.get(edge) != OVERRIDE:
            return True
        method = edge.caller.qualname.rsplit(".", 1)[-1]
        override = self.dispatch.override_below(class_of(edge.callee), class_of(edge.caller), method)
        return override is None or self.calls_super(override, method)

    def _compute_calls_super(self, override: FunctionRef, method: str) -> bool:
        definition = self.graph.definition(override)
        facts = self.facts.get(override.path)
        if definition is None or facts is None:
            return False
        call = re.compile(rf"\bsuper\s*\([^)]*\)\s*\.\s*{re.escape(method)}\s*\(")
        lines = [line for line in range(definition.start_line, definition.end_line + 1) if call.search(facts.line_text(line))]
        # A super() call inside the override's own transaction is that override's to count.
        inside = [region for region in facts.regions if region.enclosing == override.qualname]
        return any(not any(r.start_line <= line <= r.end_line for r in inside) for line in lines)

    def _find_call(self, edge: Edge) -> CallSite | None:
        candidates = self._calls_at(edge.caller.path).get((enclosing_of(edge.caller), edge.line), [])
        short = edge.callee.qualname.split(".")[-1]
        return next((call for call in candidates if call.name == short), candidates[0] if candidates else None)

    def _calls_at(self, path: str) -> dict[tuple[str | None, int], list[CallSite]]:
        by_line = self._calls_by_line.get(path)
        if by_line is None:
            by_line = {}
            index = self.indexes.get(path)
            for call in index.calls if index is not None else ():
                by_line.setdefault((call.enclosing, call.line), []).append(call)
            self._calls_by_line[path] = by_line
        return by_line
