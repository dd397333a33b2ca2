"""Why one function was or was not reported by the tx-outside-transaction analysis.

:func:`explain` runs the analysis as a scan does, then reads what it decided about one
function: the entry paths that reach it (or that none does), the boundaries on them, its
own effects (covered or not), the effects of its heaviest path where they happen, and its
grade and outcome. Output: an :class:`Explanation` (frozen; ``to_dict`` for JSON,
``describe`` for text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.entrypoints import EntryPoint
from auditor.analysis.transactions.analysis import Analysis, Outcome, TxOptions
from auditor.analysis.transactions.facts import enclosing_of
from auditor.analysis.transactions.findings import effect_sites
from auditor.analysis.transactions.reach import Trail, unrun_hook_action
from auditor.analysis.transactions.scanning import call_text
from auditor.errors import UsageError
from auditor.findings.model import EffectSite, Finding
from auditor.index.indexer import collection_paused
from auditor.index.model import FileIndex
from auditor.rules.loader import Rule

REPORTED = "reported"
HIDDEN = "below the minimum severity"
FOLDED = "folded into its callers"
NO_SEQUENCE = "no sequence"
COVERED = "covered by a transaction"
REGISTRY_ROW = "a registry row"
UNREACHABLE = "not reachable from any entry point"


class UnknownFunctionError(UsageError):
    """A function to explain that the file does not define (or defines more than once)."""


@dataclass(frozen=True)
class AnalysisInputs:
    """What the analysis reads: the index per path, the file texts, the rule and
    optionally a prebuilt call graph."""

    indexes: Mapping[str, FileIndex]
    texts: Mapping[str, str]
    rule: Rule
    graph: CallGraph | None = None


@dataclass(frozen=True)
class Hop:
    """One call on an entry path: ``function`` in ``path`` calls ``callee`` at ``line``;
    ``how`` says how an approximate edge was resolved, ``boundary`` what stops the
    analysis there ("" when nothing does)."""

    path: str
    function: str
    line: int
    callee: str
    how: str = ""
    boundary: str = ""


@dataclass(frozen=True)
class EntryPath:
    """An entry point and the calls from it to the function; ``boundaries`` lists what
    covers the path (empty: nothing does)."""

    entry_path: str
    entry_function: str
    kind: str
    detail: str
    hops: tuple[Hop, ...]
    boundaries: tuple[str, ...] = ()


@dataclass(frozen=True)
class EffectLine:
    """One effect in the function's own body: where, what kind, the call, the model's
    reason, and whether a boundary in the function covers it."""

    line: int
    effect: str
    text: str
    reason: str
    covered: bool


@dataclass(frozen=True)
class Explanation:
    """Why ``function`` in ``path`` was or was not reported: ``outcome`` (one of
    :data:`REPORTED`, :data:`HIDDEN`, :data:`FOLDED`, :data:`NO_SEQUENCE`,
    :data:`COVERED`, :data:`REGISTRY_ROW`, :data:`UNREACHABLE`) and ``summary`` in a sentence; the evidence in
    the other fields. ``severity`` and ``reason`` are the grade (None and "" when the
    function was not graded), ``likelihood`` and ``impact`` the levels it rests on and
    ``evidence`` what can fail between the writes, each ``line N <what it does> (text)``;
    ``finding`` is the reported finding."""

    path: str
    function: str
    outcome: str
    summary: str
    entry_point: bool
    entry_paths: tuple[EntryPath, ...]
    effects: tuple[EffectLine, ...]
    sequence: tuple[EffectSite, ...]
    severity: str | None = None
    reason: str = ""
    likelihood: str | None = None
    impact: str | None = None
    evidence: tuple[str, ...] = ()
    finding: Finding | None = None

    def to_dict(self) -> dict[str, object]:
        """The explanation as plain JSON-ready data."""
        return asdict(self)

    def describe(self) -> str:
        """The explanation as text for a reader, one fact a line."""
        lines = [f"{self.path}:{self.function}: {self.outcome}", f"  {self.summary}"]
        if self.severity is not None:
            lines.append(f"  grade: {self.severity}" + (f" ({self.reason})" if self.reason else ""))
            lines.append(f"  likelihood: {self.likelihood}; impact: {self.impact}")
            lines.extend(f"    evidence: {piece}" for piece in self.evidence)
        lines.append("  entry paths:" if self.entry_paths else "  entry paths: none reaches it")
        for entry_path in self.entry_paths:
            lines.append(f"    {entry_path.kind} entry point {entry_path.entry_path}:{entry_path.entry_function} ({entry_path.detail})")
            for hop in entry_path.hops:
                notes = hop.how
                lines.append(f"      {hop.path}:{hop.line} {hop.function} calls {hop.callee}" + (f" [{notes}]" if notes else ""))
            for boundary in entry_path.boundaries:
                lines.append(f"      boundary: {boundary}")
        lines.append("  effects in its body:" if self.effects else "  effects in its body: none")
        for effect in self.effects:
            lines.append(f"    line {effect.line}: {effect.text} ({effect.effect}{', covered' if effect.covered else ''})")
        if self.sequence:
            lines.append("  heaviest path:")
            lines.extend(f"    {site.path}:{site.line} {site.function} ({site.effect})" for site in self.sequence)
        return "\n".join(lines) + "\n"


def explain(inputs: AnalysisInputs, path: str, function: str, options: TxOptions | None = None) -> Explanation:
    """Run the analysis over ``inputs`` and explain what it decided about ``function``
    (a qualname, or its last names when that is unique) in ``path``. Raises
    :class:`UnknownFunctionError` when the file does not define it once."""
    graph = inputs.graph if inputs.graph is not None else CallGraph.build(inputs.indexes)
    options = options if options is not None else TxOptions()
    ref = _resolve(inputs.indexes, path, function)
    with collection_paused():
        analysis = Analysis(inputs.indexes, inputs.texts, inputs.rule, graph, options)
        entries = analysis.entries()
        outcome = analysis.run(entries)
        entry_paths = _entry_paths(analysis, outcome, entries, ref)
        steps = analysis.sequences.path_of(ref)
    outcome_name, summary = _outcome(analysis, outcome, ref, steps, options)
    assessment = outcome.graded.get(ref)
    return Explanation(
        path=ref.path,
        function=ref.qualname,
        outcome=outcome_name,
        summary=summary,
        entry_point=any(entry.ref == ref for entry in entries),
        entry_paths=entry_paths,
        effects=_effects(analysis, ref),
        sequence=effect_sites(ref, steps),
        severity=assessment.severity if assessment is not None else None,
        reason=assessment.reason if assessment is not None else "",
        likelihood=assessment.likelihood if assessment is not None else None,
        impact=assessment.impact if assessment is not None else None,
        evidence=tuple(piece.describe(ref.path) for piece in assessment.evidence) if assessment is not None else (),
        finding=next((f for f in outcome.findings if f.path == ref.path and f.function == ref.qualname), None),
    )


def _resolve(indexes: Mapping[str, FileIndex], path: str, function: str) -> FunctionRef:
    index = indexes.get(path)
    if index is None:
        raise UnknownFunctionError(f"{path} is not an indexed file of the repository")
    functions = [definition.qualname for definition in index.definitions if definition.kind != "class"]
    if function in functions:
        return FunctionRef(path, function)
    matches = [qualname for qualname in functions if qualname.endswith("." + function)]
    if len(matches) == 1:
        return FunctionRef(path, matches[0])
    known = ", ".join(matches or functions[:20]) or "none"
    problem = "names several functions" if matches else "is not a function defined there"
    raise UnknownFunctionError(f"{function!r} {problem} in {path} (functions: {known})")


def _entry_paths(analysis: Analysis, outcome: Outcome, entries: tuple[EntryPoint, ...], ref: FunctionRef) -> tuple[EntryPath, ...]:
    """The uncovered path the search found, or else the shortest path over any edge with
    the boundaries on it; none when no entry point reaches the function."""
    if ref in outcome.reached:
        entry, trail = outcome.reached[ref]
        return (_entry_path(analysis, entry, trail),)
    if ref not in outcome.reachable:
        return ()
    entry, trail = analysis.reach.search(entries, lambda edge: True)[ref]
    return (_entry_path(analysis, entry, trail),)


def _entry_path(analysis: Analysis, entry: EntryPoint, trail: Trail) -> EntryPath:
    boundaries = analysis.boundaries
    found: list[str] = []
    if boundaries.entry_covered(entry):
        signals = boundaries.covering_signals(entry)
        if boundaries.decorated_boundary(entry.ref):
            found.append(f"{entry.ref.qualname} has a boundary decorator")
        elif signals:
            names = ", ".join(sorted(signals))
            found.append(f"{entry.ref.qualname} receives {names}: it runs inside the transaction of the call that sends it")
        else:
            found.append(f"Django runs the view {entry.ref.qualname} in a transaction ({boundaries.requests.origin()})")
    hops = []
    for edge in trail:
        boundary = _edge_boundary(analysis, edge)
        if boundary:
            found.append(f"{edge.caller.path}:{edge.line}: {boundary}")
        how = analysis.reach.dispatch.kinds.get(edge, "resolved by name") if edge.approximate else ""
        hops.append(Hop(edge.caller.path, edge.caller.qualname, edge.line, edge.callee.qualname, how, boundary))
    return EntryPath(entry.ref.path, entry.ref.qualname, entry.kind, entry.detail, tuple(hops), tuple(found))


def _edge_boundary(analysis: Analysis, edge: Edge) -> str:
    call = analysis.reach.call_for(edge)
    if analysis.boundaries.call_covered(edge, call):
        return "the call runs inside a transaction boundary"
    if analysis.boundaries.edge_blocked(edge, call):
        return f"{edge.callee.qualname} opens its own transaction (a boundary decorator)"
    if analysis.sequences.switched_off(edge, call):
        return "the call's constant false arguments switch off every effect of the callee"
    if analysis.sequences.registry.call(edge, call):
        return "the callee's only effect is a registry row (a get-or-create keyed by constants only)"
    return ""


def _effects(analysis: Analysis, ref: FunctionRef) -> tuple[EffectLine, ...]:
    facts = analysis.facts.get(ref.path)
    if facts is None:
        return ()
    enclosing = enclosing_of(ref)
    return tuple(
        EffectLine(
            line=site.call.line,
            effect=site.effect.value,
            text=call_text(site.call, facts.line_text(site.call.line)),
            reason=site.reason,
            covered=facts.covered(enclosing, site.call.line, site.call.callee, site.call.arguments),
        )
        for site in facts.sites.get(ref, ())
    )


def _outcome(analysis: Analysis, outcome: Outcome, ref: FunctionRef, steps: tuple, options: TxOptions) -> tuple[str, str]:
    if ref in outcome.graded:
        severity = outcome.graded[ref].severity
        if ref in outcome.folded:
            callers = sorted({edge.caller.qualname for edge in analysis.reach.callers(ref) if edge.caller in outcome.graded})
            return FOLDED, f"every uncovered call into it comes from a function reported for a sequence through it ({', '.join(callers)})"
        if ref in outcome.hidden:
            return HIDDEN, f"graded {severity}, below the minimum severity {options.min_severity}"
        return REPORTED, f"reported as {severity}: an entry point reaches it and no transaction covers its sequence"
    if ref in outcome.reached:
        if not steps:
            return NO_SEQUENCE, "an entry point reaches it, but no path through it has an effect outside a transaction"
        return NO_SEQUENCE, "an entry point reaches it, but its path holds one effect through a call: nothing to sequence here"
    if ref in outcome.reachable and analysis.sequences.registry.keys(ref) == frozenset():
        return REGISTRY_ROW, "its only effect is a get-or-create keyed by constants only (the same row on every call), set aside: no business write"
    if ref in outcome.reachable:
        return COVERED, "every entry path to it runs through a transaction boundary"
    action = unrun_hook_action(ref, analysis.reach)
    if action is not None:
        hook = ref.qualname.rsplit(".", 1)[-1]
        return UNREACHABLE, f"DRF never runs it: {action.qualname} overrides the action and makes no call that may run {hook}"
    return UNREACHABLE, "no entry point reaches it"
