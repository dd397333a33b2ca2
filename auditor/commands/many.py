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

from auditor.commands.flags import (
    DEFAULT_ENGINE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_MAX_WINDOWS,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROBES,
    DEFAULT_RECALL_THRESHOLD,
    DEFAULT_RETRIES,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    DEFAULT_TENSOR_PARALLEL_SIZE,
    DEFAULT_TIMEOUT_S,
    ApiKeyOption,
    BaseUrlOption,
    EngineModelOption,
    EngineOption,
    ErrorOption,
    ExcludeOption,
    GpuMemoryUtilizationOption,
    IncludeOption,
    ManyReplayOption,
    MaxFileBytesOption,
    MaxModelLenOption,
    MaxNumBatchedTokensOption,
    MaxNumSeqsOption,
    MaxWindowsOption,
    NoCacheOption,
    OutputTokensOption,
    RetriesOption,
    RuleOption,
    SeedOption,
    StaticOption,
    TemperatureOption,
    TensorParallelSizeOption,
    NoPrefixCachingOption,
    ThinkingOption,
    ThinkingTokenBudgetOption,
    TimeoutOption,
    TokenizerOption,
)
from auditor.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from auditor.many import ManyResult

BACKENDS = ("auto", "ray", "sequential")


def scan_many_command(
    *,
    targets: Annotated[Path, typer.Argument(help="File of local paths or git URLs (url@rev or url#rev), one per line; or a directory of repositories.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory: reports, index, state (re-run to resume).")] = Path("auditor-runs"),
    rule: RuleOption = [],
    engine: EngineOption = DEFAULT_ENGINE,
    model: EngineModelOption = None,
    tokenizer: TokenizerOption = None,
    endpoint: Annotated[list[str], typer.Option("--endpoint", help="A `vllm serve` base URL for --engine openai (repeatable).")] = [],
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    replay: ManyReplayOption = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="auto | ray://host:10001 (default: a local Ray instance).")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto (Ray when installed) | ray | sequential.")] = "auto",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Generation actors (one engine each).")] = 1,
    gpus_per_worker: Annotated[float | None, typer.Option("--gpus-per-worker", min=0.0, help="GPUs per actor (default: tensor-parallel size for vllm).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Windows per engine call.")] = 8,
    max_model_len: MaxModelLenOption = DEFAULT_MAX_MODEL_LEN,
    output_tokens: OutputTokensOption = DEFAULT_OUTPUT_TOKENS,
    max_num_batched_tokens: MaxNumBatchedTokensOption = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: MaxNumSeqsOption = DEFAULT_MAX_NUM_SEQS,
    tensor_parallel_size: TensorParallelSizeOption = DEFAULT_TENSOR_PARALLEL_SIZE,
    no_prefix_caching: NoPrefixCachingOption = False,
    gpu_memory_utilization: GpuMemoryUtilizationOption = DEFAULT_GPU_MEMORY_UTILIZATION,
    temperature: TemperatureOption = DEFAULT_TEMPERATURE,
    seed: SeedOption = DEFAULT_SEED,
    thinking: ThinkingOption = True,
    thinking_token_budget: ThinkingTokenBudgetOption = None,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    retries: RetriesOption = DEFAULT_RETRIES,
    include: IncludeOption = [],
    exclude: ExcludeOption = [],
    max_file_bytes: MaxFileBytesOption = DEFAULT_MAX_FILE_BYTES,
    max_windows: MaxWindowsOption = DEFAULT_MAX_WINDOWS,
    static: StaticOption = True,
    no_cache: NoCacheOption = False,
    error: ErrorOption = False,
) -> None:
    """Audit many repositories in one resumable run, on Ray when it is installed."""
    from rich.console import Console

    from auditor.cli import progress_for, stderr
    from auditor.commands.options import scan_config_from_flags
    from auditor.many import ManyConfig, run_many
    from auditor.progress import ProgressEvent

    if backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    # The per-repository scan is ``auditor scan``'s, root set per repository; the canaries
    # keep their defaults (scan-many has no --probes).
    template = scan_config_from_flags(
        Path("."), rule=rule, engine=engine, model=model, tokenizer=tokenizer, base_url=base_url, api_key=api_key,
        replay=replay, max_model_len=max_model_len, output_tokens=output_tokens,
        max_num_batched_tokens=max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, tensor_parallel_size=tensor_parallel_size, prefix_caching=not no_prefix_caching,
        temperature=temperature, seed=seed,
        thinking=thinking, thinking_token_budget=thinking_token_budget, timeout=timeout, retries=retries,
        include=include, exclude=exclude, max_file_bytes=max_file_bytes, max_windows=max_windows, static=static,
        no_cache=no_cache, probes=DEFAULT_PROBES, recall_threshold=DEFAULT_RECALL_THRESHOLD,
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
