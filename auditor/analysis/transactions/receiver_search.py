"""The search from the entry points with ``self``'s class along each chain: a base method
reached through subclass ``A`` runs ``A``'s overrides of its self-calls, not every
subclass's (:meth:`.ChainReceivers.dispatch_feasible`), so a chain never goes from one
subclass's entry into another subclass's override; a view's save through a shared base
serializer ``save`` runs its own serializer classes' ``create``/``update``, one state per
class (:meth:`.ChainReceivers.alternatives`).

Inputs: the reachability edges (:class:`~.reach.Reach`), the receiver rules of
:class:`~.sequences.Sequences`, the entry points and the edges the search may pass.
Output: for each function reached, every receiver class it is reached with (None: not
known) and the first (shortest) entry and trail that reach it so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.entrypoints import EntryPoint
from auditor.analysis.transactions.chain_receivers import Receiver
from auditor.analysis.transactions.reach import Reach, Trail
from auditor.analysis.transactions.sequences import Sequences

ByReceiver = dict[FunctionRef, dict[Receiver, tuple[EntryPoint, Trail]]]
"""Per function reached, per receiver class, the first entry and trail reaching it so."""


def search_by_receiver(
    reach: Reach, sequences: Sequences, starts: Iterable[EntryPoint], passable: Callable[[Edge], bool]
) -> ByReceiver:
    """Breadth-first from ``starts`` over the edges ``passable`` admits and the override
    edges the chain's receiver class dispatches to: each (function, receiver) state with
    the first entry point and the shortest trail that reach it."""
    found: ByReceiver = {}
    admitted: dict[Edge, bool] = {}
    queue: deque[tuple[FunctionRef, Receiver]] = deque()
    for entry in starts:
        if None not in found.setdefault(entry.ref, {}):
            found[entry.ref][None] = (entry, ())
            queue.append((entry.ref, None))
    while queue:
        node, receiver = queue.popleft()
        entry, trail = found[node][receiver]
        for edge in reach.callees(node):
            if not sequences.receivers.dispatch_feasible(edge, receiver):
                continue
            states = found.setdefault(edge.callee, {})
            for inner in sequences.receivers.alternatives(edge, receiver):
                if inner in states:
                    continue
                allowed = admitted.get(edge)
                if allowed is None:
                    allowed = admitted[edge] = passable(edge)
                if allowed:
                    states[inner] = (entry, (*trail, edge))
                    queue.append((edge.callee, inner))
        # A callee whose every edge was refused stays out of the result.
    return {ref: states for ref, states in found.items() if states}


def first_reach(found: ByReceiver) -> dict[FunctionRef, tuple[EntryPoint, Trail]]:
    """Each function's shortest entry and trail over all its receivers."""
    return {ref: min(states.values(), key=lambda reached: len(reached[1])) for ref, states in found.items()}
