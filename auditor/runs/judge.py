"""The model as judge of the static candidates: the chains the static pass suspects are
listed in each window that carries them (``candidate_chains``), and the model's verdicts
on them (``verdicts`` in the answer contract) are applied to the static findings
(``judge_static_findings``).

Inputs: the static findings (in report order), and per window the candidates its prompt
listed and the verdicts parsed from its answer; the packed files' texts, to check the line
a refutation cites. Outputs: the static findings with their ``verdicts``, and every verdict
that was not applied, with the reason. A refuted finding is kept (``Finding.disputed``),
never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from auditor.findings.answer import ParsedAnswer
from auditor.findings.model import REFUTED, Finding, Verdict
from auditor.pack.packer import Window
from auditor.pack.prompt import CandidateChain, split_lines

CANDIDATE_PREFIX = "S"


@dataclass(frozen=True)
class WindowVerdicts:
    """One window's side of the judging: the candidates its prompt listed, the verdicts its
    answer gave (in answer order)."""

    window: int
    listed: tuple[CandidateChain, ...]
    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True)
class JudgeProblem:
    """A verdict that was not applied, and why."""

    window: int
    message: str


@dataclass(frozen=True)
class JudgedFindings:
    """The static findings with the verdicts applied, and the problems met doing so."""

    findings: tuple[Finding, ...]
    problems: tuple[JudgeProblem, ...]


def candidate_chains(static_findings: Sequence[Finding]) -> tuple[CandidateChain, ...]:
    """The static findings as candidates to list in prompts, ids ``S1``, ``S2``, … in report
    order (``Finding.sort_key``), so the same scan gives the same ids. Findings without a
    chain are not candidates."""
    ordered = sorted((finding for finding in static_findings if finding.chain), key=Finding.sort_key)
    return tuple(
        CandidateChain(
            id=f"{CANDIDATE_PREFIX}{number}",
            rule=finding.rule,
            steps=tuple((step.path, step.line, step.function) for step in finding.chain),
            sink_path=finding.path,
            sink_line=finding.line,
            key=finding.fingerprint,
        )
        for number, finding in enumerate(ordered, start=1)
    )


def judge_static_findings(
    static_findings: Sequence[Finding],
    windows: Sequence[WindowVerdicts],
    files: Mapping[str, str],
) -> JudgedFindings:
    """Apply each window's verdicts to the static findings its candidates stand for.

    Not applied, each with a problem: a verdict on a candidate the window did not list, a
    second verdict on one candidate in one window, a refutation without a reason, and a
    refutation citing a line outside the packed files. A listed candidate the answer does
    not judge stays unjudged (its ``verdict`` is None). Applied verdicts carry their window;
    ``files`` are the packed files' texts.
    """
    applied: dict[str, list[Verdict]] = {}
    problems: list[JudgeProblem] = []
    for window in windows:
        by_id = {candidate.id.casefold(): candidate for candidate in window.listed}
        judged: set[str] = set()
        for verdict in window.verdicts:
            candidate = by_id.get(verdict.candidate.casefold())
            problem = _refusal(verdict, candidate, judged, files, window)
            if problem is not None:
                problems.append(JudgeProblem(window.window, problem))
                continue
            assert candidate is not None  # _refusal refuses unknown ids
            judged.add(candidate.id)
            path = verdict.path or (candidate.sink_path if verdict.line is not None else None)
            applied.setdefault(candidate.key, []).append(
                replace(verdict, candidate=candidate.id, path=path, window=window.window)
            )
    findings = tuple(
        replace(finding, verdicts=(*finding.verdicts, *applied[finding.fingerprint]))
        if finding.fingerprint in applied else finding
        for finding in static_findings
    )
    return JudgedFindings(findings, tuple(problems))


def _refusal(
    verdict: Verdict,
    candidate: CandidateChain | None,
    judged: set[str],
    files: Mapping[str, str],
    window: WindowVerdicts,
) -> str | None:
    """Why ``verdict`` is not applied, or None when it is."""
    if candidate is None:
        listed = ", ".join(c.id for c in window.listed) or "none"
        return f"verdict on unknown candidate {verdict.candidate!r} (this window listed: {listed}): ignored"
    if candidate.id in judged:
        return f"a second verdict on {candidate.id} was ignored (the first one stands)"
    if verdict.verdict != REFUTED:
        return None
    if not verdict.reason:
        return f"refutation of {candidate.id} gives no reason: not applied, the candidate stays undisputed"
    if verdict.line is not None:
        path = verdict.path or candidate.sink_path
        text = files.get(path)
        if text is None:
            return f"refutation of {candidate.id} cites {path}, which is not in the packed repository: not applied"
        total = len(split_lines(text))
        if not 1 <= verdict.line <= total:
            return (
                f"refutation of {candidate.id} cites line {verdict.line} of {path} (file has {total} lines): not applied"
            )
    return None


def judge_windows(
    static_findings: Sequence[Finding],
    windows: Sequence[Window],
    answers: Sequence[ParsedAnswer],
    files: Mapping[str, str],
) -> JudgedFindings:
    """``judge_static_findings`` over the windows as sent (their ``candidates``) and their
    parsed answers, one per window; a truncated answer's complete verdicts are applied."""
    sides = [
        WindowVerdicts(window.index, window.candidates, answer.verdicts)
        for window, answer in zip(windows, answers, strict=True)
    ]
    return judge_static_findings(static_findings, sides, files)
