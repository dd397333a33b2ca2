"""The ``auditor scan`` command: audit a repository and write its reports."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from auditor.report import ReportOptions

from auditor.cli.console import print_notices, progress_for, stderr
from auditor.cli.flags import (
    CACHE,
    ENGINE,
    FILES,
    OUTPUT,
    OUTPUT_PANEL,
    RECALL,
    WINDOW,
    ScanFlags,
    shared_options,
)
from auditor.cli.output import BlockDisputedOption, check_outputs, exit_for, write_output
from auditor.errors import AuditorError

LinkBaseOption = Annotated[
    Optional[str],
    typer.Option("--link-base", rich_help_panel=OUTPUT_PANEL,
                 help="Prefix for Markdown links, e.g. https://github.com/o/r/blob/SHA/ (default: from the git remote and commit when it is on GitHub or GitLab; else links are relative)."),
]
SarifCategoryOption = Annotated[
    Optional[str],
    typer.Option("--sarif-category", rich_help_panel=OUTPUT_PANEL, help="SARIF automationDetails.id (GitHub's analysis category)."),
]


def report_options(path: Path, flags: ScanFlags, link_base: str | None, *, sarif_category: str | None = None,
                   review: bool = False, source_prefix: str = "") -> "ReportOptions":
    """The reports' options for a scan (or, with ``review``, a review) of ``path``.

    Paths go from the repository's top, also for a subdirectory (auditor.runs.scope), and so
    do the links; ``source_prefix`` is what SARIF puts before the result's paths when they
    are not (a subdirectory scanned on its own). Without ``--link-base``, the Markdown links
    come from the git remote; when it is not on GitHub or GitLab a notice asks for one.
    """
    from auditor.report import Format, ReportOptions
    from auditor.report.markdown import REVIEW_MARKER
    from auditor.walk.diff import infer_link_base

    if link_base is None:
        link_base = infer_link_base(path, from_top=not source_prefix)
        if link_base is None and Format.MARKDOWN in (flags.report_format(), *flags.requested_outputs()):
            print_notices(["Markdown links are relative: the git remote is not on GitHub or GitLab (or there is none); "
                           "pass --link-base https://HOST/OWNER/REPO/blob/COMMIT/ for links that open"])
    return ReportOptions(link_base=link_base, sarif_category=sarif_category, source_prefix=source_prefix,
                         comment_marker=REVIEW_MARKER if review else None)


@shared_options(FILES, WINDOW, ENGINE, RECALL, CACHE, OUTPUT)
def scan_command(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to audit.")],
    *,
    error: Annotated[bool, typer.Option("--error", rich_help_panel=OUTPUT_PANEL, help="Exit 1 when there are findings (disputed and unverified ones aside).")] = False,
    block_disputed: BlockDisputedOption = False,
    write_baseline: Annotated[Optional[Path], typer.Option("--write-baseline", rich_help_panel=OUTPUT_PANEL, help="Write this scan's findings as a baseline file.")] = None,
    link_base: LinkBaseOption = None,
    sarif_category: SarifCategoryOption = None,
    flags: ScanFlags,
) -> None:
    """Audit a repository for the selected rules (all built-in rules by default)."""
    from auditor.cli.options import scan_config
    from auditor.report import Format, render
    from auditor.runs.scan import failed_result, run_scan
    from auditor.runs.scope import within_repository
    from auditor.storage.atomic import check_writable

    report_format = flags.report_format()
    # A subdirectory is scanned within its repository: callers outside it are seen.
    scoped = within_repository(replace(scan_config(path, flags), block_disputed=block_disputed))
    config = scoped.config
    print_notices([scoped.notice] if scoped.notice else [])
    check_outputs(flags.output, *flags.requested_outputs().values())
    if write_baseline is not None:
        check_writable(write_baseline, create_parents=True)  # the baseline writer makes its directory
    options = report_options(path, flags, link_base, sarif_category=sarif_category, source_prefix=scoped.source_prefix)
    try:
        with progress_for(report_format is Format.TEXT and stderr.is_terminal) as report:
            result = run_scan(config, report)
    except AuditorError as failure:
        # CI uploads the SARIF/JSON even when the scan could not run: write the error there.
        failed = failed_result(config, failure)
        for extra_format, extra_path in flags.requested_outputs().items():
            write_output(render(failed, extra_format, options), extra_path)
        if flags.output is not None:
            write_output(render(failed, report_format, options), flags.output)
        raise
    if write_baseline is not None:
        from auditor.findings.suppress import write_baseline as save_baseline

        kept_by_baseline = [s.finding for s in result.suppressed if s.source == "baseline"]
        written = save_baseline(write_baseline, [*result.findings, *kept_by_baseline])
        stderr.print(f"baseline: {len(written.entries)} finding(s) written to {write_baseline}", highlight=False, markup=False)
    print_notices(result.notices)
    for extra_format, extra_path in flags.requested_outputs().items():
        write_output(render(result, extra_format, options), extra_path)
    write_output(render(result, report_format, options), flags.output)
    exit_for(result, blocking=result.blocking_count, error=error, console=stderr)
