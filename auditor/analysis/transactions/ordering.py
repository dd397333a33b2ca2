"""Report order within a severity: how convincing a finding's evidence is.

Input: the entry point's kind, whether the path is proven (:func:`~.findings.path_proven`),
and the :class:`~.assessment.Assessment` (impact kind, likelihood, failure points). Output:
the finding's ``strength`` (higher: more convincing), which ``Finding.sort_key`` orders findings
of one severity by, ahead of path, line and fingerprint. The rule file states the order.

The signals, most significant first, each a question a reader asks of a finding:

1. **Who meets the partial state** (entry kind): a request's user, who re-submits and
   meets a half-written object or makes a duplicate, first; a signal receiver, task or
   consumer (a caller may cover it, a broker or scheduler repeats it) next; a command or
   ``__main__`` block, whose operator sees the traceback and runs it again, last. A
   function a more exposed entry reaches too, over proven calls, ranks with that entry
   (:func:`~.receiver_search.exposed_entries`); its chain and grade stay the shortest
   trail's.
2. **Whether the path runs as reported** (path proven): a chain with an edge resolved by
   name only or through a ``getattr`` string may not exist (:func:`~.findings.proven`), and
   a function the framework calls from an entry the pass did not see (a serializer's
   ``save()``, a signal receiver) may be covered by that caller's transaction.
3. **What a failure leaves** (impact kind): a new object left half-configured, a counter or
   amount off, rows deleted before their replacement, a plain partial write, then data
   that is repaired (bookkeeping, derived, re-runnable). Ranked by whether repeating the
   action repairs it: a repeat creates the object again or counts again, but it rewrites a
   replaced set in full from the same input.
4. **Whether it fails there** (likelihood): likely, possible, unlikely; then how many
   failure points were found (up to the three an explanation names).

Measured on the judged round-5 and round-6 draws (benchmarks/precision), rescanned at
d8eb921: TRUE findings were 25 of 73 on request paths, 2 of 21 on commands; the 11 over an
unproven call (5) or from a framework-called entry (6) were 2 TRUE, 3 WEAK and 6 FALSE,
against 1 FALSE among the 98 proven; 13 of 22 half-configured against 2 of 11 replaced. More writes on a path
were no sign of a weaker finding (2 writes: 6 TRUE of 40; 5 or more: 13 of 27), so the
number of writes is not a signal.
"""

from __future__ import annotations

from collections.abc import Sequence

from auditor.analysis.transactions.assessment import REQUEST
from auditor.analysis.transactions.impact import ImpactKind
from auditor.analysis.transactions.likelihood import Likelihood

ENTRY_RANK = {REQUEST: 2, "consumer": 1, "task": 1, "cli": 0, "main": 0}
"""Who meets the partial state, by entry kind (higher: more convincing); an unknown kind
ranks with the commands."""
IMPACT_RANK = {
    ImpactKind.HALF_CONFIGURED: 4,
    ImpactKind.COUNTER: 3,
    ImpactKind.REPLACED: 2,
    ImpactKind.PLAIN: 1,
    ImpactKind.REPAIRED: 0,
}
"""What a failure leaves, by impact kind (higher: more convincing)."""
LIKELIHOOD_RANK = {Likelihood.LIKELY: 2, Likelihood.POSSIBLE: 1, Likelihood.UNLIKELY: 0}
"""Whether it fails between the writes (higher: more convincing)."""
COUNTED_FAILURE_POINTS = 3
"""Failure points counted towards the order (an explanation names this many)."""


def strength(
    *, entry_kind: str, path_proven: bool, impact: ImpactKind, likelihood: Likelihood, failure_points: int
) -> int:
    """The finding's strength: the signals of this module's docstring compared in their
    order (an earlier one decides; a later one only breaks its ties), as one integer."""
    return lexicographic((
        (ENTRY_RANK.get(entry_kind, 0), max(ENTRY_RANK.values()) + 1),
        (int(path_proven), 2),
        (IMPACT_RANK[impact], len(IMPACT_RANK)),
        (LIKELIHOOD_RANK[likelihood], len(LIKELIHOOD_RANK)),
        (min(failure_points, COUNTED_FAILURE_POINTS), COUNTED_FAILURE_POINTS + 1),
    ))


def lexicographic(ranks: Sequence[tuple[int, int]]) -> int:
    """``(rank, size)`` pairs, most significant first, as one integer that orders as the
    tuple of ranks does (each ``rank`` in ``range(size)``)."""
    value = 0
    for rank, size in ranks:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} outside range({size})")
        value = value * size + rank
    return value
