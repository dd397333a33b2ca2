"""The ``auditor review`` command: a typer shell over ``auditor.review.run_review`` for pull
requests in CI.

Registered by auditor/cli.py as ``app.command("review")(_exit_on_error(review_command))``.
Exit codes: 0 ok; 1 with ``--error`` when there are NEW findings on the change (existing
ones too with ``--all``); 5 when the scan is incomplete; 6 when a window's canary recall
fell below ``--recall-threshold``; others from ``AuditorError``.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

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
    REPORT_FORMATS,
    ApiKeyOption,
    BaselineOption,
    BaseUrlOption,
    EngineModelOption,
    EngineOption,
    ExcludeOption,
    GpuMemoryUtilizationOption,
    IncludeOption,
    JsonOutputOption,
    MaxFileBytesOption,
    MaxModelLenOption,
    MaxNumBatchedTokensOption,
    MaxNumSeqsOption,
    MaxWindowsOption,
    NoCacheOption,
    OutputTokensOption,
    ProbesOption,
    RecallThresholdOption,
    ReplayOption,
    ReportFormatOption,
    ReportOutputOption,
    RetriesOption,
    ReviewErrorOption,
    ReviewMarkdownOutputOption,
    RuleOption,
    SarifOutputOption,
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
from auditor.commands.output import exit_for, write_output
from auditor.errors import UsageError

if TYPE_CHECKING:
    from auditor.progress import ProgressEvent
    from auditor.report.model import ScanResult

_stderr = Console(stderr=True)


def _log_progress(event: ProgressEvent) -> None:
    """Print stage notices on stderr (no bars: review runs in CI logs)."""
    if event.message:
        _stderr.print(f"[dim]{escape(event.stage)}:[/] {escape(event.message)}", highlight=False)


def _render(result: ScanResult, format: str, category: str | None, link_base: str | None) -> str:
    from auditor.report import render
    from auditor.report.markdown import render_markdown
    from auditor.report.sarif import render_sarif

    if format == "sarif":
        return render_sarif(result, category)
    if format == "markdown":
        return render_markdown(result, link_base)
    return render(result, format)


def review_command(
    path: Annotated[Path, typer.Argument(help="Directory to review, inside a git work tree.")] = Path("."),
    *,
    base: Annotated[str, typer.Option("--base", help="Base revision (e.g. the PR's merge base).")],
    head: Annotated[Optional[str], typer.Option("--head", help="Head revision (default: the working tree as checked out).")] = None,
    rule: RuleOption = [],
    all_findings: Annotated[bool, typer.Option("--all", help="Existing findings on the change block too.")] = False,
    compare_base: Annotated[bool, typer.Option("--compare-base/--no-compare-base", help="Scan the base to tell new findings from existing ones.")] = True,
    baseline: BaselineOption = None,
    engine: EngineOption = DEFAULT_ENGINE,
    model: EngineModelOption = None,
    tokenizer: TokenizerOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    replay: ReplayOption = None,
    max_model_len: MaxModelLenOption = DEFAULT_MAX_MODEL_LEN,
    output_tokens: OutputTokensOption = DEFAULT_OUTPUT_TOKENS,
    max_num_batched_tokens: MaxNumBatchedTokensOption = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    gpu_memory_utilization: GpuMemoryUtilizationOption = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_num_seqs: MaxNumSeqsOption = DEFAULT_MAX_NUM_SEQS,
    tensor_parallel_size: TensorParallelSizeOption = DEFAULT_TENSOR_PARALLEL_SIZE,
    no_prefix_caching: NoPrefixCachingOption = False,
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
    probes: ProbesOption = DEFAULT_PROBES,
    recall_threshold: RecallThresholdOption = DEFAULT_RECALL_THRESHOLD,
    format: ReportFormatOption = "text",
    output: ReportOutputOption = None,
    json_output: JsonOutputOption = None,
    sarif_output: SarifOutputOption = None,
    markdown_output: ReviewMarkdownOutputOption = None,
    sarif_category: Annotated[Optional[str], typer.Option("--sarif-category", help="SARIF automationDetails.id (GitHub's analysis category).")] = None,
    link_base: Annotated[Optional[str], typer.Option("--link-base", help="Prefix for Markdown links, e.g. https://github.com/o/r/blob/SHA/.")] = None,
    error: ReviewErrorOption = False,
    no_cache: NoCacheOption = False,
) -> None:
    """Review a change: findings whose call chain the diff from --base touches, new vs existing."""
    from auditor.commands.options import scan_config_from_flags
    from auditor.engine.registry import create_engine
    from auditor.review import ReviewConfig, run_review
    from auditor.scan import resolve_engine, run_scan

    if format not in REPORT_FORMATS:
        raise UsageError(f"--format must be one of {', '.join(REPORT_FORMATS)}, not {format!r}")
    scan = scan_config_from_flags(
        path, rule=rule, engine=engine, model=model, tokenizer=tokenizer, base_url=base_url, api_key=api_key,
        replay=replay, max_model_len=max_model_len, output_tokens=output_tokens,
        max_num_batched_tokens=max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, tensor_parallel_size=tensor_parallel_size, prefix_caching=not no_prefix_caching,
        temperature=temperature, seed=seed,
        thinking=thinking, thinking_token_budget=thinking_token_budget, timeout=timeout, retries=retries,
        include=include, exclude=exclude, max_file_bytes=max_file_bytes, max_windows=max_windows, static=static,
        no_cache=no_cache, probes=probes, recall_threshold=recall_threshold,
    )
    config = ReviewConfig(scan=scan, base=base, head=head, include_existing=all_findings,
                          compare_base=compare_base, baseline=baseline)
    # One engine for the head and the base scans: a vLLM model loads once.
    engine_name, notices = resolve_engine(scan)
    for notice in notices:
        _stderr.print(f"[yellow]notice:[/] {escape(notice)}", highlight=False)
    if engine_name == "static":
        reviewed = run_review(replace(config, scan=replace(scan, engine="static")), _log_progress)
    else:
        shared = create_engine(engine_name, scan.engine_settings)
        reviewed = run_review(config, _log_progress, scan=functools.partial(run_scan, engine=shared))
    result = reviewed.result
    for warning in result.warnings:
        _stderr.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for extra_format, extra_path in (("json", json_output), ("sarif", sarif_output), ("markdown", markdown_output)):
        if extra_path is not None:
            write_output(_render(result, extra_format, sarif_category, link_base), extra_path)
    write_output(_render(result, format, sarif_category, link_base), output)
    exit_for(result, blocking=reviewed.blocking, error=error, console=_stderr, what="review")
