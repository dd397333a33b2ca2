"""The search from the entry points with ``self``'s class along each chain: a base method
reached through subclass ``A`` runs ``A``'s overrides of its self-calls, not every
subclass's (:meth:`.ChainReceivers.dispatch_feasible`), so a chain never goes from one
subclass's entry into another subclass's override; a view's save through a shared base
serializer ``save`` runs its own serializer classes' ``create``/``update``, one state per
class (:meth:`.ChainReceivers.alternatives`); a hand-built serializer's save whose
instance is a parameter the chain passes ``None`` runs ``create``, never ``update``
(:meth:`.SerializerEdges.instance_feasible`), one state per such narrowing.

Inputs: the reachability edges (:class:`~.reach.Reach`), the receiver rules of
:class:`~.sequences.Sequences`, the entry points and the edges the search may pass.
Output: for each function reached, every receiver class it is reached with (None: not
known) and the first (shortest) entry and trail that reach it so; and, for the report's
order, the most exposed entry that reaches a function over proven calls
(:func:`exposed_entries`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.entrypoints import EntryPoint, framework_invoked
from auditor.analysis.transactions.chain_receivers import Receiver
from auditor.analysis.transactions.findings import proven
from auditor.analysis.transactions.ordering import ENTRY_RANK
from auditor.analysis.transactions.reach import Reach, Trail
from auditor.analysis.transactions.sequences import Sequences

State = tuple[Receiver, frozenset[str]]
"""A function's receiver class on a chain, and what the chain's last call makes known
``None`` that decides its hand-built saves (:meth:`.Sequences.narrowing`)."""
ByReceiver = dict[FunctionRef, dict[State, tuple[EntryPoint, Trail]]]
"""Per function reached, per state, the first entry and trail reaching it so."""


def search_by_receiver(
    reach: Reach, sequences: Sequences, starts: Iterable[EntryPoint], passable: Callable[[Edge], bool]
) -> ByReceiver:
    """Breadth-first from ``starts`` over the edges ``passable`` admits and the override
    edges the chain's receiver class dispatches to: each (function, receiver, narrowing)
    state with the first entry point and the shortest trail that reach it."""
    found: ByReceiver = {}
    admitted: dict[Edge, bool] = {}
    serializers = reach.framework.serializer_edges
    start: State = (None, frozenset())
    queue: deque[tuple[FunctionRef, State]] = deque()
    for entry in starts:
        if start not in found.setdefault(entry.ref, {}):
            found[entry.ref][start] = (entry, ())
            queue.append((entry.ref, start))
    while queue:
        node, state = queue.popleft()
        receiver, narrowing = state
        entry, trail = found[node][state]
        for edge in reach.callees(node):
            if not sequences.receivers.dispatch_feasible(edge, receiver) or not serializers.instance_feasible(edge, narrowing):
                continue
            states = found.setdefault(edge.callee, {})
            inner_narrowing = sequences.narrowing(edge)
            for inner in sequences.receivers.alternatives(edge, receiver):
                if (inner, inner_narrowing) in states:
                    continue
                allowed = admitted.get(edge)
                if allowed is None:
                    allowed = admitted[edge] = passable(edge)
                if allowed:
                    states[(inner, inner_narrowing)] = (entry, (*trail, edge))
                    queue.append((edge.callee, (inner, inner_narrowing)))
        # A callee whose every edge was refused stays out of the result.
    return {ref: states for ref, states in found.items() if states}


def first_reach(found: ByReceiver) -> dict[FunctionRef, tuple[EntryPoint, Trail]]:
    """Each function's shortest entry and trail over all its receivers."""
    return {ref: min(states.values(), key=lambda reached: len(reached[1])) for ref, states in found.items()}


def exposed_entries(
    reach: Reach, sequences: Sequences, starts: Iterable[EntryPoint], passable: Callable[[Edge], bool],
    kinds: Mapping[Edge, str],
) -> dict[FunctionRef, EntryPoint]:
    """Per function, the most exposed entry point (:data:`~.ordering.ENTRY_RANK`: a request,
    then a task or consumer, then a command) whose shortest trail to it is sound: every call
    proven (:func:`~.findings.proven`) and an entry the framework enters directly. Only
    ranks above the lowest are searched; a function reached by none of them has no entry
    here. The report orders a finding by this entry when it is more exposed than the one its
    chain starts at (who meets the partial state), and says so; the chain, the path and the
    grade stay those of the shortest trail."""
    starts = list(starts)
    ranks = sorted({ENTRY_RANK.get(entry.kind, 0) for entry in starts}, reverse=True)
    found: dict[FunctionRef, EntryPoint] = {}
    for rank in ranks[:-1]:
        tier = [entry for entry in starts if ENTRY_RANK.get(entry.kind, 0) >= rank]
        for ref, (entry, trail) in first_reach(search_by_receiver(reach, sequences, tier, passable)).items():
            if ref not in found and not framework_invoked(entry) and all(proven(edge, kinds) for edge in trail):
                found[ref] = entry
    return found
