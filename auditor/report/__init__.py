"""Report stage: render a ``ScanResult`` as text, JSON, SARIF or Markdown.

Input: a ``ScanResult`` (``auditor.report.model``). Output: the report as a string.
Reporters are registered by ``Format`` in ``REPORTERS``; ``render`` picks one and hands it
the ``ReportOptions`` (Markdown link base, SARIF category) each format reads what it needs from.

Importing this package imports none of its submodules (``from auditor.report.model
import ScanResult`` does not load the four reporters); the names below load on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable, Final

from auditor.errors import UsageError

if TYPE_CHECKING:
    from auditor.report.json_report import render_json
    from auditor.report.markdown import render_markdown
    from auditor.report.model import (
        Coverage,
        InjectionFlag,
        ScanError,
        ScanResult,
        WindowOutcome,
    )
    from auditor.report.sarif import render_sarif
    from auditor.report.text import render_text

    REPORTERS: dict[Format, Reporter]


class Format(StrEnum):
    """The report formats, in the order the command line lists them."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    MARKDOWN = "markdown"


@dataclass(frozen=True)
class ReportOptions:
    """What a report may be asked beyond the result: ``link_base`` prefixes Markdown links
    (e.g. https://github.com/o/r/blob/SHA/), ``sarif_category`` is SARIF's
    ``automationDetails.id`` (GitHub's analysis category)."""

    link_base: str | None = None
    sarif_category: str | None = None
    comment_marker: str | None = None  # the Markdown report's first line (default: a review's marker)
    source_prefix: str = ""  # the scanned directory's path from the repository's top ("" or ending in "/")


Reporter = Callable[["ScanResult", ReportOptions], str]

# Format -> (submodule, function); REPORTERS is built from it on first use.
_REPORTER_FUNCTIONS: Final[dict[Format, tuple[str, str]]] = {
    Format.TEXT: ("text", "render_text"),
    Format.JSON: ("json_report", "render_json"),
    Format.SARIF: ("sarif", "render_sarif"),
    Format.MARKDOWN: ("markdown", "render_markdown"),
}
_SUBMODULE_OF: Final[dict[str, str]] = {
    **{function: submodule for submodule, function in _REPORTER_FUNCTIONS.values()},
    **dict.fromkeys(("Coverage", "InjectionFlag", "ScanError", "ScanResult", "WindowOutcome"), "model"),
}

__all__ = [
    "Coverage",
    "Format",
    "InjectionFlag",
    "REPORTERS",
    "ReportOptions",
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


def _reporters() -> dict[Format, Reporter]:
    """The format registry, built once (every reporter imported) and shared from then on."""
    registry = globals().get("REPORTERS")
    if registry is None:
        text, json_report, sarif, markdown = (__getattr__(function) for _, function in _REPORTER_FUNCTIONS.values())
        registry: dict[Format, Reporter] = {
            Format.TEXT: lambda result, options: text(result),
            Format.JSON: lambda result, options: json_report(result),
            Format.SARIF: lambda result, options: sarif(result, options.sarif_category, options.source_prefix),
            Format.MARKDOWN: lambda result, options: markdown(result, options.link_base, options.comment_marker),
        }
        globals()["REPORTERS"] = registry
    return registry


def __getattr__(name: str) -> Any:
    """``REPORTERS`` or a public name from the submodule that defines it, imported on first use."""
    if name == "REPORTERS":
        return _reporters()
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def render(result: ScanResult, format: Format | str, options: ReportOptions = ReportOptions()) -> str:
    """The report in ``format`` (a ``Format`` or its name); an unknown name raises UsageError
    listing the known ones."""
    reporters = _reporters()
    reporter = reporters.get(format)
    if reporter is None:
        known = ", ".join(sorted(reporters))
        raise UsageError(f"unknown report format '{format}'. Known formats: {known}")
    return reporter(result, options)
