"""Sequences to findings: which graded functions are reported (a helper whose every
caller sequences it folds into them), and the finding for one (its chain from the entry
point, title, explanation and the effects of its path where they happen).

Inputs: a function's path (:class:`~.grading.Step` tuple), its grade, the entry point and
trail that reach it. Output: a :class:`~auditor.findings.model.Finding` with
``found_by=FOUND_BY``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.entrypoints import EntryPoint, framework_invoked
from auditor.analysis.transactions.assessment import Assessment
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.dispatch import GETATTR
from auditor.analysis.transactions.grading import DB_EFFECTS, SIDE_EFFECTS, WRITES, Step
from auditor.analysis.transactions.ordering import ENTRY_RANK, strength
from auditor.analysis.transactions.lazy_inits import REASON as LAZY_REASON
from auditor.analysis.transactions.registry_rows import REASON as REGISTRY_REASON
from auditor.findings.fingerprints import finding_fingerprint
from auditor.findings.model import ChainStep, EffectSite, Finding
from auditor.rules.loader import Rule

UNPROVEN_KINDS = ("resolved by name", GETATTR)
"""The approximate edges' kinds that prove nothing of the callee (a name-only fallback is
an approximate edge with no kind)."""
FOUND_BY = ("static",)
"""What finds the static pass's findings."""
_SET_ASIDE_SHOWN = 3  # registry rows named in an explanation; the rest counted


def folded(
    ref: FunctionRef,
    callers: list[Edge],
    candidates: Mapping[FunctionRef, object],
    is_entry: bool,
    blocked: Callable[[Edge], bool],
    path_of: Callable[[FunctionRef], tuple[Step, ...]],
) -> bool:
    """Whether every uncovered call into ``ref`` (``callers``: the reached ones) comes from
    a reported function whose own sequence runs through that call: the finding then sits
    at the callers, where one transaction would cover both (an entry point is never folded)."""
    if not callers or is_entry or any(edge.caller == ref for edge in callers):
        return False
    for edge in callers:
        if blocked(edge):
            continue
        if edge.caller not in candidates:
            return False
        if not any(step.callee == ref and step.line == edge.line for step in path_of(edge.caller)):
            return False
    return True


def build_finding(
    rule: Rule,
    ref: FunctionRef,
    entry: EntryPoint,
    trail: tuple[Edge, ...],
    steps: tuple[Step, ...],
    assessment: Assessment,
    lines_of: Callable[[str], Sequence[str]],
    edge_kinds: Mapping[Edge, str],
    request_note: str = "",
    set_aside: tuple[str, ...] = (),
    lazy: tuple[str, ...] = (),
    exposed: EntryPoint | None = None,
) -> Finding:
    """The finding for ``ref``'s path ``steps`` assessed ``assessment`` (severity, reason),
    reached from ``entry`` through ``trail``; ``lines_of`` gives a file's lines (the write
    calls of the sequence go into the fingerprint), ``edge_kinds`` says how approximate
    edges resolve, ``request_note`` which request setting a view's grade assumes (it
    follows the first sentence of the explanation), ``set_aside`` the registry rows on the
    path not counted (``path:line: text``; named after the path), ``lazy`` the calls into lazy
    initializers set aside likewise. Its ``strength``, which
    orders it among findings of its severity, is :func:`.ordering.strength`'s, of the entry
    kind of ``exposed`` where that entry point (one reaching ``ref`` over proven calls,
    :func:`.receiver_search.exposed_entries`) is more exposed than ``entry``; the
    explanation then names it."""
    severity, reason = assessment.severity, assessment.reason
    first = steps[0]
    effects = [effect for step in steps for effect in step.effects]
    chain: list[ChainStep] = []
    hops = [entry.ref, *(edge.callee for edge in trail)]
    for position, hop in enumerate(hops):
        # A hop reached over an edge the pass could not prove (a name-only fallback, a
        # getattr string) is lower confidence: not verified.
        verified = position == 0 or proven(trail[position - 1], edge_kinds)
        if position == len(hops) - 1:
            line, note = first.line, ""
        else:
            edge = trail[position]
            line = edge.line  # where this function calls the next step (docs/answer-contract.md)
            how = edge_kinds.get(edge, "resolved by name") if edge.approximate else ""
            note = f"calls {edge.callee.qualname} at line {edge.line}" + (f" ({how})" if how else "")
        if position == 0:
            note = f"entry point: {entry.detail}" + (f"; {note}" if note else "")
        chain.append(ChainStep(path=hop.path, line=line, function=hop.qualname, verified=verified, note=note))
    steps_text = "; ".join(f"line {step.line}: {step.text}" + _effects_note(step) for step in steps)
    route = " -> ".join(f"{hop.path}:{hop.qualname}" for hop in hops)
    reach = (
        f"reaches {ref.qualname} through {len(trail)} call{'s' if len(trail) != 1 else ''} ({route})"
        if trail
        else f"writes in its own body ({route})"
    )
    explanation = (
        f"{entry.kind} entry point {entry.ref.qualname} ({entry.detail}) {reach}, and no transaction boundary "
        f"(decorator, with-block or transaction handle) covers the path."
        + (f" {request_note}" if request_note else "")
        + f" On one path: {steps_text}."
    )
    for why, items in ((REGISTRY_REASON, set_aside), (LAZY_REASON, lazy)):
        if items:
            more = f" (and {len(items) - _SET_ASIDE_SHOWN} more)" if len(items) > _SET_ASIDE_SHOWN else ""
            explanation += f" Set aside, not counted: {why}: {'; '.join(items[:_SET_ASIDE_SHOWN])}{more}."
    if len(steps) > 1:
        explanation += _consequence(effects)
    meets = entry
    if exposed is not None and ENTRY_RANK.get(exposed.kind, 0) > ENTRY_RANK.get(entry.kind, 0):
        meets = exposed
        explanation += (
            f" The {exposed.kind} entry point {exposed.ref.qualname} ({exposed.detail}) reaches it too, over proven calls; "
            "the report orders it by that entry."
        )
    if reason:
        explanation += f" Graded {severity}: {reason}."
    finding = Finding(
        rule=rule.id,
        severity=severity,
        title=_title(ref, effects),
        path=ref.path,
        line=first.line,
        function=ref.qualname,
        chain=tuple(chain),
        explanation=explanation,
        found_by=FOUND_BY,
        fingerprint="",
        sequence=effect_sites(ref, steps),
        strength=strength(
            entry_kind=meets.kind, path_proven=path_proven(entry, chain), impact=assessment.impact_kind,
            likelihood=assessment.likelihood, failure_points=len(assessment.evidence),
        ),
    )
    return replace(finding, fingerprint=finding_fingerprint(finding, lines_of))


def path_proven(entry: EntryPoint, chain: Sequence[ChainStep]) -> bool:
    """Whether the pass knows the path runs as reported: its entry point is one the
    framework enters directly, not a function the framework calls from another entry that
    the pass did not see (a serializer's ``save()``, a signal receiver, a DRF ``perform_*``
    hook: that caller may open the transaction), and every call of ``chain`` is proven."""
    return not framework_invoked(entry) and all(step.verified for step in chain)


def proven(edge: Edge, edge_kinds: Mapping[Edge, str]) -> bool:
    """Whether the pass resolved ``edge`` from what the code says: an exact edge, or an
    approximate one whose receiver class it read (an override of the class the chain came
    through, a typed variable, a manager); not a name-only fallback or a ``getattr`` string."""
    return not edge.approximate or edge_kinds.get(edge, UNPROVEN_KINDS[0]) not in UNPROVEN_KINDS


def effect_sites(ref: FunctionRef, steps: tuple[Step, ...]) -> tuple[EffectSite, ...]:
    """Every effect on ``ref``'s path where it happens: a call's effects at their own lines
    in the callee, each of the kind the call site counts it as (a bookkeeping callee's
    writes are bookkeeping)."""
    sites: list[EffectSite] = []
    for step in steps:
        if step.callee is not None and step.inner:
            inner = effect_sites(step.callee, step.inner)
            sites += [EffectSite(site.path, site.line, site.function, effect.value) for site, effect in zip(inner, step.effects, strict=True)]
        else:
            sites += [EffectSite(ref.path, step.line, ref.qualname, effect.value) for effect in step.effects]
    return tuple(sites)


def _title(ref: FunctionRef, effects: list[Effect]) -> str:
    writes = sum(effect in DB_EFFECTS for effect in effects)
    side_effects = sum(effect in SIDE_EFFECTS for effect in effects)
    commits = effects.count(Effect.COMMIT) + effects.count(Effect.REPOSITORY)
    if writes == 1 and not side_effects:
        return f"Database write outside a transaction in {ref.qualname}"
    if commits == writes == 1:
        text = f"A commit and then an irreversible side effect in {ref.qualname}"
    elif commits == writes:
        noun = "commits" if Effect.COMMIT in effects else "separately committed repository writes"
        text = f"{writes} {noun} on one path in {ref.qualname}"
    elif writes == 1:
        text = f"Database write outside a transaction in {ref.qualname}"
    else:
        text = f"{writes} database writes outside a transaction in {ref.qualname}"
    if side_effects and not text.startswith("A commit"):
        text += f", with {side_effects} irreversible side effect{'s' if side_effects > 1 else ''}"
    return text


def _consequence(effects: list[Effect]) -> str:
    if any(effect in WRITES for effect in effects):
        return " Each write commits on its own: a failure between them leaves partial state."
    if any(effect in SIDE_EFFECTS for effect in effects):
        return " What is committed stays when the side effect after it fails, and the side effect cannot be undone."
    return " Each commit stands on its own: a failure after the first leaves it in place."


def _effects_note(step: Step) -> str:
    if step.callee is None:
        return f" ({step.effects[0].value})"
    counts = {effect: step.effects.count(effect) for effect in step.effects}
    return " (" + ", ".join(f"{count} {effect.value}{'s' if count > 1 else ''}" for effect, count in counts.items()) + ")"
