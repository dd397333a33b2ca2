"""The ``auditor pack`` command: the scan's own planning step (``plan_windows``), shown — the
exact-token windows ``auditor scan`` would send and what went where
(``--format text|json|prompt``)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from auditor.cli.console import print_notices, progress_for, stderr
from auditor.cli.flags import (
    CACHE,
    ENGINE,
    FILES,
    OUTPUT_PANEL,
    RECALL,
    WINDOW,
    ScanFlags,
    shared_option_names,
    shared_options,
)
from auditor.cli.output import check_outputs, write_output
from auditor.errors import UsageError

if TYPE_CHECKING:
    from auditor.runs.prepare import WindowPlan


def render_rich(renderable: object, width: int | None) -> str:
    """Render a rich object to text: for the terminal at its width, for a file at a fixed width."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width or Console().width, force_terminal=width is None and sys.stdout.isatty())
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


# Besides the files and the window, what changes the windows a scan sends: whether the
# static candidates are listed (--static) and the recall canaries (--probes, --seed).
_SCAN_ONLY = tuple(name for name in shared_option_names(ENGINE, RECALL) if name not in ("static", "probes", "seed"))


@shared_options(FILES, WINDOW, ENGINE, RECALL, CACHE, exclude=_SCAN_ONLY)
def pack_command(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to pack.")],
    *,
    format: Annotated[str, typer.Option("--format", "-f", rich_help_panel=OUTPUT_PANEL, help="text | json | prompt")] = "text",
    window: Annotated[int, typer.Option("--window", "-w", min=0, rich_help_panel=OUTPUT_PANEL, help="Window shown by --format prompt.")] = 0,
    output: Annotated[Path | None, typer.Option("--output", "-o", rich_help_panel=OUTPUT_PANEL, help="Write to this file instead of stdout.")] = None,
    flags: ScanFlags,
) -> None:
    """Plan a scan's windows and report what went where: exactly what `auditor scan` with the
    same options sends the model (all built-in rules by default), token for token."""
    from auditor.cli.options import scan_config
    from auditor.runs.pack_memo import PackMemo, memoized_pack
    from auditor.runs.scope import within_repository
    from auditor.tokens.tokenizer import load_tokenizer, with_count_cache

    if format not in ("text", "json", "prompt"):
        raise UsageError(f"--format must be text, json or prompt, not {format!r}")
    scoped = within_repository(scan_config(path, flags))  # as `auditor scan PATH` plans it
    config = scoped.config
    print_notices([scoped.notice] if scoped.notice else [])
    check_outputs(output)
    width = None if output is None else 120

    def render(plan: WindowPlan) -> str:
        # Imported here: a memoized pack renders nothing.
        from auditor.report.manifest import manifest_json, pack_tables

        sent, walked = plan.sent, plan.inputs.repository.walk
        if format == "json":
            return manifest_json(sent, walked)
        if format == "prompt":
            if window >= len(sent.windows):
                raise UsageError(f"--window {window}: the pack has {len(sent.windows)} window(s)")
            return sent.windows[window].prompt
        return render_rich(pack_tables(sent, walked), width=width)

    # Tables for the terminal follow its width and colours: those are not remembered.
    memo = PackMemo() if config.use_cache and (format != "text" or width is not None) else None
    with progress_for(format != "json" and stderr.is_terminal) as report:
        loaded = load_tokenizer(config.tokenizer_request)
        if config.use_cache:
            loaded = with_count_cache(loaded, scope=config.scope)
        packed = memoized_pack(
            config, loaded, render, variant=repr((format, window if format == "prompt" else None, width)),
            memo=memo, progress=report,
        )
    print_notices(packed.notices, label="warning")
    write_output(packed.text, output)
