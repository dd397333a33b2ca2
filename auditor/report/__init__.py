"""Report stage: render a ``ScanResult`` as text, JSON, SARIF or Markdown.

Input: a ``ScanResult`` (``auditor.report.model``). Output: the report as a string.
Reporters are registered by format name in ``REPORTERS``; ``render`` picks one.
"""

from __future__ import annotations

from typing import Callable, Final, Literal

from auditor.errors import UsageError
from auditor.report.json_report import render_json
from auditor.report.markdown import render_markdown
from auditor.report.model import Coverage, InjectionFlag, ScanError, ScanResult, WindowOutcome
from auditor.report.sarif import render_sarif
from auditor.report.text import render_text

Format = Literal["text", "json", "sarif", "markdown"]
Reporter = Callable[[ScanResult], str]

REPORTERS: Final[dict[str, Reporter]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "markdown": render_markdown,
}

__all__ = [
    "Coverage",
    "Format",
    "InjectionFlag",
    "REPORTERS",
    "Reporter",
    "ScanError",
    "ScanResult",
    "WindowOutcome",
    "render",
    "render_json",
    "render_markdown",
    "render_sarif",
    "render_text",
]


def render(result: ScanResult, format: str) -> str:
    """The report in the named format; an unknown name raises UsageError listing the known ones."""
    reporter = REPORTERS.get(format)
    if reporter is None:
        known = ", ".join(sorted(REPORTERS))
        raise UsageError(f"unknown report format '{format}'. Known formats: {known}")
    return reporter(result)
