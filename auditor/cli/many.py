"""The ``auditor scan-many`` command: many repositories in one resumable run.

Builds a ``ManyConfig`` (a ``ScanConfig`` template plus the run's own options), runs it
with a rich progress display on stderr (run notices such as "ray is not installed" are
printed even when stderr is not a terminal), prints the summary table and exits 5 when a
repository failed or is incomplete (1 with ``--error`` when there are findings that block:
disputed and unverified ones only with ``--block-disputed``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from auditor.cli.console import progress_for, stderr
from auditor.cli.flags import CACHE, ENGINE, FILES, OUTPUT_PANEL, WINDOW, ScanFlags, shared_options
from auditor.cli.output import BlockDisputedOption, end_with
from auditor.errors import Shortfall, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from auditor.runs.many.outcomes import ManyResult

BACKENDS = ("auto", "ray", "sequential")
RUN_PANEL = "Run"


@shared_options(FILES, WINDOW, ENGINE, CACHE)
def scan_many_command(
    *,
    targets: Annotated[Path, typer.Argument(help="File of local paths or git URLs (url@rev or url#rev), one per line; or a directory of repositories.")],
    out: Annotated[Path, typer.Option("--out", "-o", rich_help_panel=OUTPUT_PANEL, help="Run directory: reports, index, state (re-run to resume).")] = Path("auditor-runs"),
    endpoint: Annotated[list[str], typer.Option("--endpoint", rich_help_panel=RUN_PANEL, help="A `vllm serve` base URL for --engine openai (repeatable).")] = [],
    ray_address: Annotated[str | None, typer.Option("--ray-address", rich_help_panel=RUN_PANEL, help="auto | ray://host:10001 (default: a local Ray instance).")] = None,
    backend: Annotated[str, typer.Option("--backend", rich_help_panel=RUN_PANEL, help="auto (Ray when installed) | ray | sequential.")] = "auto",
    workers: Annotated[int, typer.Option("--workers", min=1, rich_help_panel=RUN_PANEL, help="Generation actors (one engine each).")] = 1,
    gpus_per_worker: Annotated[float | None, typer.Option("--gpus-per-worker", min=0.0, rich_help_panel=RUN_PANEL, help="GPUs per actor (default: tensor-parallel size for vllm).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, rich_help_panel=RUN_PANEL, help="Windows per engine call.")] = 8,
    target_timeout: Annotated[float, typer.Option("--target-timeout", min=0.0, rich_help_panel=RUN_PANEL, help="Seconds one repository may take to check out, index and pack before it is failed and stopped (0: no limit; the sequential backend).")] = 1800.0,
    error: Annotated[bool, typer.Option("--error", rich_help_panel=OUTPUT_PANEL, help="Exit 1 when there are findings (disputed and unverified ones aside).")] = False,
    block_disputed: BlockDisputedOption = False,
    flags: ScanFlags,
) -> None:
    """Audit many repositories in one resumable run, on Ray when it is installed.

    Replay recordings (--replay) name their windows <repo>/window-<i>.
    """
    from rich.console import Console

    from auditor.cli.options import scan_config
    from auditor.progress import ProgressEvent
    from auditor.runs.many.runner import run_many
    from auditor.runs.many.stages import ManyConfig

    if backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    # The per-repository scan is ``auditor scan``'s, root set per repository.
    template = replace(scan_config(Path("."), flags), block_disputed=block_disputed)
    endpoints = tuple(endpoint) + ((flags.base_url,) if flags.base_url and flags.base_url not in endpoint else ())
    config = ManyConfig(
        targets=targets, out=out, scan=template, endpoints=endpoints, batch_size=batch_size,
        backend=backend,  # type: ignore[arg-type]  # checked against BACKENDS above
        ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker, target_timeout_s=target_timeout,
    )
    with progress_for(stderr.is_terminal) as report:

        def show(event: ProgressEvent) -> None:
            report(event)
            if event.stage == "scan-many" and event.message and not stderr.is_terminal:
                stderr.print(f"notice: {event.message}", highlight=False, markup=False)

        result = run_many(config, show)
    Console().print(summary_table(result))
    messages = {
        Shortfall.INCOMPLETE: f"[bold red]{result.failures} repositories failed or are incomplete:[/] see {out / 'index.md'}",
        Shortfall.RECALL_DEGRADED: f"[bold yellow]{result.recall_degraded} repositories are recall-degraded:[/] see {out / 'index.md'}",
        Shortfall.PARTIAL: f"[bold yellow]{result.partial} repositories were audited in part:[/] see {out / 'index.md'}",
    }
    # As in `auditor scan`: a disputed or unverified finding blocks only with --block-disputed.
    end_with(result.shortfall, messages, blocking=any(outcome.blocking for outcome in result.repositories),
             error=error, console=stderr)


def summary_table(result: ManyResult) -> Table:
    """The run as a rich table: one row per repository, the totals in the caption."""
    from rich.table import Table

    table = Table(title=f"scan-many ({result.backend}, engine {result.engine})", caption=result.summary())
    for column in ("repository", "status", "windows", "findings", "prompt tokens", "completion tokens", "error"):
        table.add_column(column, overflow="fold")
    for outcome in result.repositories:
        table.add_row(outcome.key, outcome.status, str(outcome.windows), str(outcome.findings),
                      f"{outcome.prompt_tokens:,}", f"{outcome.completion_tokens:,}", outcome.error or "")
    return table
