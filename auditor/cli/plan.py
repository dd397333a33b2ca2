"""The `auditor plan` and `auditor doctor` commands: typer shells over auditor.planning.plan and
auditor.runs.doctor that render rich tables (text) or sorted JSON.

Registered by auditor/cli.py as ``app.command("plan")(plan_command)`` and
``app.command("doctor")(doctor_command)``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from auditor.errors import AuditorError, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from auditor.planning.plan import MemoryPlan, TimeEstimate
    from auditor.runs.doctor import DoctorReport

from auditor import defaults


class OutputFormat(StrEnum):
    """How plan and doctor print their result."""

    TEXT = "text"
    JSON = "json"


class WeightPrecision(StrEnum):
    """The ``--precision`` choices: the values of ``auditor.planning.plan.Precision``, in its order."""

    BF16 = "bf16"
    FP8 = "fp8"
    NVFP4 = "nvfp4"


class KvCacheDtype(StrEnum):
    """KV cache dtypes the plan offers (vLLM's ``kv_cache_dtype``)."""

    AUTO = "auto"
    FP8 = "fp8"


def plan_command(
    *,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Checkpoint directory or HF id in the local cache.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="A config.json to plan from instead of --model.")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option(min=1, help="Window in tokens (default: the model's, up to 262144).")
    ] = None,
    max_num_seqs: Annotated[int, typer.Option(min=1, help="Concurrent sequences.")] = defaults.MAX_NUM_SEQS,
    kv_cache_dtype: Annotated[
        KvCacheDtype | None, typer.Option(help="Default: fp8 for FP8/NVFP4 checkpoints, auto for BF16.")
    ] = None,
    gpu_memory: Annotated[
        float | None, typer.Option("--gpu-memory", help="GPU memory in GiB: also show what fits.")
    ] = None,
    gpu_memory_utilization: Annotated[float, typer.Option(min=0.01, max=1.0)] = defaults.GPU_MEMORY_UTILIZATION,
    precision: Annotated[WeightPrecision | None, typer.Option(help="Override the detected weight precision.")] = None,
    params: Annotated[
        float | None, typer.Option(help="Parameter count, e.g. 31.6e9, when the config cannot tell.")
    ] = None,
    profile: Annotated[str, typer.Option(help="Device profile for the time estimate.")] = defaults.DEVICE_PROFILE,
    output_tokens: Annotated[
        int, typer.Option(min=0, help="Output tokens for the time estimate.")
    ] = defaults.OUTPUT_TOKENS,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """Plan GPU memory, the largest window that fits, time per window and vLLM arguments."""
    from auditor.planning.plan import PlanRequest, Precision, plan_to_dict

    request = PlanRequest(
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        kv_cache_dtype=None if kv_cache_dtype is None else kv_cache_dtype.value,
        precision=None if precision is None else Precision(precision.value),
        gpu_memory_gib=gpu_memory,
        gpu_memory_utilization=gpu_memory_utilization,
        params=params,
    )
    try:
        plan, estimate, engine_args, device_profile = _plan(model, config, request, profile, output_tokens)
    except AuditorError as exc:
        _fail(exc)
    if output_format is OutputFormat.JSON:
        payload = {"engine_args": engine_args, "plan": plan_to_dict(plan), "time_estimate": asdict(estimate)}
        typer.echo(json.dumps(payload, indent=2, sort_keys=True))
        return
    render_plan(Console(), plan, estimate, engine_args, measured_on=device_profile.model)


def _plan(model: str | None, config: Path | None, request: Any, profile: str, output_tokens: int) -> tuple[Any, ...]:
    """The memory plan, time estimate, engine arguments and device profile for one checkpoint."""
    from auditor.planning.plan import (
        engine_args_for_plan,
        estimate_time,
        load_checkpoint,
        load_config_file,
        load_device_profile,
        plan_memory,
    )

    if model is not None and config is None:
        checkpoint = load_checkpoint(model)
    elif config is not None and model is None:
        checkpoint = load_config_file(config)
    else:
        raise UsageError("pass exactly one of --model or --config")
    plan = plan_memory(checkpoint, request)
    device_profile = load_device_profile(profile)
    estimate = estimate_time(plan.max_model_len, output_tokens, device_profile)
    engine_args = engine_args_for_plan(plan, model=str(checkpoint.directory), gpu_memory_utilization=request.gpu_memory_utilization)
    return plan, estimate, engine_args, device_profile


def doctor_command(
    *,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Checkpoint directory or HF id in the local cache.")
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """Report what this machine has for an audit and what auditor would run; never downloads."""
    from auditor.runs.doctor import report_to_dict, run_doctor

    report = run_doctor(model)
    if output_format is OutputFormat.JSON:
        typer.echo(json.dumps(report_to_dict(report), indent=2, sort_keys=True))
        return
    render_doctor(Console(), report)


def _fail(exc: AuditorError) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(int(exc.exit_code))


def _gib(value: int | None) -> str:
    from auditor.planning.plan import GIB

    return "unknown" if value is None else f"{value / GIB:,.2f} GiB"


def _table(title: str, rows: list[tuple[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(escape(label), escape(str(value)))
    return table


def render_plan(
    console: Console, plan: MemoryPlan, estimate: TimeEstimate, engine_args: dict[str, object], *, measured_on: str
) -> None:
    """Print a plan as rich tables; ``measured_on`` names the model the time profile measured."""
    layers = plan.layers
    params = "not derivable, pass --params" if plan.parameter_count is None else f"{plan.parameter_count / 1e9:.2f} B"
    console.print(
        _table(
            f"Model: {plan.model}",
            [
                ("type", plan.model_type),
                ("precision", f"{plan.precision.value} ({plan.precision_source})"),
                (
                    "layers",
                    f"{layers.total}: {layers.attention} attention, {layers.mamba} Mamba, {layers.moe} MoE, {layers.mlp} MLP",
                ),
                ("parameters", f"{params} ({plan.parameter_source})"),
                ("weights", f"{_gib(plan.weight_bytes)} ({plan.weight_source})"),
            ],
        )
    )
    console.print(
        _table(
            "Cache costs",
            [
                (f"KV per token ({plan.kv_cache_dtype})", f"{plan.kv_bytes_per_token:,} bytes"),
                ("Mamba SSM state per sequence", f"{plan.mamba_ssm_state_bytes_per_sequence:,} bytes"),
                ("Mamba conv state per sequence", f"{plan.mamba_conv_state_bytes_per_sequence:,} bytes"),
            ],
        )
    )
    console.print(
        _table(
            f"Totals: {plan.max_num_seqs} x {plan.max_model_len:,} tokens",
            [
                ("weights", _gib(plan.weight_bytes)),
                ("KV cache", _gib(plan.kv_cache_bytes)),
                ("Mamba state", _gib(plan.mamba_state_bytes)),
                ("activation reserve", _gib(plan.reserve_bytes)),
                ("total", _gib(plan.total_bytes)),
            ],
        )
    )
    if plan.fit is not None:
        fit = plan.fit
        console.print(
            _table(
                f"Fit: {_gib(fit.gpu_memory_bytes)} x {fit.gpu_memory_utilization:g}",
                [
                    ("fits", "yes" if fit.fits else "no"),
                    ("cache budget", _gib(fit.cache_budget_bytes)),
                    (f"largest window at {plan.max_num_seqs} seqs", f"{fit.max_model_len:,} tokens"),
                    (
                        "  by memory alone",
                        "unbounded" if fit.max_model_len_by_memory is None else f"{fit.max_model_len_by_memory:,}",
                    ),
                    (f"largest concurrency at {plan.max_model_len:,}", fit.max_num_seqs),
                ],
            )
        )
    console.print(
        _table(
            f"Time per full window ({estimate.profile})",
            [
                ("measured with", measured_on),
                ("time to first token", f"{estimate.ttft_s:,.1f} s"),
                ("decode", f"{estimate.decode_s:,.1f} s"),
                ("end to end", f"{estimate.total_s:,.1f} s"),
            ],
        )
    )
    console.print(_table("vllm.LLM arguments", list(engine_args.items())))
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)


def render_doctor(console: Console, report: DoctorReport) -> None:
    """Print a doctor report as rich tables."""
    gpus = "; ".join(f"{gpu.index}: {gpu.name} ({_gib(gpu.memory_total_bytes)})" for gpu in report.gpus)
    gpus = f"{gpus} [{report.gpu_source}]" if gpus else f"none ({report.gpu_source})"
    console.print(
        _table(
            "Machine",
            [
                ("python", f"{report.python_version} ({report.platform})"),
                ("auditor", report.auditor_version or "not installed"),
                ("vllm", report.vllm.detail),
                (
                    "torch",
                    report.torch.detail
                    if report.torch.version is None
                    else f"{report.torch.version}: {report.torch.detail}",
                ),
                ("GPUs", gpus),
                ("engine auto", f"{report.engine.engine}: {report.engine.reason}"),
            ],
        )
    )
    checkpoint = report.checkpoint
    if checkpoint is None:
        console.print(f"checkpoint: {escape(report.checkpoint_detail)}", highlight=False)
    else:
        console.print(
            _table(
                "Checkpoint",
                [
                    ("path", checkpoint.path),
                    ("precision", f"{checkpoint.precision or 'unknown'} ({checkpoint.precision_source})"),
                    ("tokenizer", checkpoint.tokenizer_source),
                    ("chat template", checkpoint.chat_template or "missing"),
                    ("reasoning parser", checkpoint.reasoning_parser),
                ],
            )
        )
    plan = report.plan
    if plan is not None:
        fits = "no GPU memory known" if plan.fit is None else ("yes" if plan.fit.fits else "no")
        console.print(
            _table(
                f"Plan: {plan.max_num_seqs} x {plan.max_model_len:,} tokens",
                [
                    ("weights", f"{_gib(plan.weight_bytes)} ({plan.precision.value})"),
                    (f"KV per token ({plan.kv_cache_dtype})", f"{plan.kv_bytes_per_token:,} bytes"),
                    ("Mamba state per sequence", f"{plan.mamba_state_bytes_per_sequence:,} bytes"),
                    ("total", _gib(plan.total_bytes)),
                    ("fits the first GPU", fits),
                ],
            )
        )
    if report.engine_args is not None:
        console.print(_table("vllm.LLM arguments", list(report.engine_args.items())))
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
