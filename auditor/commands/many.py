"""The `auditor scan-many` command: a typer shell over ``auditor.many.run_many``.

Registered by auditor/cli.py as ``app.command("scan-many")(_exit_on_error(scan_many_command))``.
Builds a ``ManyConfig`` (a ``ScanConfig`` template plus the run's own options), runs it
with a rich progress display on stderr (run notices such as "ray is not installed" are
printed even when stderr is not a terminal), prints the summary table and exits 5 when a
repository failed or is incomplete (1 with ``--error`` when there are findings).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from auditor.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from auditor.many import ManyResult

BACKENDS = ("auto", "ray", "sequential")


def scan_many_command(
    *,
    targets: Annotated[Path, typer.Argument(help="File of local paths or git URLs (url@rev or url#rev), one per line; or a directory of repositories.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory: reports, index, state (re-run to resume).")] = Path("auditor-runs"),
    rule: Annotated[list[str], typer.Option("--rule", "-r", help="Rule id or path to a rule file (repeatable).")] = [],
    engine: Annotated[str, typer.Option("--engine", "-e", help="auto | vllm | openai | replay | static | a plugin's name.")] = "auto",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Checkpoint directory or HF id (or the served model name).")] = None,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help="Tokenizer directory (tokenizer.json + chat template).")] = None,
    endpoint: Annotated[list[str], typer.Option("--endpoint", help="A `vllm serve` base URL for --engine openai (repeatable).")] = [],
    base_url: Annotated[str | None, typer.Option("--base-url", envvar="AUDITOR_BASE_URL", help="One OpenAI-compatible server.")] = None,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="AUDITOR_API_KEY", help="API key for the endpoints.")] = None,
    replay: Annotated[str | None, typer.Option("--replay", help="Recorded completions for --engine replay (ids <repo>/window-<i>).")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="auto | ray://host:10001 (default: a local Ray instance).")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto (Ray when installed) | ray | sequential.")] = "auto",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Generation actors (one engine each).")] = 1,
    gpus_per_worker: Annotated[float | None, typer.Option("--gpus-per-worker", min=0.0, help="GPUs per actor (default: tensor-parallel size for vllm).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Windows per engine call.")] = 8,
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=1024)] = 262_144,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1)] = 32_768,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1)] = 4,
    tensor_parallel_size: Annotated[int, typer.Option("--tensor-parallel-size", min=1)] = 1,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", min=0.05, max=1.0)] = 0.90,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    thinking: Annotated[bool, typer.Option("--thinking/--no-thinking")] = True,
    thinking_token_budget: Annotated[int | None, typer.Option("--thinking-token-budget", min=1)] = None,
    include: Annotated[list[str], typer.Option("--include", help="Only files matching this glob (repeatable).")] = [],
    exclude: Annotated[list[str], typer.Option("--exclude", help="Skip files matching this glob (repeatable).")] = [],
    max_windows: Annotated[int, typer.Option("--max-windows", min=0, help="Windows per repository (0: no limit).")] = 0,
    static: Annotated[bool, typer.Option("--static/--no-static", help="Also run the static pass.")] = True,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the index and result caches.")] = False,
    error: Annotated[bool, typer.Option("--error", help="Exit 1 when there are findings.")] = False,
) -> None:
    """Audit many repositories in one resumable run, on Ray when it is installed."""
    from rich.console import Console

    from auditor.cli import progress_for, stderr
    from auditor.engine.base import EngineSettings
    from auditor.many import ManyConfig, run_many
    from auditor.pack import DEFAULT_PROBE_RESERVE_TOKENS, PackOptions
    from auditor.progress import ProgressEvent
    from auditor.scan import ScanConfig
    from auditor.tokens import TokenizerRequest
    from auditor.walk import WalkOptions

    if backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    settings = EngineSettings(
        model=model, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, tensor_parallel_size=tensor_parallel_size, temperature=temperature, seed=seed,
        thinking_token_budget=thinking_token_budget, base_url=base_url, api_key=api_key, replay_path=replay,
    )
    template = ScanConfig(
        root=Path("."), rules=tuple(rule), engine=engine, engine_settings=settings,
        tokenizer=TokenizerRequest(tokenizer=tokenizer, model=model),
        pack=PackOptions(max_model_len=max_model_len, output_tokens=output_tokens,
                         probe_reserve_tokens=DEFAULT_PROBE_RESERVE_TOKENS, thinking=thinking, max_windows=max_windows),
        walk=WalkOptions(include=tuple(include), exclude=tuple(exclude)),
        use_cache=not no_cache, static=static,
    )
    endpoints = tuple(endpoint) + ((base_url,) if base_url and base_url not in endpoint else ())
    config = ManyConfig(
        targets=targets, out=out, scan=template, endpoints=endpoints, batch_size=batch_size,
        backend=backend,  # type: ignore[arg-type]  # checked against BACKENDS above
        ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker,
    )
    with progress_for(stderr.is_terminal) as report:

        def show(event: ProgressEvent) -> None:
            report(event)
            if event.stage == "scan-many" and event.message and not stderr.is_terminal:
                stderr.print(f"notice: {event.message}", highlight=False, markup=False)

        result = run_many(config, show)
    Console().print(summary_table(result))
    if result.failures:
        stderr.print(f"[bold red]{result.failures} repositories failed or are incomplete:[/] see {out / 'index.md'}", highlight=False)
        raise typer.Exit(int(ExitCode.INCOMPLETE))
    if error and any(outcome.findings for outcome in result.repositories):
        raise typer.Exit(int(ExitCode.FINDINGS))


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
