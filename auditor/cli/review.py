"""The ``auditor review`` command: the pre-merge check of a pull request in CI.

Exit codes: 0 ok; 1 with ``--error`` when there are NEW findings on the change (existing
ones too with ``--all``; disputed and unverified ones only with ``--block-disputed``); 5 when the scan is incomplete; 6 when a window's canary recall
fell below ``--recall-threshold``; others from ``AuditorError``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from auditor.cli.console import notices_only, print_notices, stderr
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
from auditor.cli.scan import LinkBaseOption, SarifCategoryOption, report_options
from auditor.errors import AuditorError

REVIEW_PANEL = "Change under review"


@shared_options(FILES, WINDOW, ENGINE, RECALL, CACHE, OUTPUT)
def review_command(
    path: Annotated[Path, typer.Argument(help="Directory to review, inside a git work tree.")] = Path("."),
    *,
    base: Annotated[str, typer.Option("--base", rich_help_panel=REVIEW_PANEL, help="Base revision (e.g. the PR's merge base).")],
    head: Annotated[Optional[str], typer.Option("--head", rich_help_panel=REVIEW_PANEL, help="Head revision (default: the working tree as checked out).")] = None,
    all_findings: Annotated[bool, typer.Option("--all", rich_help_panel=REVIEW_PANEL, help="Existing findings on the change block too.")] = False,
    compare_base: Annotated[bool, typer.Option("--compare-base/--no-compare-base", rich_help_panel=REVIEW_PANEL, help="Scan the base to tell new findings from existing ones.")] = True,
    full: Annotated[bool, typer.Option("--full", rich_help_panel=REVIEW_PANEL, help="Audit the head and the base whole (two full scans) instead of the change's subgraph.")] = False,
    sarif_category: SarifCategoryOption = None,
    link_base: LinkBaseOption = None,
    error: Annotated[bool, typer.Option("--error", rich_help_panel=OUTPUT_PANEL, help="Exit 1 when there are new findings on the change (disputed and unverified ones aside).")] = False,
    block_disputed: BlockDisputedOption = False,
    flags: ScanFlags,
) -> None:
    """Review a change: findings whose call chain the diff from --base touches, new vs existing."""
    from auditor.cli.options import scan_config
    from auditor.engine.opening import NoModel, choose_engine, open_engine
    from auditor.report import render
    from auditor.runs.review import ReviewConfig, run_review
    from auditor.runs.scan import failed_result, run_scan

    report_format = flags.report_format()
    scan = dataclasses.replace(scan_config(path, flags), block_disputed=block_disputed)
    check_outputs(flags.output, *flags.requested_outputs().values())
    config = ReviewConfig(scan=scan, base=base, head=head, include_existing=all_findings, compare_base=compare_base,
                          full=full)
    # Review reports paths from the repository's top, also for a subdirectory.
    options = report_options(path, flags, link_base, sarif_category=sarif_category, review=True)
    try:
        # One engine for the head and the base scans: a vLLM model loads once.
        choice = choose_engine(scan.engine, scan.engine_settings)
        print_notices(choice.notices)
        engine = open_engine(choice, scan.engine_settings, use_cache=scan.use_cache)
        with notices_only() as report:
            if isinstance(engine, NoModel):
                reviewed = run_review(replace(config, scan=replace(scan, engine=engine.name)), report)
            else:
                reviewed = run_review(config, report, scan=functools.partial(run_scan, engine=engine))
    except AuditorError as failure:
        # The pull request still gets a comment (and code scanning a log) saying why.
        failed = failed_result(scan, failure)
        for extra_format, extra_path in flags.requested_outputs().items():
            write_output(render(failed, extra_format, options), extra_path)
        if flags.output is not None:
            write_output(render(failed, report_format, options), flags.output)
        raise
    result = reviewed.result
    print_notices(result.warnings, label="warning")
    for extra_format, extra_path in flags.requested_outputs().items():
        write_output(render(result, extra_format, options), extra_path)
    write_output(render(result, report_format, options), flags.output)
    exit_for(result, blocking=reviewed.blocking, error=error, console=stderr, what="review")
