"""JSON report: the whole scan result as one deterministic JSON document.

Input: a ``ScanResult``. Output: JSON text with sorted keys, 2-space indent and a
trailing newline. Reasoning traces appear only here, under ``windows[].reasoning``.
"""

from __future__ import annotations

import json
from typing import Any

from auditor.findings.model import ChainStep, Claim, ClaimedStep, Finding, FindingChain, Verdict
from auditor.report.model import ReviewSummary, ScanResult, WindowOutcome, bounded_result

JSON_REPORT_VERSION = 1


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    """A finding as the report's JSON object."""
    return {
        "rule": finding.rule,
        "severity": finding.severity,
        "title": finding.title,
        "path": finding.path,
        "line": finding.line,
        "function": finding.function,
        "chain": [_step_to_dict(step) for step in finding.chain],
        "found_by": list(finding.found_by),
        "fingerprint": finding.fingerprint,
        "explanation": finding.explanation,
        "window": finding.window,
        "chains": [_chain_to_dict(chain) for chain in finding.entry_chains()],
        "verdict": finding.verdict,
        "disputed": finding.disputed,
        "unverified": finding.unverified,
        "verdicts": [_verdict_to_dict(verdict) for verdict in finding.verdicts],
        "sequence": [
            {"path": site.path, "line": site.line, "function": site.function, "effect": site.effect} for site in finding.sequence
        ],
    }


def _chain_to_dict(chain: FindingChain) -> dict[str, Any]:
    return {
        "steps": [_step_to_dict(step) for step in chain.steps],
        "found_by": list(chain.found_by),
        "explanation": chain.explanation,
    }


def _verdict_to_dict(verdict: Verdict) -> dict[str, Any]:
    return {
        "candidate": verdict.candidate,
        "verdict": verdict.verdict,
        "reason": verdict.reason,
        "path": verdict.path,
        "line": verdict.line,
        "window": verdict.window,
    }


def _step_to_dict(step: ChainStep) -> dict[str, Any]:
    return {"path": step.path, "line": step.line, "function": step.function, "verified": step.verified, "note": step.note}


def _claimed_step_to_dict(step: ClaimedStep) -> dict[str, Any]:
    return {"path": step.path, "line": step.line, "function": step.function}


def claim_to_dict(claim: Claim) -> dict[str, Any]:
    """A claim exactly as the model stated it (the answer contract's finding object)."""
    return {
        "rule": claim.rule,
        "title": claim.title,
        "severity": claim.severity,
        "sink": _claimed_step_to_dict(claim.sink),
        "chain": [_claimed_step_to_dict(step) for step in claim.chain],
        "explanation": claim.explanation,
    }


def _window_to_dict(window: WindowOutcome) -> dict[str, Any]:
    return {
        "index": window.index,
        "prompt_tokens": window.prompt_tokens,
        "cached_prompt_tokens": window.cached_prompt_tokens,
        "completion_tokens": window.completion_tokens,
        "finish_reason": window.finish_reason,
        "complete": window.complete,
        "error": window.error,
        "files_full": sorted(window.files_full),
        "files_skeleton": sorted(window.files_skeleton),
        "reasoning": window.reasoning,
        "recall": None
        if window.recall is None
        else {
            "planted": window.recall.planted,
            "correct": window.recall.correct,
            "abstained": window.recall.abstained,
            "wrong": window.recall.wrong,
            "recall": round(window.recall.recall, 4),
            "degraded": window.recall.degraded,
            "missed": [{"depth": depth, "file_before": before, "file_after": after} for depth, before, after in window.recall.missed],
        },
    }


def review_to_dict(review: ReviewSummary) -> dict[str, Any]:
    """The review section: revisions, changed files, per-finding status and coverage."""
    return {
        "base": review.base,
        "head": review.head,
        "changed_files": sorted(review.changed_files),
        "deleted_files": sorted(review.deleted_files),
        "renamed": [{"from": old, "to": new} for old, new in sorted(review.renamed)],
        "new": review.new_count,
        "existing": review.existing_count,
        "blocking": review.blocking_count,
        "outside_diff": review.outside_diff,
        "base_compared": review.base_compared,
        "existing_blocking": review.existing_blocking,
        "scope": review.scope,
        "prompt_tokens_sent": {"head": review.head_prompt_tokens, "base": review.base_prompt_tokens},
        "findings": [
            {
                "fingerprint": item.fingerprint,
                "status": item.status,
                "path": item.path,
                "line": item.line,
                "function": item.function,
                "touched_by": item.touched_by,
            }
            for item in sorted(review.findings, key=lambda item: item.fingerprint)
        ],
        "coverage": [
            {"path": item.path, "role": item.role, "tier": item.tier}
            for item in sorted(review.coverage, key=lambda item: (item.role != "changed", item.path))
        ],
    }


def report_dict(result: ScanResult) -> dict[str, Any]:
    """The JSON report as a dictionary (what ``render_json`` serialises), model text, traces
    and chains within the output limits (``auditor.report.model.bounded_result``)."""
    result = bounded_result(result)
    windows = sorted(result.windows, key=lambda window: window.index)
    return {
        "version": JSON_REPORT_VERSION,
        "tool": {"name": "auditor", "version": result.tool_version},
        "root": result.root,
        "engine": result.engine,
        "model": result.model,
        "tokenizer": {"source": result.tokenizer_source, "exact": result.tokenizer_exact},
        "complete": result.complete,
        "summary": {
            "complete": result.complete,
            "findings": len(result.findings),
            "by_severity": dict(result.severity_counts()),
            "rejected": len(result.rejected),
            "windows": len(windows),
            "windows_incomplete": len(result.incomplete_windows),
            "recall_degraded": result.recall_degraded,
            "errors": len(result.errors),
            "injection_flags": len(result.injection_flags),
            "prompt_tokens_sent": result.prompt_tokens_sent,
            "suppressed": len(result.suppressed),
            "warnings": len(result.warnings),
        },
        "rules": [
            {"id": rule.id, "title": rule.title, "severity": rule.severity, "description": rule.description, "source": rule.source}
            for rule in sorted(result.rules, key=lambda rule: rule.id)
        ],
        "findings": [finding_to_dict(finding) for finding in result.sorted_findings()],
        "rejected": [
            {"reason": rejected.reason, "window": rejected.window, "finding": claim_to_dict(rejected.claim)}
            for rejected in result.sorted_rejected()
        ],
        "windows": [_window_to_dict(window) for window in windows],
        "errors": [{"kind": error.kind, "message": error.message, "window": error.window} for error in result.errors],
        "notices": list(result.notices),
        "coverage": {
            "full": sorted(result.coverage.full),
            "skeleton": sorted(result.coverage.skeleton),
            "omitted": sorted(result.coverage.omitted),
            "not_audited": [
                {"path": item.path, "reason": item.reason, "detail": item.detail, "source": item.source}
                for item in result.coverage.not_audited
            ],
            "partial": result.partial,
        },
        "injection_flags": [
            {"path": flag.path, "line": flag.line, "text": flag.text}
            for flag in sorted(result.injection_flags, key=lambda flag: (flag.path, flag.line))
        ],
        "prompt_tokens_sent": result.prompt_tokens_sent,
        "suppressed": [
            {"source": item.source, "reason": item.reason, "location": item.location, "finding": finding_to_dict(item.finding)}
            for item in result.sorted_suppressed()
        ],
        "warnings": list(result.warnings),
        "review": review_to_dict(result.review) if result.review is not None else None,
    }


def render_json(result: ScanResult) -> str:
    """The JSON report: sorted keys, 2-space indent, trailing newline, same bytes for the same result."""
    return json.dumps(report_dict(result), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
