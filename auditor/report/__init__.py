"""Report stage: render a ``ScanResult`` as text, JSON, SARIF or Markdown.

Input: a ``ScanResult`` (``auditor.report.model``). Output: the report as a string.
Reporters are registered by format name in ``REPORTERS``; ``render`` picks one.

Importing this package imports none of its submodules (``from auditor.report.model
import ScanResult`` does not load the four reporters); the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Final, Literal

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

    REPORTERS: dict[str, Reporter]

Format = Literal["text", "json", "sarif", "markdown"]
Reporter = Callable[["ScanResult"], str]

# Format name -> (submodule, function); REPORTERS is built from it on first use.
_REPORTER_FUNCTIONS: Final[dict[str, tuple[str, str]]] = {
    "text": ("text", "render_text"),
    "json": ("json_report", "render_json"),
    "sarif": ("sarif", "render_sarif"),
    "markdown": ("markdown", "render_markdown"),
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


def _reporters() -> dict[str, Reporter]:
    """The format registry, built once (every reporter imported) and shared from then on."""
    registry = globals().get("REPORTERS")
    if registry is None:
        registry = {name: __getattr__(function) for name, (_, function) in _REPORTER_FUNCTIONS.items()}
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


def render(result: ScanResult, format: str) -> str:
    """The report in the named format; an unknown name raises UsageError listing the known ones."""
    reporters = _reporters()
    reporter = reporters.get(format)
    if reporter is None:
        known = ", ".join(sorted(reporters))
        raise UsageError(f"unknown report format '{format}'. Known formats: {known}")
    return reporter(result)
