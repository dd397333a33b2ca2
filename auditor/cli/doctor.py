"""The ``auditor doctor`` command: a typer shell over ``auditor.engine.doctor`` that prints
what this machine has for an audit, and what auditor would run on it, as rich tables (text)
or sorted JSON. Registered in ``auditor.cli.app``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditor.cli.output import OutputFormat, gib, key_value_table

if TYPE_CHECKING:
    from auditor.engine.doctor import DoctorReport


def doctor_command(
    *,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Checkpoint directory or HF id in the local cache.")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="An OpenAI-compatible server to ask what it serves (default: AUDITOR_BASE_URL)."),
    ] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """Report what this machine has for an audit and what auditor would run; never downloads."""
    from auditor.engine.doctor import report_to_dict, run_doctor

    report = run_doctor(model, base_url=base_url)
    if output_format is OutputFormat.JSON:
        typer.echo(json.dumps(report_to_dict(report), indent=2, sort_keys=True))
        return
    render_doctor(Console(), report)


def render_doctor(console: Console, report: DoctorReport) -> None:
    """Print a doctor report as rich tables."""
    gpus = "; ".join(f"{gpu.index}: {gpu.name} ({gib(gpu.memory_total_bytes)})" for gpu in report.gpus)
    gpus = f"{gpus} [{report.gpu_source}]" if gpus else f"none ({report.gpu_source})"
    console.print(
        key_value_table(
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
            key_value_table(
                "Checkpoint",
                [
                    ("path", checkpoint.path),
                    ("precision", f"{checkpoint.precision or 'unknown'} ({checkpoint.precision_source})"),
                    ("tokenizer", checkpoint.tokenizer_source),
                    ("chat template", checkpoint.chat_template or "missing"),
                    ("reasoning parser", checkpoint.reasoning_parser),
                    ("weights", f"{checkpoint.weight_files} file(s)" if checkpoint.weight_files else "none (config only)"),
                ],
            )
        )
    server = report.server
    if server is not None:
        rows = [("base URL", server.base_url), ("reachable", "yes" if server.reachable else "no"), ("detail", server.detail)]
        for served in server.models:
            window = f"{served.max_model_len:,} tokens" if served.max_model_len else "not listed"
            rows.append((f"model {served.id}", f"max_model_len {window}" + (f", weights {served.root}" if served.root else "")))
        console.print(key_value_table("Server", rows))
    plan = report.plan
    if plan is not None:
        fits = "no GPU memory known" if plan.fit is None else ("yes" if plan.fit.fits else "no")
        console.print(
            key_value_table(
                f"Plan: {plan.max_num_seqs} x {plan.max_model_len:,} tokens",
                [
                    ("weights", f"{gib(plan.weight_bytes)} ({plan.precision.value})"),
                    (f"KV per token ({plan.kv_cache_dtype})", f"{plan.kv_bytes_per_token:,} bytes"),
                    ("Mamba state per sequence", f"{plan.mamba_state_bytes_per_sequence:,} bytes"),
                    ("total", gib(plan.total_bytes)),
                    ("fits the first GPU", fits),
                ],
            )
        )
    if report.engine_args is not None:
        console.print(key_value_table("vllm.LLM arguments", list(report.engine_args.items())))
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
