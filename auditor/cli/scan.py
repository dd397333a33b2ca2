"""The ``auditor scan`` command: audit a repository and write its reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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
from auditor.cli.output import check_outputs, exit_for, write_output
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


@shared_options(FILES, WINDOW, ENGINE, RECALL, CACHE, OUTPUT)
def scan_command(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to audit.")],
    *,
    error: Annotated[bool, typer.Option("--error", rich_help_panel=OUTPUT_PANEL, help="Exit 1 when there are findings.")] = False,
    write_baseline: Annotated[Optional[Path], typer.Option("--write-baseline", rich_help_panel=OUTPUT_PANEL, help="Write this scan's findings as a baseline file.")] = None,
    link_base: LinkBaseOption = None,
    sarif_category: SarifCategoryOption = None,
    flags: ScanFlags,
) -> None:
    """Audit a repository for the selected rules (all built-in rules by default)."""
    from auditor.cli.options import scan_config
    from auditor.report import Format, ReportOptions, render
    from auditor.walk.diff import infer_link_base
    from auditor.runs.scan import failed_result, run_scan

    report_format = flags.report_format()
    config = scan_config(path, flags)
    check_outputs(flags.output, *flags.requested_outputs().values(), write_baseline)
    options = ReportOptions(link_base=link_base if link_base is not None else infer_link_base(path),
                            sarif_category=sarif_category)
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
    exit_for(result, blocking=len(result.findings), error=error, console=stderr)
