"""Command endings shared by the CLI: where output goes (stdout, or a file written whole
or not at all, with a clean error when it cannot be) and which exit code a scan-like
result earns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from rich.console import Console

    from auditor.report.model import ScanResult


def write_output(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None.

    The file is replaced whole (auditor.storage.atomic): never truncated by a full disk
    (exit 2, the previous file kept), never written through a link at ``output``. An
    unwritable path is a UsageError naming it (exit 64), never a traceback.
    """
    from auditor.storage.atomic import write_atomically

    if output is None:
        sys.stdout.write(text)
        return
    write_atomically(output, text)


def check_outputs(*outputs: Path | None) -> None:
    """Fail now, before any work, when one of the output files could not be written."""
    from auditor.storage.atomic import check_writable

    for output in outputs:
        if output is not None:
            check_writable(output)


def exit_for(result: "ScanResult", *, blocking: int, error: bool, console: "Console", what: str = "scan") -> None:
    """End a scan-like command with the documented exit code, saying why on ``console``.

    Incomplete (5) comes first — unread code must never pass as clean — then recall
    degraded (6); with ``--error``, partial coverage (files not audited, windows capped,
    nothing selected) is incomplete too (5), then findings (1). Returns normally for exit 0.
    """
    import typer

    from auditor.errors import ExitCode

    if not result.complete:
        console.print(f"[bold red]{what} incomplete:[/] some windows were not fully answered; see the report", highlight=False)
        raise typer.Exit(int(ExitCode.INCOMPLETE))
    if result.recall_degraded:
        console.print("[bold yellow]recall degraded:[/] the model missed canaries planted in the window; see the report",
                      highlight=False)
        raise typer.Exit(int(ExitCode.RECALL_DEGRADED))
    if result.partial:
        console.print(f"[bold yellow]{what} coverage partial:[/] part of the repository or a rule was not audited; see the report",
                      highlight=False)
        if error:
            raise typer.Exit(int(ExitCode.INCOMPLETE))
    if error and blocking:
        raise typer.Exit(int(ExitCode.FINDINGS))
