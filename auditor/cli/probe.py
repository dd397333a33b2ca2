"""The `auditor probe` command: a typer shell over auditor.recall.grid that runs the
needle-recall grid against an engine and writes cells.jsonl, summary.json and the plots.

Registered by auditor/cli.py as ``app.command("probe")(_exit_on_error(probe_command))``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from auditor.errors import UsageError

DEFAULT_LENGTHS_TEXT = "8K,32K,64K,128K,200K,262144"
DEFAULT_DEPTHS_TEXT = "0,10,20,30,40,50,60,70,80,90,100"


def probe_command(
    *,
    lengths: Annotated[str, typer.Option("--lengths", help="Context lengths in tokens, comma-separated; 8K = 8192.")] = DEFAULT_LENGTHS_TEXT,
    depths: Annotated[str, typer.Option("--depths", help="Needle depths in percent, comma-separated.")] = DEFAULT_DEPTHS_TEXT,
    needles_per_cell: Annotated[int, typer.Option("--needles-per-cell", min=1, max=12, help="Needles (and questions) per request.")] = 3,
    haystack: Annotated[
        list[Path] | None,
        typer.Option("--haystack", help="Repository to use as haystack (repeatable; default: bundled fixture + auditor's own files)."),
    ] = None,
    engine: Annotated[str, typer.Option("--engine", "-e", help="auto | vllm | openai | replay | a plugin's name.")] = "auto",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Checkpoint directory or Hugging Face id (local cache).")] = None,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help="Tokenizer directory (tokenizer.json + chat template).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", envvar="AUDITOR_BASE_URL", help="OpenAI-compatible server.")] = None,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="AUDITOR_API_KEY", help="API key for --base-url.")] = None,
    replay: Annotated[str | None, typer.Option("--replay", help="Recorded completions for --engine replay.")] = None,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=16, help="Tokens reserved for each answer.")] = 1024,
    thinking: Annotated[bool, typer.Option("--thinking/--no-thinking", help="Let the model reason before answering.")] = False,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1)] = 4,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", min=0.05, max=1.0)] = 0.90,
    seed: Annotated[int, typer.Option("--seed", help="Seed for needle names and values.")] = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for cells.jsonl, summary.json and the PNGs.")] = Path("probe-results"),
) -> None:
    """Measure needle recall by depth and context length (a NIAH-style grid on real code)."""
    from rich.console import Console
    from rich.table import Table

    from auditor.cli.app import progress_for, stderr
    from auditor.engine.base import EngineSettings
    from auditor.engine.registry import create_engine, resolve_auto
    from auditor.recall.grid import (
        GridOptions,
        default_haystack_sources,
        length_label,
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
        needles_per_cell=needles_per_cell,
        output_tokens=output_tokens,
        thinking=thinking,
        seed=seed,
    )
    settings = EngineSettings(
        model=model, max_model_len=max(options.lengths), max_num_seqs=max_num_seqs,
        gpu_memory_utilization=gpu_memory_utilization, base_url=base_url, api_key=api_key, replay_path=replay,
    )
    engine_name = engine
    if engine_name == "auto":
        engine_name, reason = resolve_auto(settings)
        stderr.print(f"[dim]engine auto -> {engine_name}:[/] {escape(reason)}", highlight=False)
    if engine_name == "static":
        raise UsageError("auditor probe needs a model: pass --engine vllm, --engine openai --base-url URL, or --engine replay")
    sources = tuple(haystack or ()) or default_haystack_sources()
    loaded = load_tokenizer(TokenizerRequest(tokenizer=tokenizer, model=model))
    if not loaded.info.exact:
        stderr.print(f"[yellow]warning:[/] {escape(loaded.info.describe())}: cell lengths are approximate", highlight=False)
    with progress_for(stderr.is_terminal) as report:
        files = load_haystack(sources, report)
        result = run_grid(
            files, tokenizer=loaded, engine=create_engine(engine_name, settings), options=options,
            haystack=tuple(str(source) for source in sources), progress=report,
        )
    written = write_outputs(result, out)
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
    console.print(f"effective length (>= {options.keep:.0%} of the shortest length's recall): {effective}", highlight=False)
    console.print("wrote " + ", ".join(str(path) for path in written), highlight=False)
