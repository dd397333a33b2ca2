"""Merging: findings from several windows and from the static pass, de-duplicated by
sink (rule, file, function and line of one scan) into report order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from auditor.findings.model import Finding, FindingChain
from auditor.rules.severity import Severity


def merge_findings(groups: Iterable[Iterable[Finding]]) -> tuple[Finding, ...]:
    """De-duplicate findings by sink across windows, rules and sources: one finding per
    rule, path, function and sink line (every finder read the same files). The merged
    finding keeps the best chain's fingerprint (the static pass's when it found the sink:
    a model's fingerprint has no entry point or sequence to hash).

    ``found_by`` becomes the sorted union. The chain kept is the best confirmed one: a
    static chain (derived from the call graph) first, then the chain with more verified
    steps, then the longer one. The explanation and title come from a model finding when
    there is one that traced the kept chain (static ones are generic), the severity is the
    most severe claimed, the window the earliest. The result is sorted by ``Finding.sort_key``.

    No chain is lost: ``chains`` holds every distinct entry chain (by its steps' paths and
    functions) reaching the sink, the kept one first, each with who traced it and that
    finder's explanation, so a model's explanation stays with the model's chain. The
    finding's own ``explanation`` is the kept chain's. ``verdicts`` is the union, in
    window order.
    """
    by_sink: dict[tuple[str, str, str, int], list[Finding]] = {}
    for group in groups:
        for finding in group:
            by_sink.setdefault((finding.rule, finding.path, finding.function, finding.line), []).append(finding)
    merged = [_merge_same(findings) for findings in by_sink.values()]
    return tuple(sorted(merged, key=lambda finding: finding.sort_key()))


def _chain_rank(finding: Finding) -> tuple[object, ...]:
    verified = sum(step.verified for step in finding.chain)
    return (
        "static" not in finding.found_by,
        -verified,
        -len(finding.chain),
        finding.window if finding.window is not None else -1,
        finding.line,
        tuple((step.path, step.line, step.function) for step in finding.chain),
    )


def _merge_same(findings: list[Finding]) -> Finding:
    ranked = sorted(findings, key=_chain_rank)
    best = ranked[0]
    model_ranked = [finding for finding in ranked if "model" in finding.found_by and finding.explanation]
    found_by = tuple(sorted({source for finding in findings for source in finding.found_by}))
    severity = min((finding.severity for finding in findings), key=lambda value: (Severity.rank_of(value), value))
    windows = [finding.window for finding in findings if finding.window is not None]
    chains = merge_chains(ranked)
    # The title and explanation speak for the kept chain: a model's only when it traced it.
    primary = chains[0].route()
    voices = [finding for finding in model_ranked if any(chain.route() == primary for chain in finding.entry_chains())]
    voice = voices[0] if voices else best
    verdicts = tuple(sorted(
        {verdict for finding in findings for verdict in finding.verdicts},
        key=lambda v: (v.window if v.window is not None else -1, v.candidate, v.verdict, v.reason, v.path or "", v.line or 0),
    ))
    return replace(
        best,
        severity=severity,
        title=voice.title or best.title,
        explanation=chains[0].explanation or best.explanation,
        found_by=found_by,
        window=min(windows) if windows else None,
        chains=chains,
        verdicts=verdicts,
    )


def merge_chains(ranked: list[Finding]) -> tuple[FindingChain, ...]:
    """Every distinct entry chain of ``ranked`` (best first), one per route of (path,
    function) steps. A route several finders traced keeps the best-ranked steps, the union
    of finders, and a model's explanation when one traced it."""
    routes: dict[tuple[tuple[str, str], ...], list[FindingChain]] = {}
    for finding in ranked:
        for chain in finding.entry_chains():
            routes.setdefault(chain.route(), []).append(chain)
    merged: list[FindingChain] = []
    for same in routes.values():
        spoken = [chain for chain in same if "model" in chain.found_by and chain.explanation]
        voice = spoken[0] if spoken else same[0]
        merged.append(FindingChain(
            steps=same[0].steps,
            found_by=tuple(sorted({source for chain in same for source in chain.found_by})),
            explanation=voice.explanation or same[0].explanation,
        ))
    return tuple(merged)
