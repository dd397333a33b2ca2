"""Which serializer classes the framework's serializer edges are made for
(:mod:`.framework_calls`), so a chain can carry the class a view saves through
(:mod:`.chain_receivers`).

A view's ``serializer.save()`` (its hook's, or a hand-built serializer's) enters the save
that the view's serializer classes run: one node, shared when they inherit one base
``save`` override. That shared ``save`` has an edge into the ``create``/``update`` of
every serializer class deriving from it; each such edge is feasible only for the classes
whose MRO finds that method. A save whose classes may be incomplete (a view's
``get_serializer_class`` that returns more than class names, a serializer variable bound
more than once) is open: it carries no class, so the shared ``save`` reaches them all.

A hand-built serializer's ``save`` runs ``update`` only when it holds an instance, else
``create`` (rest_framework/serializers.py, ``BaseSerializer.__init__(instance=None, ...)``
and ``BaseSerializer.save``: ``if self.instance is not None: self.update(...)`` else
``self.create(...)``). Built with a parameter of its function as the instance
(``S(data=..., instance=location)``), which one runs depends on the call: each such edge
carries an :class:`InstanceCondition`; a path (or a chain) that knows the parameter
``None`` (:func:`~.paths.none_marker`: passed ``None`` or left at a ``None`` default)
runs ``create`` only, any other runs ``update`` only.

Inputs: the edges :class:`~.framework_calls.FrameworkCalls` makes. Output:
:class:`SerializerEdges`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.transactions.paths import none_marker


@dataclass(frozen=True, order=True)
class InstanceCondition:
    """When a hand-built serializer's save into ``create`` or ``update`` runs: its instance is
    the function's ``parameter``; the edge runs ``when_none`` (``create``: on a path that
    knows the parameter ``None``) or when it is not known ``None`` (``update``: a path that
    knows nothing of it keeps the save's ``update``, as for any other instance given)."""

    parameter: str
    when_none: bool

    def holds(self, off: frozenset[str]) -> bool:
        """Whether the edge may run on a path whose known-false set is ``off``."""
        return (none_marker(self.parameter) in off) is self.when_none


class SerializerEdges:
    """Per framework edge into or inside a serializer, the serializer classes it is for."""

    def __init__(self, graph: CallGraph) -> None:
        self.graph = graph
        self._saves_for: dict[Edge, set[FunctionRef]] = defaultdict(set)
        self._saves_by_view: dict[Edge, dict[FunctionRef | None, set[FunctionRef]]] = defaultdict(lambda: defaultdict(set))
        self._runs_for: dict[Edge, set[FunctionRef]] = defaultdict(set)
        self._open: set[Edge] = set()
        self._conditions: dict[Edge, set[InstanceCondition | None]] = defaultdict(set)
        self._instance_parameters: dict[FunctionRef, set[str]] = defaultdict(set)

    def saved_through(self, serializer: FunctionRef, method: str) -> FunctionRef | None:
        """What ``serializer.save()`` enters to run ``method``: the serializer's own ``save``
        override (which the save rows lead on), else its ``method``, when the project wrote them."""
        return self.graph.class_member(serializer, "save") or self.graph.class_member(serializer, method)

    def entered(self, serializers: Iterable[FunctionRef], method: str) -> dict[FunctionRef, set[FunctionRef]]:
        """What a view's ``serializer.save()`` enters to run ``method`` (:meth:`saved_through`),
        with the serializer classes it enters each for."""
        found: dict[FunctionRef, set[FunctionRef]] = defaultdict(set)
        for serializer in serializers:
            if (callee := self.saved_through(serializer, method)) is not None:
                found[callee].add(serializer)
        return dict(found)

    def record(
        self, edge: Edge, serializers: Collection[FunctionRef], method: str | None, complete: bool = True, view: FunctionRef | None = None
    ) -> bool:
        """Record the serializer classes a framework edge is for: a save into a serializer
        that runs ``method`` for ``serializers`` (when the save is a view hook's, for the
        ``view`` class whose serializer classes they are; not ``complete``: perhaps for others
        too, so the edge carries none, :meth:`saves_for`), or (``method`` None) a serializer's ``save``
        into the ``create``/``update`` of ``serializers`` (none: another edge). Whether the
        edge stands for its call even though its callee calls ``super()`` (:meth:`through_save`,
        over every class recorded for it so far)."""
        if method is None:
            if serializers:
                self._runs_for[edge].update(serializers)
            return False
        if not complete:
            self._open.add(edge)
        self._saves_for[edge].update(serializers)
        self._saves_by_view[edge][view].update(serializers)
        return self.through_save(edge.callee, self._saves_for[edge], method)

    def condition(self, edge: Edge, condition: InstanceCondition | None) -> None:
        """Record when a hand-built save's edge runs (None: on every path; several: on any)."""
        self._conditions[edge].add(condition)
        if condition is not None:
            self._instance_parameters[edge.caller].add(condition.parameter)

    def instance_feasible(self, edge: Edge, off: frozenset[str]) -> bool:
        """Whether a hand-built save's edge may run on a path of its caller whose known-false
        set is ``off`` (:class:`InstanceCondition`); every other edge may."""
        conditions = self._conditions.get(edge)
        return not conditions or any(condition is None or condition.holds(off) for condition in conditions)

    def instance_parameters(self, ref: FunctionRef) -> frozenset[str]:
        """The parameters of ``ref`` whose being ``None`` decides what a save in it runs."""
        return frozenset(self._instance_parameters.get(ref, ()))

    def narrowing(self, ref: FunctionRef, off: frozenset[str]) -> frozenset[str]:
        """The part of ``off`` that decides what ``ref``'s hand-built saves run (empty for
        most functions: a search keeps one state per distinct part)."""
        parameters = self._instance_parameters.get(ref)
        return frozenset(none_marker(parameter) for parameter in parameters if none_marker(parameter) in off) if parameters else frozenset()

    def saves_for(self, edge: Edge, below: Callable[[FunctionRef], bool] | None = None) -> tuple[FunctionRef, ...]:
        """The serializer classes an edge into a serializer saves through, sorted (a view
        hook's ``serializer.save()`` with the view's ``serializer_class``, a hand-built
        serializer's ``save()``); empty for another edge and for an open one, whose classes
        may be incomplete (:meth:`record`). A hook shared by several views (a mixin's
        ``perform_create``) saves through the classes of the views ``below`` admits (those
        ``self`` may be along the chain), when it admits one: each view's
        ``self.get_serializer()`` builds its own class (rest_framework/generics.py,
        ``GenericAPIView.get_serializer``)."""
        if edge in self._open:
            return ()
        by_view = self._saves_by_view.get(edge, {})
        if below is not None:
            chosen = {cls for view, classes in by_view.items() if view is None or below(view) for cls in classes}
            if any(view is not None and below(view) for view in by_view):
                return tuple(sorted(chosen))
        return tuple(sorted(self._saves_for.get(edge, ())))

    def runs_for(self, edge: Edge) -> tuple[FunctionRef, ...]:
        """The serializer classes whose ``save`` runs the ``create``/``update`` an edge out
        of a ``save`` override enters (the method their MRO finds), sorted; empty for
        another edge."""
        return tuple(sorted(self._runs_for.get(edge, ())))

    def through_save(self, callee: FunctionRef, serializers: Iterable[FunctionRef], method: str) -> bool:
        """Whether ``callee`` is a ``save`` override that, for each of ``serializers``,
        runs the project's own ``method``: its ``super().save()`` (DRF's) then writes
        nothing but through that method, so the call into it stands for the call's effect."""
        return callee.qualname.rsplit(".", 1)[-1] == "save" and all(self.graph.class_member(cls, method) is not None for cls in serializers)
