"""Calls the framework makes on the project's behalf, as edges the call graph cannot see:
DRF's dispatch from a view's action to its serializer (``create`` -> ``perform_create`` ->
``serializer.save()`` -> the serializer's ``create``, through the serializer's own ``save``
when it overrides one; a hand-built ``OrderSerializer(data=...)``'s ``save()`` the same
(:mod:`.hand_built_saves`); a
class a factory builds with ``type(name, bases, {"serializer_class": ...})`` through its
bases, :mod:`.dynamic_views`; rows ``kind: invokes`` of the framework facts,
models/drf.yaml), and a project signal's ``send`` to the receivers connected to it. Also
the project's methods the framework runs inside a transaction it opens (rows
``kind: runs-inside``, models/django_admin.yaml: a ModelAdmin's ``save_model``) when the
project itself never calls them.

A framework method the project does not override is a node of its own, named after the
class that inherits it (``OrderViewSet.create``, ``OrderViewSet.perform_create``): the chain of a
finding shows the request's path through DRF. A view class whose inherited action leads to
the project's code is an entry point at that action (:attr:`FrameworkCalls.entries`).

Inputs: the call graph, the per-file facts, the framework facts and the signals each
receiver is connected to. Output: :class:`FrameworkCalls` (``edges`` out of a function,
``callers`` into one, the view-action ``entries``, the methods that ``run_inside``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import DJANGO_SIGNALS, EntryPoint
from auditor.analysis.transactions.dynamic_views import dispatching_bases
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.framework_facts import FrameworkFact, FrameworkFacts
from auditor.analysis.transactions.hand_built_saves import hand_built_saves
from auditor.analysis.transactions.serializer_bindings import view_serializers
from auditor.analysis.transactions.serializer_edges import SerializerEdges

_VIEW = "drf-view"
_SERIALIZER = "drf-serializer"
_ADMIN = "django-admin"
_AUTH_BACKEND = "auth-backend"
_SERIALIZER_CALL = "serializer."
_SEND_METHODS = frozenset({"send", "send_robust"})
_SECOND_PARAMETER = re.compile(r"\bdef\s+\w+\s*\(\s*\w+\s*,\s*(\w+)")


class FrameworkCalls:
    """The framework's calls into the project, for one run of the analysis."""

    def __init__(
        self,
        graph: CallGraph,
        facts: Mapping[str, FileFacts],
        rows: FrameworkFacts,
        receiver_signals: Mapping[FunctionRef, frozenset[str]],
    ) -> None:
        self.graph = graph
        self.facts = facts
        self._out: dict[FunctionRef, set[Edge]] = defaultdict(set)
        self._stands_for: dict[Edge, str] = {}
        self._names: dict[FunctionRef, frozenset[str]] = {}
        self._external: dict[FunctionRef, frozenset[str]] = {}
        self.serializer_edges = SerializerEdges(graph)
        """The serializer classes each edge into or inside a serializer is for."""
        entries: list[EntryPoint] = []
        serializers: set[FunctionRef] = set()
        view_rows, serializer_rows = rows.invocations(_VIEW), rows.invocations(_SERIALIZER)
        view_bases = frozenset(base for row in view_rows for base in row.bases)
        actions = [row for row in view_rows if row.method not in {other.calls for other in view_rows}]
        built_by_views: dict[FunctionRef, tuple[tuple[FunctionRef, ...], bool]] = {}
        for view in self._classes(view_bases):
            classes, complete = built_by_views[view] = view_serializers(graph, facts, view)
            if not classes:
                continue
            serializers.update(classes)
            for row in view_rows:
                self._invoke(view, row, classes, complete)
            for row in actions:
                ref = FunctionRef(view.path, f"{view.qualname}.{row.method}")
                if self._framework_provides(view, row) and self.graph.definition(ref) is None and self._leads_to_project(ref):
                    base = sorted(self._framework_names(view) & set(row.bases))[0]
                    entries.append(EntryPoint(ref, "http", f"drf {base}.{row.method} of {view.qualname}"))
        methods = frozenset(row.method for row in view_rows)
        for view, classes in dispatching_bases(self.graph, self.facts, methods, view_bases, self._lineage_names):
            serializers.update(classes)
            for row in view_rows:
                self._invoke(view, row, classes)
        serializer_bases = frozenset(base for row in serializer_rows for base in row.bases)
        views = built_by_views.get
        serializers.update(hand_built_saves(graph, facts, serializer_bases, self._lineage_names, self.serializer_edges, self._add, views))
        for serializer in sorted(serializers):
            if self.graph.class_member(serializer, "save") is None:
                continue  # DRF's own save: the hooks' edges go past it
            for row in serializer_rows:
                self._invoke(serializer, row, ())
        self._signal_sends(receiver_signals)
        # A hook the project calls too may run outside the framework's transaction.
        self.run_inside = frozenset(ref for ref, _ in _overrides(self, rows.run_inside(_ADMIN)) if not graph.callers(ref))
        """The project's methods the framework runs inside a transaction it opens and the
        project never calls (a ModelAdmin's ``save_model``: rows ``kind: runs-inside``)."""
        hooks = [EntryPoint(ref, "http", label) for ref, label in _overrides(self, rows.run_in_request(_AUTH_BACKEND))]
        self.in_request = frozenset(entry.ref for entry in hooks)
        """The project's methods a framework's own view runs (rows ``kind: runs-in-request``)."""
        self.entries: tuple[EntryPoint, ...] = tuple(sorted((*entries, *hooks)))
        """The view actions DRF runs that lead to the project's code (``OrderViewSet.create``)
        and the hooks of :attr:`in_request`."""
        self._in = _callers_of(self._out)

    def edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """The framework's calls out of ``ref``, sorted."""
        return tuple(sorted(self._out.get(ref, ())))

    def callers(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """The framework's calls into ``ref``, sorted."""
        return tuple(sorted(self._in.get(ref, ())))

    def _invoke(self, owner: FunctionRef, row: FrameworkFact, serializers: tuple[FunctionRef, ...], complete: bool = True) -> None:
        """The edges of one row for one class: from the method (the project's override, or
        the framework's own, named after ``owner``) to what it calls next (``complete``: :meth:`_add`)."""
        if not self._provides(owner, row):
            return
        own = self.graph.class_member(owner, row.method)
        if own is None and row.through == _VIEW and not self._framework_provides(owner, row):
            return  # no framework base in the MRO runs the method: the project's namesake mixin does not
        caller = own or FunctionRef(owner.path, f"{owner.qualname}.{row.method}")
        method: str | None = None  # what a view's serializer.save() runs: create or update
        if row.calls.startswith(_SERIALIZER_CALL):
            method, name = row.calls[len(_SERIALIZER_CALL):], "save"  # the hook calls save on the serializer
            targets = self.serializer_edges.entered(serializers, method)
        else:
            name = row.calls
            found = self.graph.class_member(owner, name) if row.through == _SERIALIZER else self._member(owner, name)
            targets = {found: {owner} if row.through == _SERIALIZER else set()} if found is not None else {}
        if not targets:
            return
        definition = self.graph.definition(caller)
        if definition is None:  # the framework's own method: it makes the call
            lines = [(self._line(owner), name)]
        else:
            receiver = self._serializer_parameter(caller) if row.calls.startswith(_SERIALIZER_CALL) else "self"
            lines = self._call_lines(caller, receiver, name, row.method)
        known = {(edge.callee, edge.line) for edge in self.graph.callees(caller)}
        for callee, classes in sorted(targets.items()):
            for line, call_name in lines:
                if (callee, line) not in known:
                    self._add(Edge(caller, callee, line, False), call_name, classes, method, complete, owner if method else None)

    def stands_for(self, edge: Edge) -> str | None:
        """The last name of the call a framework edge goes through at its line
        (``serializer.save()``, ``signal.send(...)``): its callee's path counts there, not
        the call's own effect. None for other edges."""
        return self._stands_for.get(edge)

    def _add(
        self, edge: Edge, call_name: str, serializers: Collection[FunctionRef] = (), method: str | None = None, complete: bool = True,
        view: FunctionRef | None = None,
    ) -> None:
        """Record ``edge`` (with the ``serializers`` it is for, perhaps not all: :meth:`.SerializerEdges.record`);
        it stands for the call ``call_name`` at its line unless its callee runs the framework's
        own method too (``super().create(...)``: DRF's write, which the call's own effect
        stands for) and is no save that writes only through the project's ``method``."""
        self._out[edge.caller].add(edge)
        if self.serializer_edges.record(edge, serializers, method, complete, view) or not self._calls_super(edge.callee):
            self._stands_for[edge] = call_name
        else:  # recorded again for more serializer classes, one of which runs DRF's write
            self._stands_for.pop(edge, None)

    def _calls_super(self, ref: FunctionRef) -> bool:
        facts = self.facts.get(ref.path)
        method = ref.qualname.rsplit(".", 1)[-1]
        calls = facts.index.calls if facts is not None and self.graph.definition(ref) is not None else ()
        return any(call.enclosing == ref.qualname and call.name == method and call.callee.startswith("super") for call in calls)

    def _call_lines(self, caller: FunctionRef, receiver: str | None, name: str, method: str) -> list[tuple[int, str]]:
        """The lines where the project's ``caller`` makes the framework's call: ``name`` on
        ``receiver`` (``serializer.save()``, ``self.perform_create(...)``) or the framework's
        own ``method`` (``super().perform_create(...)``), with the name called."""
        facts = self.facts.get(caller.path)
        if facts is None:
            return []
        found = set()
        for call in facts.index.calls:
            if call.enclosing != caller.qualname:
                continue
            through = call.callee.rsplit(".", 1)[0] if "." in call.callee else ""
            if (call.name == name and receiver is not None and through == receiver) or (call.name == method and through.startswith("super")):
                found.add((call.line, call.name))
        return sorted(found)

    def _serializer_parameter(self, hook: FunctionRef) -> str | None:
        """The name of a ``perform_*`` hook's serializer parameter (its first after ``self``)."""
        definition = self.graph.definition(hook)
        facts = self.facts.get(hook.path)
        if definition is None or facts is None:
            return None
        signature = " ".join(facts.line_text(line) for line in range(definition.start_line, definition.body_start_line + 1))
        found = _SECOND_PARAMETER.search(signature)
        return found.group(1) if found else None

    def _signal_sends(self, receiver_signals: Mapping[FunctionRef, frozenset[str]]) -> None:
        """``signal.send(...)`` of a project signal into each receiver connected only to
        project signals (Django sends its own from its own code, wherever a model is saved or
        deleted: a receiver of one of those stays an entry point)."""
        receivers: dict[str, list[FunctionRef]] = defaultdict(list)
        for ref, signals in sorted(receiver_signals.items()):
            if signals & DJANGO_SIGNALS:
                continue
            for signal in signals:
                receivers[signal].append(ref)
        if not receivers:
            return
        for path in sorted(self.facts):
            for call in self.facts[path].index.calls:
                parts = strip_arguments(call.callee).split(".")
                if call.name not in _SEND_METHODS or len(parts) < 2 or call.enclosing is None:
                    continue
                caller = FunctionRef(path, call.enclosing)
                for receiver in receivers.get(parts[-2], ()):
                    self._add(Edge(caller, receiver, call.line, False), call.name)

    def _classes(self, bases: frozenset[str]) -> list[FunctionRef]:
        """Every Python class that derives from one of the framework classes ``bases``."""
        found = []
        for path, facts in sorted(self.facts.items()):
            if facts.index.language != "python":
                continue
            for definition in facts.index.definitions:
                if definition.kind == "class":
                    ref = FunctionRef(path, definition.qualname)
                    if self._lineage_names(ref) & bases:
                        found.append(ref)
        return found

    def _provides(self, cls: FunctionRef, row: FrameworkFact) -> bool:
        return bool(self._lineage_names(cls) & set(row.bases))

    def _framework_provides(self, cls: FunctionRef, row: FrameworkFact) -> bool:
        """Whether one of the framework's own classes among the bases of ``cls`` (by its MRO)
        is one of ``row``'s: only then does the framework's method exist on the class. A
        project class that shares a framework class's name (a ``CreateModelMixin(object)``
        of the project's own) does not provide it: DRF's router maps a verb to an action only
        where the viewset has that attribute (rest_framework/routers.py,
        ``SimpleRouter.get_method_map``: ``hasattr(viewset, action)``)."""
        return bool(self._framework_names(cls) & set(row.bases))

    def _framework_names(self, cls: FunctionRef, seen: frozenset[FunctionRef] = frozenset()) -> frozenset[str]:
        """The last names of the library bases a class and its repository bases write."""
        known = self._external.get(cls)
        if known is not None:
            return known
        names = {self._imported_name(cls.path, base) for base in self.graph.external_bases(cls)}
        for base in self.graph.base_classes(cls):
            if base not in seen and base != cls:
                names |= self._framework_names(base, seen | {cls})
        found = frozenset(names)
        if not seen:
            self._external[cls] = found
        return found

    def _imported_name(self, path: str, base: str) -> str:
        """The last name of a library base as its library spells it: the name imported under
        an alias (``from rest_framework.mixins import CreateModelMixin as BaseCreateModelMixin``)."""
        last = base.rsplit(".", 1)[-1]
        facts = self.facts.get(path)
        if "." in base or facts is None:
            return last
        return next((item.name for item in facts.index.imports if item.alias == base and item.name is not None), last)

    def _lineage_names(self, cls: FunctionRef, seen: frozenset[FunctionRef] = frozenset()) -> frozenset[str]:
        """The last names of the bases a class and its repository bases write, and the
        module-qualified names of those imported by name."""
        known = self._names.get(cls)
        if known is not None:
            return known
        definition = self.graph.definition(cls)
        written = [strip_arguments(base) for base in definition.bases if "=" not in base] if definition is not None else []
        # An imported base counts by its module-qualified library name too (``from
        # django.contrib.auth.admin import UserAdmin as BaseUserAdmin`` gives
        # ``django.contrib.auth.admin.UserAdmin``): rows name a library's own subclasses so.
        names = {base.rsplit(".", 1)[-1] for base in written} | {_qualified_name(self.facts.get(cls.path), base) for base in written}
        names.discard("")
        for base in self.graph.base_classes(cls):
            if base not in seen and base != cls:
                names |= self._lineage_names(base, seen | {cls})
        found = frozenset(names)
        if not seen:
            self._names[cls] = found
        return found

    def _member(self, cls: FunctionRef, name: str) -> FunctionRef:
        """The project's method ``name`` of ``cls`` (inherited or not), or the framework's
        own, named after ``cls``."""
        return self.graph.class_member(cls, name) or FunctionRef(cls.path, f"{cls.qualname}.{name}")

    def _line(self, cls: FunctionRef) -> int:
        definition = self.graph.definition(cls)
        return definition.start_line if definition is not None else 1

    def _leads_to_project(self, start: FunctionRef) -> bool:
        """Whether the framework's calls from ``start`` reach a function the project defines."""
        seen, stack = {start}, [start]
        while stack:
            for edge in self._out.get(stack.pop(), ()):
                if self.graph.definition(edge.callee) is not None:
                    return True
                if edge.callee not in seen:
                    seen.add(edge.callee)
                    stack.append(edge.callee)
        return False


def _qualified_name(facts: FileFacts | None, base: str) -> str:
    """``module.Name`` of a base the file imports by name (under an alias or not); "" else."""
    if "." in base or facts is None:
        return ""
    found = next((item for item in facts.index.imports if item.name is not None and (item.alias or item.name) == base), None)
    return f"{found.module}.{found.name}" if found is not None else ""


def _overrides(calls: FrameworkCalls, rows: tuple[FrameworkFact, ...]) -> list[tuple[FunctionRef, str]]:
    """The methods ``rows`` name that a class deriving from one of a row's ``bases``
    defines itself, each with a label naming the row's framework and base
    (``mozilla-django-oidc OIDCAuthenticationBackend.update_user``)."""
    found: list[tuple[FunctionRef, str]] = []
    for cls in calls._classes(frozenset(base for row in rows for base in row.bases)):
        for row in rows:
            ref = FunctionRef(cls.path, f"{cls.qualname}.{row.method}")
            if calls._provides(cls, row) and calls.graph.definition(ref) is not None:
                base = sorted(calls._lineage_names(cls) & set(row.bases))[0]
                found.append((ref, f"{row.framework} {base}.{row.method}"))
    return found


def _callers_of(out: Mapping[FunctionRef, set[Edge]]) -> dict[FunctionRef, list[Edge]]:
    """The edges of ``out`` (by caller) listed by callee."""
    found: dict[FunctionRef, list[Edge]] = defaultdict(list)
    for edges in out.values():
        for edge in edges:
            found[edge.callee].append(edge)
    return found
