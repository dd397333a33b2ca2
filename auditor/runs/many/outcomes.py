"""Scan-many outcomes: one ``RepositoryOutcome`` per target, the run's ``ManyResult``, the
per-repository report files and the run index (``index.json``, ``index.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from auditor.errors import Shortfall, worst_shortfall
from auditor.report import Format, render
from auditor.report.model import ScanResult
from auditor.runs.many.targets import Target
from auditor.storage.atomic import write_atomically

# A repository's status besides its shortfall (``auditor.errors.Shortfall``).
OK = "ok"
FAILED = "failed"

REPORT_FILES: dict[Format, str] = {Format.JSON: "report.json", Format.SARIF: "report.sarif", Format.MARKDOWN: "report.md"}


@dataclass(frozen=True)
class RepositoryOutcome:
    """One repository's line in the index.

    ``status`` is "ok" (every window answered, everything audited), "incomplete" (some
    window failed or was cut off; see its reports), "recall-degraded" (a window's canaries
    were missed), "partial" (part of the repository or a rule was not audited) or "failed"
    (no report: ``error`` says why).
    """

    key: str
    source: str
    revision: str | None
    commit: str | None
    status: str
    error: str | None = None
    windows: int = 0
    windows_reused: int = 0
    findings: int = 0
    blocking: int = 0  # findings that fail --error: disputed and unverified ones only with --block-disputed
    severities: tuple[tuple[str, int], ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reports: tuple[str, ...] = ()


@dataclass(frozen=True)
class ManyResult:
    """What a scan-many run did, over every repository (sorted by key)."""

    out: Path
    backend: str
    engine: str
    repositories: tuple[RepositoryOutcome, ...]
    windows_generated: int
    notices: tuple[str, ...] = ()

    @property
    def windows(self) -> int:
        """Windows over all repositories, generated now or reused from the state."""
        return sum(outcome.windows for outcome in self.repositories)

    @property
    def windows_reused(self) -> int:
        """Windows answered from the run state (done in an earlier run)."""
        return sum(outcome.windows_reused for outcome in self.repositories)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all repositories' windows."""
        return sum(outcome.prompt_tokens for outcome in self.repositories)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens over all repositories' windows."""
        return sum(outcome.completion_tokens for outcome in self.repositories)

    @property
    def failures(self) -> int:
        """Repositories that failed or are incomplete."""
        return sum(outcome.status in (FAILED, Shortfall.INCOMPLETE) for outcome in self.repositories)

    @property
    def recall_degraded(self) -> int:
        """Repositories with a window whose canary recall fell below the threshold."""
        return sum(outcome.status == Shortfall.RECALL_DEGRADED for outcome in self.repositories)

    @property
    def partial(self) -> int:
        """Repositories audited only in part (files, windows or rules left out)."""
        return sum(outcome.status == Shortfall.PARTIAL for outcome in self.repositories)

    @property
    def shortfall(self) -> Shortfall | None:
        """What keeps the run from a clean pass (the worst over its repositories), or None."""
        return worst_shortfall(incomplete=bool(self.failures), recall_degraded=bool(self.recall_degraded), partial=bool(self.partial))

    def summary(self) -> str:
        """One line: repositories, windows, tokens, failures."""
        return (
            f"{len(self.repositories)} repositories, {self.windows} windows "
            f"({self.windows_generated} generated, {self.windows_reused} reused), "
            f"{self.prompt_tokens:,} prompt tokens, {self.completion_tokens:,} completion tokens, "
            f"{self.failures} failed or incomplete, {self.recall_degraded} recall-degraded, {self.partial} partial"
        )


def _status(result: ScanResult) -> str:
    """A repository's status: its worst shortfall (the order scan's exit codes take), else "ok"."""
    shortfall = result.shortfall
    return OK if shortfall is None else shortfall.value


def render_reports(result: ScanResult, formats: Iterable[Format]) -> dict[str, str]:
    """The repository's reports, file name -> text, for each requested format."""
    return {REPORT_FILES[fmt]: render(result, fmt) for fmt in sorted(formats)}


def succeeded_outcome(target: Target, commit: str | None, result: ScanResult, reused: int, reports: Iterable[str]) -> RepositoryOutcome:
    """The index line of a repository that was scanned (complete or not)."""
    return RepositoryOutcome(
        key=target.key,
        source=target.source,
        revision=target.revision,
        commit=commit,
        status=_status(result),
        error=None if _status(result) == OK else "; ".join(e.message for e in result.errors) or "incomplete windows",
        windows=len(result.windows),
        windows_reused=reused,
        findings=len(result.findings),
        blocking=result.blocking_count,
        severities=result.severity_counts(),
        prompt_tokens=result.prompt_tokens_sent,
        completion_tokens=sum(window.completion_tokens for window in result.windows),
        reports=tuple(sorted(f"repos/{target.key}/{name}" for name in reports)),
    )


def failed_outcome(target: Target, error: str) -> RepositoryOutcome:
    """The index line of a repository that could not be scanned."""
    return RepositoryOutcome(key=target.key, source=target.source, revision=target.revision, commit=None,
                             status=FAILED, error=error)


def write_reports(out: Path, key: str, reports: Mapping[str, str]) -> None:
    """Write one repository's reports under ``out/repos/<key>/``."""
    directory = out / "repos" / key
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(reports.items()):
        write_atomically(directory / name, text)


def index_json(result: ManyResult) -> str:
    """The run's index as JSON: sorted keys, repositories by key, no times."""
    document = {
        "engine": result.engine,
        "repositories": [
            {**asdict(outcome), "severities": dict(outcome.severities), "reports": list(outcome.reports)}
            for outcome in result.repositories
        ],
        "totals": {
            "repositories": len(result.repositories),
            "windows": result.windows,
            "windows_reused": result.windows_reused,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "failures": result.failures,
        },
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_markdown(result: ManyResult) -> str:
    """The run's index as a Markdown summary table, one row per repository."""
    lines = [
        "# auditor scan-many",
        "",
        f"Engine: {result.engine}. {_cell(result.summary())}.",
        "",
        "| repository | status | windows | findings | severities | prompt tokens | completion tokens | report | error |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for outcome in result.repositories:
        severities = ", ".join(f"{count} {severity}" for severity, count in outcome.severities) or "-"
        report = next((path for path in outcome.reports if path.endswith(".md")), "")
        link = f"[{outcome.key}]({report})" if report else "-"
        lines.append(
            f"| {_cell(outcome.key)} | {outcome.status} | {outcome.windows} | {outcome.findings} | {severities} | "
            f"{outcome.prompt_tokens:,} | {outcome.completion_tokens:,} | {link} | {_cell(outcome.error or '')} |"
        )
    return "\n".join(lines) + "\n"


def write_index(result: ManyResult) -> None:
    """Write ``index.json`` and ``index.md`` into the run directory."""
    result.out.mkdir(parents=True, exist_ok=True)
    write_atomically(result.out / "index.json", index_json(result))
    write_atomically(result.out / "index.md", index_markdown(result))
