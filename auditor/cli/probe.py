"""The `auditor probe` command: a typer shell over auditor.recall.grid that runs the
canary-recall grid against an engine and writes cells.jsonl, summary.json and the plots.

Registered by auditor/cli.py as ``app.command("probe")(_exit_on_error(probe_command))``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from auditor import defaults
from auditor.cli.console import print_notices, progress_for, stderr
from auditor.cli.flags import ENGINE, OUTPUT_PANEL, RECALL, WINDOW_PANEL, ScanFlags, shared_options
from auditor.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from auditor.recall.grid import GridResult

GRID_PANEL = "Grid"


@shared_options(ENGINE, RECALL, exclude=("static", "seed", "probes"))
def probe_command(
    *,
    lengths: Annotated[str, typer.Option("--lengths", rich_help_panel=GRID_PANEL, help="Context lengths in tokens, comma-separated; 8K = 8192.")] = defaults.PROBE_LENGTHS,
    depths: Annotated[str, typer.Option("--depths", rich_help_panel=GRID_PANEL, help="Needle depths in percent, comma-separated.")] = defaults.PROBE_DEPTHS,
    needles_per_cell: Annotated[int, typer.Option("--needles-per-cell", min=1, max=12, rich_help_panel=GRID_PANEL, help="Needles (and questions) per request.")] = defaults.PROBE_CANARIES_PER_CELL,
    haystack: Annotated[
        list[Path] | None,
        typer.Option("--haystack", rich_help_panel=GRID_PANEL, help="Repository to use as haystack (repeatable; default: bundled fixture + auditor's own files)."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", rich_help_panel=WINDOW_PANEL, help="Checkpoint directory or Hugging Face id (local cache).")] = None,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", rich_help_panel=WINDOW_PANEL, help="Tokenizer directory (tokenizer.json + chat template).")] = None,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=16, rich_help_panel=WINDOW_PANEL, help="Tokens reserved for each answer.")] = defaults.PROBE_OUTPUT_TOKENS,
    thinking: Annotated[bool, typer.Option("--thinking/--no-thinking", rich_help_panel=WINDOW_PANEL, help="Let the model reason before answering.")] = False,
    seed: Annotated[int, typer.Option("--seed", rich_help_panel=GRID_PANEL, help="Seed for needle names and values.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", rich_help_panel=OUTPUT_PANEL, help="Directory for cells.jsonl, summary.json and the PNGs.")] = Path("probe-results"),
    flags: ScanFlags,
) -> None:
    """Measure needle recall by depth and context length (a NIAH-style grid on real code).

    Exits 6 (recall degraded), as a scan does, when recall at the shortest length is below
    --recall-threshold: the engine does not find what it was shown."""
    from dataclasses import replace

    from rich.console import Console

    from auditor.cli.options import engine_settings
    from auditor.engine.opening import choose_engine, open_engine
    from auditor.recall.grid import (
        GridOptions,
        default_haystack_sources,
        load_haystack,
        parse_depths,
        parse_lengths,
        require_matplotlib,
        run_grid,
        write_outputs,
    )
    from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer

    require_matplotlib()
    options = GridOptions(
        lengths=parse_lengths(lengths),
        depths=parse_depths(depths),
        canaries_per_cell=needles_per_cell,
        output_tokens=output_tokens,
        thinking=thinking,
        seed=seed,
    )
    settings = engine_settings(replace(flags, model=model), max_model_len=max(options.lengths))
    choice = choose_engine(flags.engine, settings)
    print_notices(choice.notices)
    if not choice.runs_model:
        raise UsageError("auditor probe needs a model: pass --engine vllm, --engine openai --base-url URL, or --engine replay")
    # Canary recall is measured fresh: answers are never read from the result cache.
    engine = open_engine(choice, settings, use_cache=False)
    sources = tuple(haystack or ()) or default_haystack_sources()
    loaded = load_tokenizer(TokenizerRequest(tokenizer=tokenizer, model=model))
    if not loaded.info.exact:
        stderr.print(f"[yellow]warning:[/] {escape(loaded.info.describe())}: cell lengths are approximate", highlight=False)
    from auditor.storage.atomic import check_writable

    check_writable(out / "summary.json", create_parents=True)  # before the grid's GPU time, not after
    with progress_for(stderr.is_terminal) as report:
        files = load_haystack(sources, report)
        result = run_grid(
            files, tokenizer=loaded, engine=engine, options=options,
            haystack=tuple(str(source) for source in sources), progress=report,
        )
    written = write_outputs(result, out)
    render_grid(result, options.keep)
    Console().print("wrote " + ", ".join(str(path) for path in written), highlight=False)
    shortest = result.by_length[0].recall.recall if result.by_length else None
    if shortest is None or shortest < flags.recall_threshold:
        measured = "no answer" if shortest is None else f"{shortest:.2f}"
        stderr.print(
            f"[bold yellow]recall degraded:[/] {measured} at the shortest length, below --recall-threshold "
            f"{flags.recall_threshold:.2f}", highlight=False,
        )
        raise typer.Exit(int(ExitCode.RECALL_DEGRADED))


def render_grid(result: GridResult, keep: float) -> None:
    """The recall table by context length and the effective length, on stdout."""
    from rich.console import Console
    from rich.table import Table

    from auditor.recall.grid import length_label

    table = Table(title="Needle recall by context length")
    for column in ("length", "prompt tokens", "correct", "abstained", "wrong", "recall", "95% interval"):
        table.add_column(column)
    for entry in result.by_length:
        recall = entry.recall
        table.add_row(
            length_label(entry.length), f"{entry.mean_prompt_tokens:,.0f}", str(recall.correct), str(recall.abstained),
            str(recall.wrong), "-" if recall.recall is None else f"{recall.recall:.2f}",
            f"{entry.interval[0]:.2f}-{entry.interval[1]:.2f}",
        )
    console = Console()
    console.print(table)
    effective = "none (no recall at the shortest length)" if result.effective_length is None else length_label(result.effective_length)
    console.print(f"effective length (>= {keep:.0%} of the shortest length's recall): {effective}", highlight=False)
