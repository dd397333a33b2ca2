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

from auditor.commands.output import exit_for, write_output
from auditor.errors import UsageError

if TYPE_CHECKING:
    from auditor.progress import ProgressEvent
    from auditor.report.model import ScanResult

FORMATS = ("text", "json", "sarif", "markdown")
# auditor.canary's DEFAULT_CANARIES and DEFAULT_RECALL_THRESHOLD, restated (as ``auditor
# scan`` does) so that building the CLI does not import the scan stages;
# tests/test_cli_imports.py checks that they still match.
DEFAULT_CANARIES = 3
DEFAULT_RECALL_THRESHOLD = 0.8
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
    rule: Annotated[list[str], typer.Option("--rule", "-r", help="Rule id or rule file (repeatable).")] = [],
    all_findings: Annotated[bool, typer.Option("--all", help="Existing findings on the change block too.")] = False,
    compare_base: Annotated[bool, typer.Option("--compare-base/--no-compare-base", help="Scan the base to tell new findings from existing ones.")] = True,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Baseline file of accepted fingerprints (auditor scan --write-baseline).")] = None,
    engine: Annotated[str, typer.Option("--engine", "-e", help="auto | vllm | openai | replay | static | a plugin's name.")] = "auto",
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Checkpoint directory or Hugging Face id (local cache).")] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="Tokenizer directory.")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", envvar="AUDITOR_BASE_URL", help="OpenAI-compatible server, e.g. http://host:8000/v1.")] = None,
    api_key: Annotated[Optional[str], typer.Option("--api-key", envvar="AUDITOR_API_KEY", help="API key for --base-url.")] = None,
    replay: Annotated[Optional[str], typer.Option("--replay", help="Recorded completions for --engine replay.")] = None,
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=1024)] = 262_144,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1)] = 32_768,
    max_num_batched_tokens: Annotated[int, typer.Option("--max-num-batched-tokens", min=1)] = 16_384,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", min=0.05, max=1.0)] = 0.90,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1)] = 4,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    thinking: Annotated[bool, typer.Option("--thinking/--no-thinking")] = True,
    thinking_token_budget: Annotated[Optional[int], typer.Option("--thinking-token-budget", min=1)] = None,
    include: Annotated[list[str], typer.Option("--include", help="Only files matching this glob (repeatable).")] = [],
    exclude: Annotated[list[str], typer.Option("--exclude", help="Skip files matching this glob (repeatable).")] = [],
    static: Annotated[bool, typer.Option("--static/--no-static", help="Also run the static pass.")] = True,
    probes: Annotated[int, typer.Option("--probes", min=0, max=8, help="Recall canaries planted per window (0 disables).")] = DEFAULT_CANARIES,
    recall_threshold: Annotated[float, typer.Option("--recall-threshold", min=0.0, max=1.0, help="Canary recall below this marks a window recall-degraded.")] = DEFAULT_RECALL_THRESHOLD,
    format: Annotated[str, typer.Option("--format", "-f", help="text | json | sarif | markdown")] = "text",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report here instead of stdout.")] = None,
    json_output: Annotated[Optional[Path], typer.Option("--json-output", help="Also write a JSON report here.")] = None,
    sarif_output: Annotated[Optional[Path], typer.Option("--sarif-output", help="Also write a SARIF report here.")] = None,
    markdown_output: Annotated[Optional[Path], typer.Option("--markdown-output", help="Also write the PR comment (Markdown) here.")] = None,
    sarif_category: Annotated[Optional[str], typer.Option("--sarif-category", help="SARIF automationDetails.id (GitHub's analysis category).")] = None,
    link_base: Annotated[Optional[str], typer.Option("--link-base", help="Prefix for Markdown links, e.g. https://github.com/o/r/blob/SHA/.")] = None,
    error: Annotated[bool, typer.Option("--error", help="Exit 1 when there are new findings on the change.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the caches.")] = False,
) -> None:
    """Review a change: findings whose call chain the diff from --base touches, new vs existing."""
    from auditor.commands.options import scan_config_from_flags
    from auditor.engine.registry import create_engine
    from auditor.review import ReviewConfig, run_review
    from auditor.scan import resolve_engine, run_scan

    if format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    scan = scan_config_from_flags(
        path, rule=rule, engine=engine, model=model, tokenizer=tokenizer, base_url=base_url, api_key=api_key,
        replay=replay, max_model_len=max_model_len, output_tokens=output_tokens,
        max_num_batched_tokens=max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, temperature=temperature, seed=seed, thinking=thinking,
        thinking_token_budget=thinking_token_budget, include=include, exclude=exclude, static=static,
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
