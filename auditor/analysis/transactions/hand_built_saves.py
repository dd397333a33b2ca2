"""Hand-built serializers' saves (``serializer = OrderSerializer(data=...)`` then
``serializer.save()`` in one function: a hand-written view, a task) as framework edges into
what the save runs, for :mod:`.framework_calls`. DRF's ``BaseSerializer.save`` runs
``update`` when the serializer holds an instance, else ``create``
(rest_framework/serializers.py, ``BaseSerializer.__init__(self, instance=None, data=empty,
...)`` and ``BaseSerializer.save``): built with a parameter of its function as the instance,
each edge carries the :class:`~.serializer_edges.InstanceCondition` under which it runs.

Inputs: the call graph, the per-file facts, the serializer base names, and where to record
the edges. Output: :func:`hand_built_saves`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.serializer_bindings import bindings
from auditor.analysis.transactions.serializer_edges import InstanceCondition, SerializerEdges
from auditor.analysis.transactions.throwaway import unbound_names

AddEdge = Callable[[Edge, str, Collection[FunctionRef], "str | None", bool], None]
"""Records a framework edge: the edge, the call's name, its serializer classes, the method
the save runs and whether those classes are all it may run (:meth:`.FrameworkCalls._add`)."""
ViewSerializers = Callable[[FunctionRef], "tuple[tuple[FunctionRef, ...], bool] | None"]
"""A view class's serializer classes, and whether they are all its ``get_serializer`` builds
(None for a class that is no DRF view)."""


def hand_built_saves(
    graph: CallGraph, facts_by_path: Mapping[str, FileFacts], bases: frozenset[str], lineage_names: Callable[[FunctionRef], frozenset[str]],
    serializer_edges: SerializerEdges, add: AddEdge, view_serializers: ViewSerializers,
) -> set[FunctionRef]:
    """``serializer = OrderSerializer(data=...)`` then ``serializer.save()`` in one
    function (a hand-written view, a task): an edge from the save to what it runs, the
    serializer's ``update`` when it was given an instance (first argument, ``instance=``),
    its ``create`` when it was given none or ``None``; when the instance is a parameter of
    the function, ``create`` where a path knows it ``None`` and ``update`` elsewhere (each
    edge with its :class:`.InstanceCondition`); a variable
    bound more than once, each class it is built from (an open edge when a binding is no
    such constructor). ``serializer = self.get_serializer(...)`` in a method of a view
    builds the view's serializer classes (``view_serializers``: its ``serializer_class`` and
    what its ``get_serializer_class`` returns by name, and whether those are all; DRF's
    ``GenericAPIView.get_serializer`` builds ``get_serializer_class()(*args, **kwargs)``,
    rest_framework/generics.py), as a hand-written action that saves without a ``perform_*``
    hook does. The serializer classes saved so. (Only constructor calls whose name ends in
    ``Serializer`` are resolved: DRF's naming.)"""
    found: set[FunctionRef] = set()
    signatures = Arguments(graph, facts_by_path)
    for path, facts in sorted(facts_by_path.items()):
        if facts.index.language != "python":
            continue
        built: dict[tuple[str, str], list[tuple[int, FunctionRef, str, InstanceCondition | None]]] = defaultdict(list)
        partial: set[tuple[str, str]] = set()  # built by a view whose serializer classes may be more than found
        for call in facts.index.calls:
            from_view = call.callee == "self.get_serializer"
            if call.enclosing is None or not (call.name.endswith("Serializer") or from_view):
                continue
            assigned = re.match(rf"\s*(\w+)\s*=\s*{re.escape(call.callee)}\s*\(", facts.line_text(call.line))
            if not assigned:
                continue
            key = (call.enclosing, assigned.group(1))
            if from_view:
                classes, every = view_serializers(FunctionRef(path, call.enclosing.rpartition(".")[0])) or ((), True)
                if not every:
                    partial.add(key)
            else:
                cls = graph.resolve(path, strip_arguments(call.callee))
                classes = (cls,) if cls is not None and lineage_names(cls) & bases else ()
            for cls in classes:
                for method, condition in _saves_run(graph, facts, signatures, FunctionRef(path, call.enclosing), call.arguments):
                    built[key].append((call.line, cls, method, condition))
        if not built:
            continue  # no serializer built here: no save of one either
        for call in facts.index.calls:
            parts = call.callee.split(".")
            assignments = built.get((call.enclosing or "", parts[0]), ()) if call.name == "save" and len(parts) == 2 else ()
            caller = FunctionRef(path, call.enclosing or "")
            if not any(item[0] <= call.line for item in assignments):
                continue  # built only after the save
            known = {(edge.callee, edge.line) for edge in graph.callees(caller)}
            built_lines = {item[0] for item in assignments}
            complete = bindings(graph, facts, caller, parts[0]) <= len(built_lines)  # every binding is a build
            complete = complete and (call.enclosing or "", parts[0]) not in partial
            for _, cls, method, condition in sorted(assignments, key=lambda item: item[:3]):
                callee = serializer_edges.saved_through(cls, method)
                if callee is not None:
                    found.add(cls)
                    if (callee, call.line) not in known:
                        edge = Edge(caller, callee, call.line, False)
                        add(edge, call.name, {cls}, method, complete)
                        serializer_edges.condition(edge, condition)
    return found

def _saves_run(
    graph: CallGraph, facts: FileFacts, signatures: Arguments, function: FunctionRef, arguments: str
) -> tuple[tuple[str, InstanceCondition | None], ...]:
    """What a save of a serializer built with ``arguments`` in ``function`` runs, each with
    its condition: ``create`` with no instance or ``None``; with a parameter of
    ``function`` that its body never binds again, ``create`` where the parameter is known
    ``None`` and ``update`` elsewhere; ``update`` with any other instance."""
    instance = _instance_argument(arguments)
    if instance is None or instance == "None":
        return (("create", None),)
    parameters = dict(signatures.parameters(function))
    definition = graph.definition(function)
    if instance not in parameters or definition is None:
        return (("update", None),)
    if not unbound_names(frozenset({instance}), facts.lines[definition.body_start_line - 1 : definition.end_line]):
        return (("update", None),)  # bound again in the body: what it holds at the build is not known
    return (("update", InstanceCondition(instance, False)), ("create", InstanceCondition(instance, True)))


def _instance_argument(arguments: str) -> str | None:
    """The instance a serializer's constructor arguments give it (``instance=...`` or the
    first positional argument, DRF's ``BaseSerializer.__init__(self, instance=None, ...)``),
    as written; None when they give none."""
    parts = [part.strip() for part in split_arguments(arguments)]
    keyword = next((part.partition("=")[2].strip() for part in parts if re.match(r"instance\s*=(?!=)", part)), None)
    if keyword is not None:
        return keyword
    return parts[0] if parts and parts[0] and "=" not in parts[0].split("(")[0] and not parts[0].startswith("*") else None
