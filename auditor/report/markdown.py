"""Markdown report fit for a pull-request comment.

Input: a ``ScanResult`` and an optional link base (e.g. "https://github.com/o/r/blob/SHA/").
Output: Markdown with a summary line, errors and incomplete windows at the top, a coverage
summary, one collapsible ``<details>`` block per finding with its chain as links, then
rejected claims, flagged repository text and notices. Model-written text is HTML-escaped
so it cannot inject markup into the comment.
"""

from __future__ import annotations

import html
import re

from auditor.findings import ChainStep, Finding
from auditor.report.model import ScanResult, severity_summary, step_location, window_problem

_MAX_LISTED_FILES = 50
_BACKTICK_RUNS = re.compile("`+")


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _code(text: str) -> str:
    """Inline code that survives backticks inside the text."""
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


def _finding_block(finding: Finding, link_base: str) -> list[str]:
    summary = (
        f"<b>{finding.severity.upper()}</b> {_escape(finding.rule)}: {_escape(finding.title)} — "
        f"<code>{_escape(step_location(finding.path, finding.line))}</code> in <code>{_escape(finding.function)}</code>"
    )
    lines = ["<details>", f"<summary>{summary}</summary>", ""]
    lines.append(f"Sink: {_link(finding.path, finding.line, link_base)} in {_code(finding.function)}")
    lines.append("")
    if finding.explanation:
        lines += [_escape(finding.explanation), ""]
    if finding.chain:
        lines.append("Call chain:")
        lines.append("")
        lines += [_step_line(index, step, link_base) for index, step in enumerate(finding.chain)]
        lines.append("")
    lines.append(f"Found by: {', '.join(finding.found_by)} · fingerprint {_code(finding.fingerprint)}")
    lines += ["", "</details>", ""]
    return lines


def _file_list(title: str, paths: tuple[str, ...]) -> list[str]:
    if not paths:
        return []
    listed = sorted(paths)[:_MAX_LISTED_FILES]
    more = len(paths) - len(listed)
    body = [f"- {_code(path)}" for path in listed] + ([f"- … and {more} more"] if more > 0 else [])
    return [f"<details><summary>{title} ({len(paths)})</summary>", "", *body, "", "</details>", ""]


def render_markdown(result: ScanResult, link_base: str | None = None) -> str:
    """The Markdown report; chain links are ``{link_base}{path}#L{line}`` (relative without a base)."""
    base = link_base or ""
    incomplete = result.incomplete_windows
    headline = [severity_summary(result), f"{len(result.rejected)} rejected claims"]
    if incomplete:
        headline.append(f"{len(incomplete)} of {len(result.windows)} windows INCOMPLETE")
    if result.errors:
        headline.append(f"{len(result.errors)} errors")
    lines = [f"## auditor: {' · '.join(headline)}", ""]

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
            where = f" (window {error.window})" if error.window is not None else ""
            lines.append(f"- {_code(error.kind)}{where}: {_escape(error.message)}")
        lines.append("")

    coverage = result.coverage
    lines.append(
        f"**Coverage:** {len(coverage.full)} files in full, {len(coverage.skeleton)} as skeleton, "
        f"{len(coverage.omitted)} omitted · rules: {', '.join(_code(rule.id) for rule in sorted(result.rules, key=lambda r: r.id))}"
        f" · engine {_code(result.engine)}" + (f" ({_code(result.model)})" if result.model else "")
    )
    lines.append("")
    lines += _file_list("Files in full", coverage.full)
    lines += _file_list("Files as skeleton", coverage.skeleton)
    lines += _file_list("Files omitted", coverage.omitted)

    findings = result.sorted_findings()
    lines += ["### Findings", ""]
    if not findings:
        lines += ["No findings." if result.complete else "No findings in the parts that were analysed.", ""]
    for finding in findings:
        lines += _finding_block(finding, base)

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

    if result.notices:
        lines += ["**Notices**", ""]
        lines += [f"- {_escape(notice)}" for notice in result.notices]
        lines.append("")

    lines.append(f"<sub>auditor {_escape(result.tool_version)} · {result.prompt_tokens_sent:,} prompt tokens sent</sub>")
    return "\n".join(lines) + "\n"
