"""Which class a parameter's object has on one path: ``save_related(SheetSerializer, ...)``
into ``def save_related(serializer, ...): s = serializer(...); s.save()`` runs
``SheetSerializer.save`` only (its writes, none when it writes nothing), not the heaviest
``save`` of every class some caller passes (:mod:`.parameter_classes` reads those edges).

Inputs: :class:`~.reach.Reach` (its dispatch knows each edge's
:class:`~.receivers.Binding`). Output: :func:`bound_at` (what one call binds) and
:func:`bound_callees` (a function's callees under those bindings), for :mod:`.sequences`.
"""

from __future__ import annotations

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.transactions.reach import Reach
from auditor.index.model import CallSite

Bound = frozenset[tuple[str, FunctionRef]]
"""Parameters a call passes a known repository class for, with that class."""


def bound_at(reach: Reach, edge: Edge, call: CallSite | None) -> Bound:
    """The parameters of ``edge.callee`` whose objects' methods it calls that ``call``
    passes a known repository class for."""
    if call is None:
        return frozenset()
    dispatch = reach.dispatch
    parameters = {binding.parameter for callee in reach.callees(edge.callee) if (binding := dispatch.binding(callee)) is not None}
    found = ((parameter, dispatch.passed_at(edge.callee, edge.caller, call.arguments, parameter)) for parameter in sorted(parameters))
    return frozenset((parameter, cls) for parameter, cls in found if cls is not None)


def bound_callees(reach: Reach, ref: FunctionRef, bound: Bound) -> tuple[tuple[Edge, ...], frozenset[tuple[int, str]]]:
    """``ref``'s callees less the edges of a ``bound`` parameter's object that run another
    class's method, and the ``(line, name)`` of each call a kept one then stands for. An
    unbound parameter's edges count only where together they stand for the call (every
    class passed defines the method): else the call's own effect counts, once."""
    parameters = {parameter for parameter, _ in bound}
    kept: list[Edge] = []
    stood_for: set[tuple[int, str]] = set()
    for edge in reach.callees(ref):
        binding = reach.dispatch.binding(edge)
        if binding is None:
            kept.append(edge)
            continue
        if (binding.parameter, binding.cls) in bound or (binding.parameter not in parameters and reach.dispatch.stands_for(edge) is not None):
            kept.append(edge)
            stood_for.add((edge.line, binding.name))
    return tuple(kept), frozenset(stood_for)
