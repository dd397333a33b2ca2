"""Merging: findings from several windows and from the static pass, de-duplicated by
fingerprint into report order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from auditor.findings.model import SEVERITY_ORDER, Finding


def merge_findings(groups: Iterable[Iterable[Finding]]) -> tuple[Finding, ...]:
    """De-duplicate findings by fingerprint across windows, rules and sources.

    ``found_by`` becomes the sorted union. The chain kept is the best confirmed one: a
    static chain (derived from the call graph) first, then the chain with more verified
    steps, then the longer one. The explanation and title come from a model finding when
    there is one (static ones are generic), the severity is the most severe claimed, the
    window the earliest. The result is sorted by ``Finding.sort_key``.
    """
    by_fingerprint: dict[str, list[Finding]] = {}
    for group in groups:
        for finding in group:
            by_fingerprint.setdefault(finding.fingerprint, []).append(finding)
    merged = [_merge_same(findings) for findings in by_fingerprint.values()]
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
    voice = model_ranked[0] if model_ranked else best
    found_by = tuple(sorted({source for finding in findings for source in finding.found_by}))
    severity = min((finding.severity for finding in findings), key=lambda value: (SEVERITY_ORDER.get(value, 9), value))
    windows = [finding.window for finding in findings if finding.window is not None]
    return replace(
        best,
        severity=severity,
        title=voice.title or best.title,
        explanation=voice.explanation or best.explanation,
        found_by=found_by,
        window=min(windows) if windows else None,
    )
