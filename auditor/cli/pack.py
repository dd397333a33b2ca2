"""The ``auditor pack`` command: pack a repository into exact-token windows and show what
went where (``--format text|json|prompt``)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from auditor.cli.console import print_notices, progress_for, stderr
from auditor.cli.flags import CACHE, FILES, OUTPUT_PANEL, WINDOW, ScanFlags, shared_options
from auditor.cli.output import check_outputs, write_output
from auditor.errors import UsageError


def render_rich(renderable: object, width: int | None) -> str:
    """Render a rich object to text: for the terminal at its width, for a file at a fixed width."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width or Console().width, force_terminal=width is None and sys.stdout.isatty())
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


@shared_options(FILES, WINDOW, CACHE, exclude=("static", "min_severity"))
def pack_command(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to pack.")],
    *,
    format: Annotated[str, typer.Option("--format", "-f", rich_help_panel=OUTPUT_PANEL, help="text | json | prompt")] = "text",
    window: Annotated[int, typer.Option("--window", "-w", min=0, rich_help_panel=OUTPUT_PANEL, help="Window shown by --format prompt.")] = 0,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", rich_help_panel=OUTPUT_PANEL, help="Write to this file instead of stdout.")] = None,
    flags: ScanFlags,
) -> None:
    """Pack a repository into exact-token windows for the model and report what went where."""
    from auditor.cli.options import scan_config
    from auditor.report.manifest import manifest_json, pack_tables
    from auditor.rules.loader import load_rules
    from auditor.runs.prepare import pack_prepared, prepare_repository
    from auditor.tokens.tokenizer import load_tokenizer, with_count_cache

    if format not in ("text", "json", "prompt"):
        raise UsageError(f"--format must be text, json or prompt, not {format!r}")
    config = scan_config(path, flags)
    check_outputs(output)
    rules = load_rules(config.rules)
    with progress_for(format != "json" and stderr.is_terminal) as report:
        loaded = load_tokenizer(config.tokenizer_request)
        if not loaded.info.exact:
            print_notices([loaded.info.describe()], label="warning")
        if config.use_cache:
            loaded = with_count_cache(loaded, scope=config.scope)
        prepared = prepare_repository(path, config.walk, use_cache=config.use_cache, progress=report, on_change=loaded.preload,
                                      parse_budget_s=config.parse_budget_s)
        result = pack_prepared(prepared, rules=rules, tokenizer=loaded, options=config.pack, progress=report)
    if format == "json":
        write_output(manifest_json(result, prepared.walk), output)
    elif format == "prompt":
        if window >= len(result.windows):
            raise UsageError(f"--window {window}: the pack has {len(result.windows)} window(s)")
        write_output(result.windows[window].prompt, output)
    else:
        write_output(render_rich(pack_tables(result, prepared.walk), width=None if output is None else 120), output)
