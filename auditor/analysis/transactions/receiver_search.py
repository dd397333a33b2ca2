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
known) and the first (shortest) entry and trail that reach it so.
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


def most_exposed_search(
    reach: Reach, sequences: Sequences, starts: Iterable[EntryPoint], passable: Callable[[Edge], bool]
) -> ByReceiver:
    """:func:`search_by_receiver` from every start, each state's entry and trail then taken
    from the most exposed kind of entry point that reaches the function in that state over a
    sound chain (:func:`exposure`): a request's user meets what a failure leaves, so a
    function a request and a command both reach is reported along the request's chain even
    where the command's is shorter. Every state of the full search is kept (a receiver class
    only a command's chain brings still weighs in :meth:`.Analysis._heaviest_receiver`); a
    tier's trail replaces a state's only where it is more exposed."""
    starts = list(starts)
    found = search_by_receiver(reach, sequences, starts, passable)
    kinds = reach.dispatch.kinds
    ranks = sorted({ENTRY_RANK.get(entry.kind, 0) for entry in starts}, reverse=True)
    for rank in ranks[:-1]:  # the lowest rank's tier is every start: the search above
        tier = [entry for entry in starts if ENTRY_RANK.get(entry.kind, 0) >= rank]
        for ref, states in search_by_receiver(reach, sequences, tier, passable).items():
            for state, candidate in states.items():
                if preference(candidate, kinds) > preference(found[ref][state], kinds):
                    found[ref][state] = candidate
    return found


def exposure(reached: tuple[EntryPoint, Trail], kinds: Mapping[Edge, str]) -> int:
    """Who meets a partial state along ``reached`` (:data:`~.ordering.ENTRY_RANK`), or -1
    where the chain is not sound: its entry is a function the framework calls from a caller
    the pass did not see (that caller may open the transaction), or one of its calls was
    resolved by name or through a ``getattr`` string (:func:`~.findings.proven`)."""
    entry, trail = reached
    if framework_invoked(entry) or not all(proven(edge, kinds) for edge in trail):
        return -1
    return ENTRY_RANK.get(entry.kind, 0)


def preference(reached: tuple[EntryPoint, Trail], kinds: Mapping[Edge, str]) -> tuple[int, int]:
    """How a trail is preferred among those reaching one function: more exposed and sound
    first (:func:`exposure`), then shorter."""
    return exposure(reached, kinds), -len(reached[1])


def first_reach(found: ByReceiver, kinds: Mapping[Edge, str]) -> dict[FunctionRef, tuple[EntryPoint, Trail]]:
    """Each function's preferred entry and trail over all its receivers (:func:`preference`:
    the most exposed sound chain, then the shortest)."""
    return {ref: max(states.values(), key=lambda reached: preference(reached, kinds)) for ref, states in found.items()}
