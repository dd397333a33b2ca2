"""Terminal report: findings grouped by rule and severity, chains shown as paths.

Input: a ``ScanResult``. Output: plain text rendered by rich at a fixed width (no colour
codes), so the same result always gives the same text. Incomplete windows and errors
come first, marked INCOMPLETE.
"""

from __future__ import annotations

import io
from itertools import groupby
from operator import attrgetter

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule as Divider
from rich.text import Text

from auditor.findings.model import ChainStep, Finding
from auditor.report.model import (
    ReviewedFinding,
    ScanResult,
    bounded_result,
    error_text,
    recall_line,
    revision_label,
    severity_summary,
    step_location,
    visible_controls,
    where_text,
    window_problem,
)
from auditor.rules.severity import Severity

DEFAULT_WIDTH = 100


_SCOPES = {"diff": "the change's subgraph", "full": "both trees whole (--full)"}


def chain_path(finding: Finding, steps: tuple[ChainStep, ...] | None = None) -> str:
    """The chain (or ``steps``, another chain of the finding) as one line:
    'a.py:10 view -> b.py:40 save_order' (unverified steps marked '[unverified]')."""
    parts = []
    for step in finding.chain if steps is None else steps:
        part = f"{step_location(step.path, step.line)} {step.function}"
        parts.append(part if step.verified else f"{part} [unverified]")
    return " -> ".join(parts)


def _finding(finding: Finding, reviewed: ReviewedFinding | None = None) -> RenderableType:
    head = Text()
    if reviewed is not None:
        head.append(f"[{reviewed.status}] ")
    head.append(f"{step_location(finding.path, finding.line)} {finding.function}", style="bold")
    head.append(f" — {finding.title}")
    if finding.disputed:
        head.append(" [disputed]")
    body: list[RenderableType] = [head]
    if reviewed is not None:
        changed = f"changed: {step_location(reviewed.path, reviewed.line)} {reviewed.function} ({reviewed.touched_by})"
        body.append(Padding(Text(changed), (0, 0, 0, 2)))
    if finding.chain:
        body.append(Padding(Text(f"chain: {chain_path(finding)}"), (0, 0, 0, 2)))
        notes = [f"{step.function}: {step.note}" for step in finding.chain if step.note]
        for note in notes:
            body.append(Padding(Text(f"note: {note}", style="dim"), (0, 0, 0, 2)))
    if finding.explanation:
        body.append(Padding(Text(finding.explanation), (0, 0, 0, 2)))
    where = where_text(finding, lambda site: step_location(site.path, site.line))
    if where:
        body.append(Padding(Text(f"where: {where}", style="dim"), (0, 0, 0, 2)))
    for other in finding.entry_chains()[1:]:
        body.append(Padding(Text(f"also reached ({', '.join(other.found_by)}): {chain_path(finding, other.steps)}"), (0, 0, 0, 2)))
        if other.explanation and other.explanation != finding.explanation:
            body.append(Padding(Text(other.explanation), (0, 0, 0, 4)))
    if finding.disputed:
        for verdict in finding.verdicts:
            proof = f" ({step_location(verdict.path, verdict.line)})" if verdict.path and verdict.line else ""
            body.append(Padding(Text(f"disputed: the model refuted {verdict.candidate}{proof}: {verdict.reason}"), (0, 0, 0, 2)))
    judged = f" · {finding.verdict} by model" if finding.verdict == "confirmed" else ""
    body.append(
        Padding(Text(f"found by {', '.join(finding.found_by)}{judged} · fingerprint {finding.fingerprint}", style="dim"), (0, 0, 0, 2))
    )
    return Group(*body)


def _problems(result: ScanResult) -> list[RenderableType]:
    parts: list[RenderableType] = []
    incomplete = result.incomplete_windows
    if not result.complete:
        parts.append(
            Text(
                f"INCOMPLETE SCAN: {len(incomplete)} of {len(result.windows)} windows did not finish; "
                "missing findings there mean nothing.",
                style="bold red",
            )
        )
        parts += [Padding(Text(window_problem(window), style="red"), (0, 0, 0, 2)) for window in incomplete]
    if result.errors:
        parts.append(Text(f"Errors ({len(result.errors)}):", style="bold red"))
        for error in result.errors:
            parts.append(Padding(Text(f"[{error.kind}] {error_text(error)}", style="red"), (0, 0, 0, 2)))
    return parts


def render_text(result: ScanResult, width: int = DEFAULT_WIDTH) -> str:
    """The terminal report as plain text at ``width`` columns.

    Model answers and repository text reach this report: control characters and bidi
    controls in them are shown as escapes (``\\x1b``, ``\\u202e``), never passed through.
    """
    result = bounded_result(result)
    console = Console(
        file=io.StringIO(),
        width=width,
        force_terminal=False,
        color_system=None,
        highlight=False,
        emoji=False,
        soft_wrap=False,
        legacy_windows=False,
    )
    model = f", model {result.model}" if result.model else ""
    console.print(Text(f"auditor {result.tool_version} — {result.root} (engine {result.engine}{model})", style="bold"))
    for part in _problems(result):
        console.print(part)
    if result.windows or result.rejected:
        run = (
            f"{len(result.rejected)} rejected claims · {len(result.windows)} windows · "
            f"{result.prompt_tokens_sent:,} prompt tokens sent"
        )
    else:
        run = "static analysis only (no model run)"  # model-run counts would all read 0
    console.print(Text(f"{severity_summary(result)} · {run}"))
    coverage = result.coverage
    console.print(
        Text(
            f"Coverage: {len(coverage.full)} files in full, {len(coverage.skeleton)} as skeleton, "
            f"{len(coverage.omitted)} omitted, {len(coverage.not_audited)} not audited"
            + (" — PARTIAL: part of the repository was not audited" if result.partial else "")
        )
    )
    for window in sorted(result.windows, key=lambda window: window.index):
        line = recall_line(window)
        if line is not None:
            console.print(Text(line, style="bold yellow" if window.recall and window.recall.degraded else ""))
    review = result.review
    if review is not None:
        console.print(
            Text(
                f"Review {revision_label(review.base)}..{revision_label(review.head)}: {review.new_count} new, {review.existing_count} existing"
                f"{'' if review.existing_blocking else ' (not blocking)'}{review.contested_note(', ')}, "
                f"{len(result.suppressed)} suppressed; "
                f"{review.outside_diff} {'finding' if review.outside_diff == 1 else 'findings'} outside the change not shown"
            )
        )
        console.print(Text(
            f"Review scope: {_SCOPES.get(review.scope, review.scope)}; "
            f"prompt tokens sent: head {review.head_prompt_tokens:,}, base {review.base_prompt_tokens:,}"
        ))
        unseen = sorted(item.path for item in review.coverage if item.tier == "not packed")
        if unseen:
            console.print(Text(f"Not packed (changed files or their neighbours): {', '.join(unseen)}", style="red"))
    elif result.suppressed:
        console.print(Text(f"{len(result.suppressed)} findings suppressed"))

    by_rule = sorted(result.findings, key=lambda finding: (finding.rule, finding.sort_key()))
    for rule_id, rule_findings in groupby(by_rule, key=attrgetter("rule")):
        rule = result.rule_for(rule_id)
        console.print(Divider(Text(f"{rule_id}" + (f" — {rule.title}" if rule else "")), align="left"))
        ordered = sorted(rule_findings, key=lambda finding: finding.sort_key())
        ordered.sort(key=lambda finding: Severity.rank_of(finding.severity))
        for severity, group in groupby(ordered, key=attrgetter("severity")):
            items = list(group)
            console.print(Text(f"{severity.upper()} ({len(items)})", style="bold"))
            for finding in items:
                reviewed = review.reviewed(finding.fingerprint) if review is not None else None
                console.print(Padding(_finding(finding, reviewed), (0, 0, 0, 2)))

    rejected = result.sorted_rejected()
    if rejected:
        console.print(Divider(Text(f"Rejected model claims ({len(rejected)})"), align="left"))
        for item in rejected:
            sink = item.claim.sink
            where = f"{sink.path}:{sink.line}" if sink.line is not None else sink.path
            console.print(Padding(Text(f"{item.claim.rule} {where} {sink.function}: {item.reason}"), (0, 0, 0, 2)))
    if result.injection_flags:
        console.print(Divider(Text("Repository text that looks like instructions to an AI reviewer"), align="left"))
        for flag in sorted(result.injection_flags, key=lambda flag: (flag.path, flag.line)):
            console.print(Padding(Text(f"{flag.path}:{flag.line}: {flag.text}"), (0, 0, 0, 2)))
    if result.suppressed:
        console.print(Divider(Text(f"Suppressed findings ({len(result.suppressed)})"), align="left"))
        for suppressed in result.sorted_suppressed():
            finding = suppressed.finding
            where = step_location(finding.path, finding.line)
            line = f"{finding.rule} {where} {finding.function}: {suppressed.source} ({suppressed.location}) {suppressed.reason}"
            console.print(Padding(Text(line), (0, 0, 0, 2)))
    if result.warnings:
        console.print(Divider(Text("Warnings"), align="left"))
        for warning in result.warnings:
            console.print(Padding(Text(warning), (0, 0, 0, 2)))
    if result.notices:
        console.print(Divider(Text("Notices"), align="left"))
        for notice in result.notices:
            console.print(Padding(Text(notice), (0, 0, 0, 2)))
    output = console.file
    assert isinstance(output, io.StringIO)
    # Rich pads padded blocks to the full width; trailing spaces only make diffs noisy.
    text = "".join(line.rstrip() + "\n" for line in output.getvalue().splitlines())
    return visible_controls(text)
