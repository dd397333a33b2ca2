"""Markdown report fit for a pull-request comment.

Input: a ``ScanResult`` and an optional link base (e.g. "https://github.com/o/r/blob/SHA/").
Output: Markdown with a summary line, errors and incomplete windows at the top, a coverage
summary, one collapsible ``<details>`` block per finding with its chain as links, then
suppressed findings, rejected claims, flagged repository text, warnings and notices.
Model-written text is HTML-escaped so it cannot inject markup into the comment.

A review result (``result.review`` set) renders as one persistent pull-request comment: it
starts with the hidden marker ``REVIEW_MARKER`` (a workflow finds and updates the comment
carrying it), counts new / existing / suppressed findings, shows the coverage of the
changed files and their call-graph neighbours, and lists new findings before existing ones,
each block linking to the changed line on its chain.
"""

from __future__ import annotations

import html
import re

from auditor.findings.model import ChainStep, Finding
from auditor.report.model import (
    ReviewedFinding,
    ReviewSummary,
    ScanResult,
    bounded_result,
    names_its_window,
    recall_line,
    revision_label,
    severity_summary,
    step_location,
    visible_controls,
    where_text,
    window_problem,
)

REVIEW_MARKER = "<!-- auditor-review -->"
_MAX_LISTED_FILES = 50
_BACKTICK_RUNS = re.compile("`+")


# CommonMark line endings. Model text keeps its lines only inside ``_quoted``; everywhere
# else a line break could start a heading, list or code fence that swallows the report.
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")


def _escape(text: str) -> str:
    """Text for one line of the comment: HTML escaped, line breaks turned into spaces."""
    return html.escape(_LINE_BREAKS.sub(" ", text), quote=False)


def _quoted(text: str) -> list[str]:
    """Multi-line model text as a block quote: an unclosed code fence, a heading or a list in
    it ends with the quote instead of running over the rest of the comment."""
    lines = _LINE_BREAKS.split(html.escape(text.strip("\r\n"), quote=False))
    return [f"> {line}" if line.strip() else ">" for line in lines]


def _code(text: str) -> str:
    """Inline code that survives backticks inside the text."""
    text = _LINE_BREAKS.sub(" ", text)
    longest = max((len(run) for run in _BACKTICK_RUNS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def _link(path: str, line: int, link_base: str) -> str:
    target = f"{link_base}{path}" + (f"#L{line}" if line > 0 else "")
    return f"[{_code(step_location(path, line))}]({target.replace(' ', '%20')})"


def _step_line(index: int, step: ChainStep, link_base: str) -> str:
    role = " (entry point)" if index == 0 else ""
    status = "verified" if step.verified else "**unverified**"
    note = f": {_escape(step.note)}" if step.note else ""
    return f"{index + 1}. {_link(step.path, step.line, link_base)} {_code(step.function)}{role} — {status}{note}"


def _finding_block(finding: Finding, link_base: str, reviewed: ReviewedFinding | None = None) -> list[str]:
    shown = (reviewed.path, reviewed.line, reviewed.function) if reviewed else (finding.path, finding.line, finding.function)
    summary = (
        f"<b>{finding.severity.upper()}</b> {_escape(finding.rule)}: {_escape(finding.title)} — "
        f"<code>{_escape(step_location(shown[0], shown[1]))}</code> in <code>{_escape(shown[2])}</code>"
    )
    if finding.disputed:
        summary += " · <i>disputed</i>"
    lines = ["<details>", f"<summary>{summary}</summary>", ""]
    if reviewed is not None:
        lines.append(
            f"Changed: {_link(reviewed.path, reviewed.line, link_base)} in {_code(reviewed.function)} "
            f"({_escape(reviewed.touched_by)})"
        )
        lines.append("")
    lines.append(f"Sink: {_link(finding.path, finding.line, link_base)} in {_code(finding.function)}")
    lines.append("")
    if finding.explanation:
        lines += [*_quoted(finding.explanation), ""]
    where = where_text(finding, lambda site: _link(site.path, site.line, link_base))
    if where:
        lines += [f"Where: {where}", ""]
    if finding.chain:
        lines.append("Call chain:")
        lines.append("")
        lines += [_step_line(index, step, link_base) for index, step in enumerate(finding.chain)]
        lines.append("")
    for other in finding.entry_chains()[1:]:
        lines += [f"Also reached (found by {', '.join(other.found_by)}):", ""]
        lines += [_step_line(index, step, link_base) for index, step in enumerate(other.steps)]
        lines.append("")
        if other.explanation and other.explanation != finding.explanation:
            lines += [*_quoted(other.explanation), ""]
    if finding.disputed:
        for verdict in finding.verdicts:
            proof = f" ({_link(verdict.path, verdict.line, link_base)})" if verdict.path and verdict.line else ""
            lines += [f"**Disputed**: the model refuted {_code(verdict.candidate)}{proof}: {_escape(verdict.reason)}", ""]
    judged = f" · {finding.verdict} by model" if finding.verdict == "confirmed" else ""
    lines.append(f"Found by: {', '.join(finding.found_by)}{judged} · fingerprint {_code(finding.fingerprint)}")
    lines += ["", "</details>", ""]
    return lines


# GitHub rejects comments over 65,536 characters: the report stays under this, keeping the
# findings most severe first and saying how many were left to the SARIF/JSON reports.
MAX_COMMENT_CHARS = 60_000
# Room kept after the findings for rejected claims, flags, warnings and notices.
TAIL_RESERVE_CHARS = 8_000

def _file_list(title: str, paths: tuple[str, ...]) -> list[str]:
    if not paths:
        return []
    listed = sorted(paths)[:_MAX_LISTED_FILES]
    more = len(paths) - len(listed)
    body = [f"- {_code(path)}" for path in listed] + ([f"- … and {more} more"] if more > 0 else [])
    return [f"<details><summary>{title} ({len(paths)})</summary>", "", *body, "", "</details>", ""]


def _review_headline(review: ReviewSummary, suppressed: int) -> str:
    blocking = " (not blocking)" if not review.existing_blocking else ""
    return f"{review.new_count} new · {review.existing_count} existing{blocking}{review.contested_note(' · ')} · {suppressed} suppressed"


def _review_section(review: ReviewSummary) -> list[str]:
    renamed = f", {len(review.renamed)} renamed" if review.renamed else ""
    deleted = f", {len(review.deleted_files)} deleted" if review.deleted_files else ""
    revisions = f"Base {_code(revision_label(review.base))} → head {_code(revision_label(review.head))}"
    lines = [
        f"{revisions} · {len(review.changed_files)} changed files{renamed}{deleted} · "
        f"{review.outside_diff} {'finding' if review.outside_diff == 1 else 'findings'} elsewhere in the repository "
        "not shown (chains that do not touch the change)",
        "",
    ]
    lines += [_review_cost(review), ""]
    if not review.base_compared:
        lines += ["The base was not scanned: every finding counts as new.", ""]
    if review.coverage:
        changed = [item for item in review.coverage if item.role == "changed"]
        neighbours = [item for item in review.coverage if item.role != "changed"]
        unseen = [item for item in review.coverage if item.tier == "not packed"]
        summary = (
            f"Coverage of the change: {sum(item.tier == 'full' for item in changed)} of {len(changed)} changed files "
            f"and {sum(item.tier == 'full' for item in neighbours)} of {len(neighbours)} callers/callees in full"
            + (f" · {len(unseen)} NOT PACKED" if unseen else "")
        )
        lines += [f"<details><summary>{summary}</summary>", "", "| File | Role | Seen as |", "| --- | --- | --- |"]
        ordered = sorted(review.coverage, key=lambda item: (item.role != "changed", item.path))
        for item in ordered[: _MAX_LISTED_FILES * 2]:
            tier = "**not packed**" if item.tier == "not packed" else item.tier
            lines.append(f"| {_code(item.path)} | {item.role} | {tier} |")
        if len(ordered) > _MAX_LISTED_FILES * 2:
            lines.append(f"| … and {len(ordered) - _MAX_LISTED_FILES * 2} more | | |")
        lines += ["", "</details>", ""]
    return lines


def _review_cost(review: ReviewSummary) -> str:
    what = "the change's subgraph" if review.scope == "diff" else "both trees whole (`--full`)"
    return (
        f"Audited {what} · prompt tokens sent: head {review.head_prompt_tokens:,}, "
        f"base {review.base_prompt_tokens:,}"
    )


def _suppressed_block(result: ScanResult) -> list[str]:
    if not result.suppressed:
        return []
    lines = [f"<details><summary>Suppressed findings ({len(result.suppressed)})</summary>", ""]
    for item in result.sorted_suppressed():
        finding = item.finding
        lines.append(
            f"- {_code(finding.rule)} {_code(step_location(finding.path, finding.line))} {_code(finding.function)}: "
            f"{item.source} ({_code(item.location)}) {_escape(item.reason)}"
        )
    return lines + ["", "</details>", ""]


def render_markdown(result: ScanResult, link_base: str | None = None, marker: str | None = None) -> str:
    """The Markdown report; chain links are ``{link_base}{path}#L{line}`` (relative without a base).

    ``marker`` (default: ``REVIEW_MARKER`` for a review result, none for a scan) is put on
    the first line so a workflow can find and update one persistent comment. Control and
    bidi characters from model or repository text are written as visible escapes.
    """
    result = bounded_result(result)
    base = link_base or ""
    if base and not base.endswith("/"):
        base += "/"  # `…/blob/SHA` names a directory: never glue a path onto the SHA
    review = result.review
    incomplete = result.incomplete_windows
    if review is not None:
        headline = [_review_headline(review, len(result.suppressed))]
    else:
        headline = [severity_summary(result)]
        if result.windows or result.rejected:  # model-run counts mean nothing after a static-only scan
            headline.append(f"{len(result.rejected)} rejected claims")
        if result.suppressed:
            headline.append(f"{len(result.suppressed)} suppressed")
    if incomplete:
        headline.append(f"{len(incomplete)} of {len(result.windows)} windows INCOMPLETE")
    if result.errors:
        headline.append(f"{len(result.errors)} {'error' if len(result.errors) == 1 else 'errors'}")
    title = "auditor review" if review is not None else "auditor"
    lines = [f"## {title}: {' · '.join(headline)}", ""]
    marker = marker if marker is not None else (REVIEW_MARKER if review is not None else None)
    if marker:
        lines.insert(0, marker)

    if not result.complete:
        lines += [
            "> [!CAUTION]",
            "> **INCOMPLETE SCAN** — part of the repository was not fully analysed; the absence of",
            "> a finding there means nothing.",
        ]
        lines += [f"> - {_escape(window_problem(window))}" for window in incomplete]
        lines.append("")
    if result.errors:
        lines.append("**Errors**")
        lines.append("")
        for error in result.errors:
            where = f" (window {error.window})" if error.window is not None and not names_its_window(error) else ""
            lines.append(f"- {_code(error.kind)}{where}: {_escape(error.message)}")
        lines.append("")

    if review is not None:
        lines += _review_section(review)
    coverage = result.coverage
    seen = (
        f"{len(coverage.full)} files in full, {len(coverage.skeleton)} as skeleton, {len(coverage.omitted)} omitted"
        if result.windows else f"{len(coverage.full)} files analysed statically (no model run), {len(coverage.omitted)} left out"
    )
    lines.append(
        f"**Coverage:** {seen} · rules: {', '.join(_code(rule.id) for rule in sorted(result.rules, key=lambda r: r.id))}"
        f" · engine {_code(result.engine)}" + (f" ({_code(result.model)})" if result.model else "")
    )
    lines.append("")
    recall = [line for window in sorted(result.windows, key=lambda w: w.index) if (line := recall_line(window))]
    if recall:
        lines += ["**Recall canaries:**", "", *(f"- {_escape(line)}" for line in recall), ""]
    if result.windows:  # what a model saw: nothing to list after a static-only run
        lines += _file_list("Files in full", coverage.full)
        lines += _file_list("Files as skeleton", coverage.skeleton)
        lines += _file_list("Files omitted", coverage.omitted)

    findings = result.sorted_findings()
    size = sum(len(line) + 1 for line in lines)
    left_out = 0

    def add_block(block: list[str]) -> None:
        nonlocal size, left_out
        block_size = sum(len(line) + 1 for line in block)
        if left_out or size + block_size > MAX_COMMENT_CHARS - TAIL_RESERVE_CHARS:
            left_out += 1
            return
        lines.extend(block)
        size += block_size

    if review is None:
        lines += ["### Findings", ""]
        if not findings:
            lines += ["No findings." if result.complete else "No findings in the parts that were analysed.", ""]
        for finding in findings:
            add_block(_finding_block(finding, base))
    else:
        for status, heading in (("new", "New findings"), ("existing", "Existing findings (also on the base)")):
            group = [(f, r) for f in findings if (r := review.reviewed(f.fingerprint)) is not None and r.status == status]
            if status == "existing" and not group:
                continue
            lines += [f"### {heading} ({len(group)})", ""]
            if not group:
                lines += ["None on the changed code." if result.complete else "None in the parts that were analysed.", ""]
            for finding, reviewed in group:
                add_block(_finding_block(finding, base, reviewed))
    if left_out:
        lines += [
            f"**{left_out} more findings are not shown here** (a PR comment is limited to 65,536 characters); "
            "every finding is in the SARIF and JSON reports.",
            "",
        ]
    lines += _suppressed_block(result)

    rejected = result.sorted_rejected()
    if rejected:
        lines += [f"<details><summary>Rejected model claims ({len(rejected)})</summary>", ""]
        for item in rejected:
            sink = item.claim.sink
            where = f"{sink.path}:{sink.line}" if sink.line is not None else sink.path
            lines.append(f"- {_code(item.claim.rule)} {_code(where)} {_code(sink.function)}: {_escape(item.reason)}")
        lines += ["", "</details>", ""]

    if result.injection_flags:
        lines += ["**Repository text that looks like instructions to an AI reviewer** (ignored; findings are kept):", ""]
        for flag in sorted(result.injection_flags, key=lambda flag: (flag.path, flag.line)):
            lines.append(f"- {_link(flag.path, flag.line, base)}: {_code(flag.text)}")
        lines.append("")

    if result.warnings:
        lines += ["**Warnings**", ""]
        lines += [f"- {_escape(warning)}" for warning in result.warnings]
        lines.append("")

    if result.notices:
        lines += ["**Notices**", ""]
        lines += [f"- {_escape(notice)}" for notice in result.notices]
        lines.append("")

    sent = f"{result.prompt_tokens_sent:,} prompt tokens sent" if result.windows else "static analysis only (no model run)"
    lines.append(f"<sub>auditor {_escape(result.tool_version)} · {sent}</sub>")
    return visible_controls("\n".join(lines) + "\n")
