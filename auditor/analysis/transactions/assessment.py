"""Likelihood × impact of a graded sequence: the evidence its grade states and the
signals the report orders findings of one severity by (the rule file defines both).

Input: a function, its path, the grade :func:`~.grading.grade_function` gave for what its
writes are, and the lines of the analysed files. Output: an :class:`Assessment` with the
severity, the likelihood (:mod:`.likelihood`) and impact (:mod:`.impact`) it rests on, the
evidence of each, and the reason the finding states (:mod:`.ordering` turns the impact kind,
likelihood and failure points, with the entry and the chain, into the report's order).

The band (shown: critical or high; or medium, low) is the one :mod:`.grading` gives for
what the writes are, and within the shown bands the impact sets it (:func:`shown_severity`).
A demotion
(:data:`~.grading.DEMOTIONS`: a re-run completes the path, one object stays valid, the side
effect comes last) is a claim, and on a request's path (an ``http`` entry) it yields to a
failure point between the writes (for the retry claims, a loop's later iteration too): the finding keeps the
grade its writes have without the claim and its reason names the line. A command, task or
receiver keeps its demotion: an operator or a scheduler repeats the run (the judged draws
call such findings WEAK, and no real fix in benchmarks/real_fixes needs the lift there).
A matrix that
lets likelihood × impact set it was measured and not adopted: the strict one (medium
impact hidden unless a failure point is found) hid 6 of the 9 TRUE findings of the
round-4 fresh draw for a precision of 0.17 (from 0.15); the static signals do not yet
separate TRUE from WEAK well enough to hide findings by them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from auditor.analysis.transactions.grading import DEMOTIONS, ONE_OBJECT, ONLY_DELETES, SIDE_EFFECT_AFTER, UPSERTS_FIRST, Step, grade
from auditor.analysis.transactions.impact import Impact, ImpactKind, impact
from auditor.analysis.transactions.likelihood import Evidence, Likelihood, failure_points, likelihood
from auditor.callgraph.graph import FunctionRef
from auditor.rules.severity import Severity

_SHOWN_EVIDENCE = 3
# A loop lifts the claims about what a retry completes (deletes, links then a write, one
# object): a failure at a later iteration leaves the object without part of its children or
# links. A rewrite of existing rows in a loop leaves each row old or new, each valid, and a
# re-submit writes the same values: that claim yields only to a failure point.
_LOOP_LIFTED = frozenset({ONLY_DELETES, UPSERTS_FIRST, ONE_OBJECT})
REQUEST = "http"
"""The entry kind whose paths lose their demotions to a failure point (:func:`assess`)."""


@dataclass(frozen=True)
class Assessment:
    """A graded sequence's severity and what it rests on."""

    severity: Severity
    likelihood: Likelihood
    impact: Impact
    impact_kind: ImpactKind
    """What the impact's evidence shows (:mod:`.ordering` ranks by it)."""
    evidence: tuple[Evidence, ...]
    """What can fail between the writes, most telling first."""
    impact_evidence: str
    """The sentence that states the impact's evidence ("" for a medium impact)."""
    reason: str
    """The grade as the finding's explanation ends with it: impact, likelihood and their
    evidence, then :mod:`.grading`'s reason."""


def assess(
    ref: FunctionRef,
    steps: tuple[Step, ...],
    graded: tuple[Severity, str],
    lines_of: Callable[[str], Sequence[str]],
    *,
    entry_kind: str,
) -> Assessment:
    """The assessment of ``ref``'s path ``steps``, whose writes :mod:`.grading` graded
    ``graded`` (severity, reason), reached from an entry point of ``entry_kind``
    (``http``, ``cli``, ``task``...): likelihood, impact and their evidence."""
    base, base_reason = graded
    evidence = failure_points(ref.path, steps, lines_of, to_side_effect=base_reason == SIDE_EFFECT_AFTER)
    level = likelihood(evidence)
    if base == Severity.LOW:
        found = impact(ref.path, steps, lines_of, base_reason)
        return Assessment(base, level, found.impact, found.kind, evidence, "", "")
    severity, reason = base, base_reason
    undone = _undone(steps, base_reason, level, evidence, ref.path) if entry_kind == REQUEST else None
    if undone is not None:
        severity, reason = undone
    found = impact(ref.path, steps, lines_of, reason)
    severity = shown_severity(severity, found.impact)
    text = _reason(ref.path, severity, level, found.impact, evidence, found.evidence, reason)
    return Assessment(severity, level, found.impact, found.kind, evidence, found.evidence, text)


def shown_severity(band: Severity, level: Impact) -> Severity:
    """The severity of a finding :mod:`.grading` put in a shown band (critical or high: the
    CLI's default shows both) once its impact is known: **critical** for a high impact (data
    destroyed before its replacement, a new object left half-configured, counters or
    amounts), **high** for the rest. Medium and low stay as graded. Moving a finding between
    the two shown bands hides nothing; what the writes are (two autocommit writes against
    several commits) no longer sets it, so ``critical`` says how bad the partial state is.
    In round 5's judged draw (rescanned at 41de7fd), the high-impact findings were 7 TRUE of
    18 judged, the others 4 of 35."""
    if band not in (Severity.CRITICAL, Severity.HIGH):
        return band
    return Severity.CRITICAL if level == Impact.HIGH else Severity.HIGH


def _undone(
    steps: tuple[Step, ...], base_reason: str, level: Likelihood, evidence: tuple[Evidence, ...], path: str
) -> tuple[Severity, str] | None:
    """The grade ``steps`` have without their demotion, and the reason saying why it does
    not hold, when ``base_reason`` is a demotion and a failure point lies between the
    writes; None otherwise."""
    if base_reason not in DEMOTIONS or level == Likelihood.UNLIKELY:
        return None
    if level == Likelihood.POSSIBLE and base_reason not in _LOOP_LIFTED:
        return None
    undemoted = grade(steps, demote=False)
    if undemoted is None or Severity.rank_of(undemoted[0]) >= Severity.rank_of(Severity.MEDIUM):
        return None
    point = evidence[0]
    claim = base_reason.split(":", 1)[0]
    because = f"not demoted for {claim!r}: on a request's path {point.describe(path)}"
    return undemoted[0], "; ".join(part for part in (because, undemoted[1]) if part)


def describe_likelihood(level: Likelihood, evidence: tuple[Evidence, ...], path: str = "") -> str:
    """The likelihood as the reason states it: the level and its first pieces of evidence
    (lines of ``path`` by number, others with their file)."""
    if not evidence:
        return f"{level} failure between the writes (nothing between them but the database)"
    shown = "; ".join(piece.describe(path) for piece in evidence[:_SHOWN_EVIDENCE])
    more = len(evidence) - _SHOWN_EVIDENCE
    return f"{level} failure between the writes: {shown}" + (f" (and {more} more)" if more > 0 else "")


def _reason(
    path: str,
    severity: Severity, level: Likelihood, grade: Impact, evidence: tuple[Evidence, ...], impact_evidence: str, base_reason: str
) -> str:
    impact_text = f"{grade} impact" + (f": {impact_evidence}" if impact_evidence and impact_evidence != base_reason else "")
    parts = [base_reason] if base_reason else []
    parts += [impact_text, describe_likelihood(level, evidence, path)]
    return "; ".join(parts)
