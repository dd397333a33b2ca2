"""Command endings shared by the CLI: where output goes (stdout, or a file written whole
or not at all, with a clean error when it cannot be), how a scan-like result ends the
command (its shortfall said on the console, its exit code from ``auditor.errors.exit_code``),
and the text-or-JSON choice and label/value tables that ``plan`` and ``doctor`` print."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from auditor.cli.flags import OUTPUT_PANEL
from auditor.errors import Shortfall, exit_code

BlockDisputedOption = Annotated[
    bool,
    typer.Option("--block-disputed", rich_help_panel=OUTPUT_PANEL,
                 help="Disputed findings (the model refuted them) and unverified ones (no chain step confirmed) fail --error too."),
]


if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

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


def end_with(
    shortfall: Shortfall | None, messages: Mapping[Shortfall, str], *, blocking: bool, error: bool, console: "Console"
) -> None:
    """End a command with ``exit_code(shortfall, ...)``, first printing the shortfall's
    message (why) on ``console``. Returns normally for exit 0."""
    import typer

    if shortfall is not None:
        console.print(messages[shortfall], highlight=False)
    code = exit_code(shortfall, blocking=blocking, error=error)
    if code:
        raise typer.Exit(int(code))


def exit_for(result: "ScanResult", *, blocking: int, error: bool, console: "Console", what: str = "scan") -> None:
    """End a scan-like command with the documented exit code (``auditor.errors.exit_code``),
    saying why on ``console``; ``blocking`` counts the findings that fail it under ``--error``."""
    messages = {
        Shortfall.INCOMPLETE: f"[bold red]{what} incomplete:[/] some windows were not fully answered; see the report",
        Shortfall.RECALL_DEGRADED: "[bold yellow]recall degraded:[/] the model missed canaries planted in the window; see the report",
        Shortfall.PARTIAL: f"[bold yellow]{what} coverage partial:[/] part of the repository or a rule was not audited; see the report",
    }
    end_with(result.shortfall, messages, blocking=bool(blocking), error=error, console=console)


class OutputFormat(StrEnum):
    """How plan and doctor print their result."""

    TEXT = "text"
    JSON = "json"


def gib(value: int | None) -> str:
    """A byte count in GiB, two decimals ("unknown" for None)."""
    from auditor.planning.plan import GIB

    return "unknown" if value is None else f"{value / GIB:,.2f} GiB"


def key_value_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    """A headerless two-column rich table: bold labels, their values (both escaped)."""
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(escape(label), escape(str(value)))
    return table
