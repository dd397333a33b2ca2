"""The ``auditor plan`` command: a typer shell over ``auditor.planning.plan`` that prints the
memory plan, the time estimate per window and the ``vllm.LLM`` arguments as rich tables
(text) or sorted JSON. Registered in ``auditor.cli.app``.
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

from auditor.cli.output import OutputFormat, gib, key_value_table
from auditor.errors import AuditorError, UsageError

if TYPE_CHECKING:
    from auditor.planning.plan import MemoryPlan
    from auditor.planning.timing import DeviceProfile, TimeEstimate

from auditor import defaults


class WeightPrecision(StrEnum):
    """The ``--precision`` choices: the values of ``auditor.planning.checkpoint.Precision``, in its order."""

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
    profile: Annotated[str, typer.Option(help="Device profile for the time estimate: dgx-spark (measured), h100, h200 or b200 (estimates scaled from it); the checkpoint's precision picks the variant, or name one, e.g. h200-bf16.")] = defaults.DEVICE_PROFILE,
    output_tokens: Annotated[
        int, typer.Option(min=0, help="Output tokens for the time estimate.")
    ] = defaults.OUTPUT_TOKENS,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """Plan GPU memory, the largest window that fits, time per window and vLLM arguments."""
    from auditor.planning.checkpoint import Precision
    from auditor.planning.plan import PlanRequest, plan_to_dict

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
        time_estimate = {
            **asdict(estimate), "device": device_profile.device, "precision": device_profile.precision,
            "measured": device_profile.measured, "scaled_from": device_profile.scaled_from, "source": device_profile.source,
        }
        payload = {"engine_args": engine_args, "plan": plan_to_dict(plan), "time_estimate": time_estimate}
        typer.echo(json.dumps(payload, indent=2, sort_keys=True))
        return
    render_plan(Console(), plan, estimate, engine_args, device=device_profile)


def _plan(model: str | None, config: Path | None, request: Any, profile: str, output_tokens: int) -> tuple[Any, ...]:
    """The memory plan, time estimate, engine arguments and device profile for one checkpoint."""
    from auditor.planning.checkpoint import load_checkpoint, load_config_file
    from auditor.planning.plan import engine_args_for_plan, plan_memory
    from auditor.planning.timing import estimate_time, load_device_profile

    if model is not None and config is None:
        checkpoint = load_checkpoint(model)
    elif config is not None and model is None:
        checkpoint = load_config_file(config)
    else:
        raise UsageError("pass exactly one of --model or --config")
    plan = plan_memory(checkpoint, request)
    device_profile = load_device_profile(profile, plan.precision.value)
    estimate = estimate_time(plan.max_model_len, output_tokens, device_profile)
    engine_args = engine_args_for_plan(plan, model=str(checkpoint.directory), gpu_memory_utilization=request.gpu_memory_utilization)
    return plan, estimate, engine_args, device_profile


def _fail(exc: AuditorError) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(int(exc.exit_code))


def render_plan(
    console: Console, plan: MemoryPlan, estimate: TimeEstimate, engine_args: dict[str, object], *, device: DeviceProfile
) -> None:
    """Print a plan as rich tables; ``device`` is the profile the time estimate comes from."""
    layers = plan.layers
    params = "not derivable, pass --params" if plan.parameter_count is None else f"{plan.parameter_count / 1e9:.2f} B"
    console.print(
        key_value_table(
            f"Model: {plan.model}",
            [
                ("type", plan.model_type),
                ("precision", f"{plan.precision.value} ({plan.precision_source})"),
                (
                    "layers",
                    f"{layers.total}: {layers.attention} attention, {layers.mamba} Mamba, {layers.moe} MoE, {layers.mlp} MLP",
                ),
                ("parameters", f"{params} ({plan.parameter_source})"),
                ("weights", f"{gib(plan.weight_bytes)} ({plan.weight_source})"),
            ],
        )
    )
    console.print(
        key_value_table(
            "Cache costs",
            [
                (f"KV per token ({plan.kv_cache_dtype})", f"{plan.kv_bytes_per_token:,} bytes"),
                ("Mamba SSM state per sequence", f"{plan.mamba_ssm_state_bytes_per_sequence:,} bytes"),
                ("Mamba conv state per sequence", f"{plan.mamba_conv_state_bytes_per_sequence:,} bytes"),
            ],
        )
    )
    console.print(
        key_value_table(
            f"Totals: {plan.max_num_seqs} x {plan.max_model_len:,} tokens",
            [
                ("weights", gib(plan.weight_bytes)),
                ("KV cache", gib(plan.kv_cache_bytes)),
                ("Mamba state", gib(plan.mamba_state_bytes)),
                ("activation reserve", gib(plan.reserve_bytes)),
                ("total", gib(plan.total_bytes)),
            ],
        )
    )
    if plan.fit is not None:
        fit = plan.fit
        console.print(
            key_value_table(
                f"Fit: {gib(fit.gpu_memory_bytes)} x {fit.gpu_memory_utilization:g}",
                [
                    ("fits", "yes" if fit.fits else "no"),
                    ("cache budget", gib(fit.cache_budget_bytes)),
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
        key_value_table(
            f"Time per full window ({estimate.profile})",
            [
                ("device", device.device),
                ("numbers", f"measured with {device.model}, at {device.precision.upper()} (assumed: see the source, --format json)" if device.measured
                 else f"ESTIMATE at {device.precision.upper()}, scaled from {device.scaled_from} (see --format json for the source)"),
                ("time to first token", f"{estimate.ttft_s:,.1f} s"),
                ("decode", f"{estimate.decode_s:,.1f} s"),
                ("end to end", f"{estimate.total_s:,.1f} s"),
            ],
        )
    )
    if device.precision != plan.precision.value:
        console.print(f"[yellow]note:[/yellow] the {escape(device.name)} profile is at {device.precision}, the weights are "
                      f"{plan.precision.value}: the time is for the other precision", highlight=False)
    console.print(key_value_table("vllm.LLM arguments", list(engine_args.items())))
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
