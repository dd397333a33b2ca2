"""The class ``self`` has in each function along a chain (its receiver), and which
approximate edges that class runs: a base method reached through subclass ``A`` runs
``A``'s overrides of its self-calls, not every subclass's; a view's save through a shared
base serializer ``save`` runs the ``create``/``update`` of the serializer classes the view
(or a hand-built serializer) uses, by their MRO, not every subclass's
(:mod:`.serializer_edges`). Where a chain carries no known class, every edge may run.

Inputs: reachability (:class:`~.reach.Reach`: the dispatch edges and the framework's).
Output: :class:`ChainReceivers`.
"""

from __future__ import annotations

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.transactions.dispatch import OVERRIDE, Dispatch, class_of
from auditor.analysis.transactions.reach import Reach

Receiver = FunctionRef | None
"""The class ``self`` has in a function along a chain (None: any)."""


class ChainReceivers:
    """Receiver classes along chains, and the dispatch they make feasible."""

    def __init__(self, reach: Reach) -> None:
        self.reach = reach
        self.dispatch = reach.dispatch
        self.serializers = reach.framework.serializer_edges
        self._alternatives: dict[tuple[Edge, Receiver], tuple[Receiver, ...]] = {}

    def of(self, ref: FunctionRef, receiver: Receiver) -> Receiver:
        """``receiver`` when it is a proper subclass of ``ref``'s class that some override
        could tell apart; None otherwise (so paths that cannot differ share one cache entry)."""
        if receiver is None:
            return None
        owner = class_of(ref)
        if receiver == owner or not self.dispatch.descendants(owner):
            return None
        return receiver if owner in self.dispatch.lineage(receiver) else None

    def along(self, trail: tuple[Edge, ...]) -> Receiver:
        """The class ``self`` has in the last function of ``trail`` (None: any): of the
        serializer classes a view's save may go through, those the rest of the trail runs
        for, when one is left."""
        receivers: set[Receiver] = {None}
        for edge in trail:
            inner = {found for receiver in receivers if self.serializer_feasible(edge, receiver) for found in self.alternatives(edge, receiver)}
            receivers = inner or {None}
        return next(iter(receivers)) if len(receivers) == 1 else None

    def through(self, edge: Edge, receiver: Receiver) -> Receiver:
        """The class ``self`` has in ``edge.callee`` when it has ``receiver`` in the caller
        (None: any, or one of several: :meth:`alternatives`)."""
        found = self.alternatives(edge, receiver)
        return found[0] if len(found) == 1 else None

    def alternatives(self, edge: Edge, receiver: Receiver) -> tuple[Receiver, ...]:
        """The classes ``self`` may have in ``edge.callee`` when it has ``receiver`` in the
        caller: one per serializer class a view's (or a hand-built) save goes through, else
        the one :meth:`.Dispatch.receiver_after` says. Once per edge and receiver: what it
        reads (the serializer edges, the dispatch tables, the call sites) is fixed when the
        analysis is set up."""
        key = (edge, receiver)
        found = self._alternatives.get(key)
        if found is None:
            found = self._alternatives[key] = self._compute_alternatives(edge, receiver)
        return found

    def _compute_alternatives(self, edge: Edge, receiver: Receiver) -> tuple[Receiver, ...]:
        below = (lambda view: receiver in self.dispatch.lineage(view)) if receiver is not None else None
        serializers = self.serializers.saves_for(edge, below)
        if serializers:
            return tuple(dict.fromkeys(self.of(edge.callee, cls) for cls in serializers))
        call = self.reach.call_for(edge)
        return (self.of(edge.callee, self.dispatch.receiver_after(edge, call.callee if call else None, receiver)),)

    def dispatch_feasible(self, edge: Edge, receiver: Receiver) -> bool:
        """Whether an approximate edge out of a method whose ``self`` is ``receiver`` or one
        of its subclasses (None: any class) may run: an override of a class at or below
        ``receiver``, or the one ``receiver``'s MRO finds above it, not a sibling's; a
        serializer's create/update :meth:`serializer_feasible` admits. Every other edge may."""
        receiver = self.of(edge.caller, receiver)
        if receiver is None or self.dispatch.kinds.get(edge) != OVERRIDE:
            return self.serializer_feasible(edge, receiver)
        return _runs_for(self.dispatch, receiver, class_of(edge.callee), edge.callee.qualname.rsplit(".", 1)[-1])

    def serializer_feasible(self, edge: Edge, receiver: Receiver) -> bool:
        """Whether an edge from a serializer's ``save`` into a ``create``/``update`` may run
        when the serializer is ``receiver`` or one of its subclasses (None: any): a shared
        base ``save`` runs the method the MRO of its serializer finds, not every subclass's.
        Every other edge may."""
        receiver = self.of(edge.caller, receiver)
        owners = self.serializers.runs_for(edge) if receiver is not None else ()
        return not owners or any(receiver in self.dispatch.lineage(owner) for owner in owners)


def _runs_for(dispatch: Dispatch, receiver: FunctionRef, cls: FunctionRef, method: str) -> bool:
    """Whether ``cls``'s override of ``method`` may run on a ``self`` of ``receiver`` or below."""
    if receiver in dispatch.lineage(cls):
        return True  # cls is receiver or one of its subclasses
    nearest = dispatch.nearest(receiver, method)
    return nearest is not None and class_of(nearest) == cls
