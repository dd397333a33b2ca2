"""The ``auditor`` command line: a thin typer shell over the core stages.

Each command turns its flags into the core's frozen option objects, calls one core
function, and renders the result. Progress arrives through a callback rendered here with
rich on stderr; ``AuditorError`` subclasses become exit codes in one place (``_exit_on_error``).
"""

from __future__ import annotations

import functools
import io
import logging
import sys
from pathlib import Path
from typing import Annotated, Callable, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from auditor import __version__
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
    ErrorOption,
    ExcludeOption,
    GpuMemoryUtilizationOption,
    IncludeOption,
    JsonOutputOption,
    MarkdownOutputOption,
    MaxFileBytesOption,
    MaxModelLenOption,
    MaxNumBatchedTokensOption,
    MaxNumSeqsOption,
    MaxWindowsOption,
    ModelOption,
    NoCacheOption,
    OutputTokensOption,
    ProbesOption,
    RecallThresholdOption,
    ReplayOption,
    ReportFormatOption,
    ReportOutputOption,
    RetriesOption,
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
from auditor.errors import AuditorError, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

# Start-up cost matters (``auditor pack`` is benchmarked end to end): this module and the
# command modules import only what building the commands needs. Everything a command
# uses to run (the core stages, engines, reporters, rich.progress/table) is imported
# inside that command, so ``auditor pack`` never imports scan, many, engines or reports.
# tests/test_cli_imports.py guards this.

app = typer.Typer(
    name="auditor",
    help="Long-context codebase audits: exact-token packing for Nemotron 3 Nano, grounded call-chain findings.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
stderr = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., object])


def _exit_on_error(command: F) -> F:
    """Map AuditorError to its exit code with a one-line message; nothing else is caught."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return command(*args, **kwargs)
        except AuditorError as error:
            stderr.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
            raise typer.Exit(int(error.exit_code)) from None

    return wrapper  # type: ignore[return-value]


class RichProgress:
    """Renders ProgressEvents as rich progress bars (one per stage) and notices on stderr."""

    def __init__(self, console: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._console = console
        self._progress = Progress(
            TextColumn("{task.description:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        if event.message:
            self._console.print(f"[dim]{escape(event.stage)}:[/] {escape(event.message)}", highlight=False)
        if event.total is None and not event.completed:
            return
        task = self._tasks.get(event.stage)
        if task is None:
            task = self._tasks[event.stage] = self._progress.add_task(event.stage, total=event.total)
        self._progress.update(task, completed=event.completed, total=event.total)


class _Quiet:
    """A progress context that shows nothing (machine-readable output, or not a terminal)."""

    def __enter__(self) -> ProgressCallback:
        return no_progress

    def __exit__(self, *exc: object) -> None:
        return None


def progress_for(show: bool) -> RichProgress | _Quiet:
    """A rich progress display on stderr when ``show``, else a silent one."""
    return RichProgress(stderr) if show else _Quiet()


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"auditor {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")
    ] = None,
) -> None:
    """auditor: audit a repository with a long-context model, or statically without one.

    Option defaults can come from auditor.toml or [tool.auditor] in pyproject.toml (found
    from the working directory upward); flags on the command line win.
    """
    from auditor.config import load_project_config

    group = ctx.command
    commands = {
        name: frozenset(param.name for param in command.params if param.name)
        for name, command in getattr(group, "commands", {}).items()
    }
    try:
        project = load_project_config(Path.cwd(), commands)
    except AuditorError as error:
        stderr.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    if project.defaults:
        ctx.default_map = {name: dict(values) for name, values in project.defaults.items()}
    from rich.logging import RichHandler

    # Core modules log warnings (e.g. an unwritable cache); show them once, through rich.
    logging.basicConfig(
        level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=stderr, show_time=False, show_path=False)]
    )


def _render_rich(renderable: object, width: int | None) -> str:
    """Render a rich object to text: for the terminal at its width, for a file at a fixed width."""
    console = Console(file=io.StringIO(), width=width or Console().width, force_terminal=width is None and sys.stdout.isatty())
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


@app.command()
@_exit_on_error
def pack(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to pack.")],
    rule: RuleOption = [],
    max_model_len: MaxModelLenOption = DEFAULT_MAX_MODEL_LEN,
    output_tokens: OutputTokensOption = DEFAULT_OUTPUT_TOKENS,
    tokenizer: TokenizerOption = None,
    model: ModelOption = None,
    thinking: ThinkingOption = True,
    include: IncludeOption = [],
    exclude: ExcludeOption = [],
    max_file_bytes: MaxFileBytesOption = DEFAULT_MAX_FILE_BYTES,
    max_windows: MaxWindowsOption = DEFAULT_MAX_WINDOWS,
    format: Annotated[str, typer.Option("--format", "-f", help="text | json | prompt")] = "text",
    window: Annotated[int, typer.Option("--window", "-w", min=0, help="Window shown by --format prompt.")] = 0,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Pack a repository into exact-token windows for the model and report what went where."""
    from auditor.manifest import manifest_json, pack_tables
    from auditor.pack import DEFAULT_PROBE_RESERVE_TOKENS, PackOptions
    from auditor.pipeline import pack_prepared, prepare_repository
    from auditor.rules import load_rules
    from auditor.tokens import TokenizerRequest, load_tokenizer, with_count_cache
    from auditor.walk import WalkOptions

    if format not in ("text", "json", "prompt"):
        raise UsageError(f"--format must be text, json or prompt, not {format!r}")
    rules = load_rules(rule)
    options = PackOptions(
        max_model_len=max_model_len,
        output_tokens=output_tokens,
        probe_reserve_tokens=DEFAULT_PROBE_RESERVE_TOKENS,
        thinking=thinking,
        max_windows=max_windows,
    )
    walk_options = WalkOptions(include=tuple(include), exclude=tuple(exclude), max_file_bytes=max_file_bytes)
    with progress_for(format != "json" and stderr.is_terminal) as report:
        loaded = load_tokenizer(TokenizerRequest(tokenizer=tokenizer, model=model))
        if not loaded.info.exact:
            stderr.print(f"[yellow]warning:[/] {escape(loaded.info.describe())}", highlight=False)
        if not no_cache:
            loaded = with_count_cache(loaded, scope=str(path.resolve()))
        prepared = prepare_repository(
            path, walk_options, use_cache=not no_cache, progress=report, on_change=loaded.preload
        )
        result = pack_prepared(prepared, rules=rules, tokenizer=loaded, options=options, progress=report)
    if format == "json":
        write_output(manifest_json(result, prepared.walk), output)
    elif format == "prompt":
        if window >= len(result.windows):
            raise UsageError(f"--window {window}: the pack has {len(result.windows)} window(s)")
        write_output(result.windows[window].prompt, output)
    else:
        write_output(_render_rich(pack_tables(result, prepared.walk), width=None if output is None else 120), output)


@app.command()
@_exit_on_error
def scan(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) to audit.")],
    rule: RuleOption = [],
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
    format: ReportFormatOption = "text",
    output: ReportOutputOption = None,
    json_output: JsonOutputOption = None,
    sarif_output: SarifOutputOption = None,
    markdown_output: MarkdownOutputOption = None,
    error: ErrorOption = False,
    probes: ProbesOption = DEFAULT_PROBES,
    recall_threshold: RecallThresholdOption = DEFAULT_RECALL_THRESHOLD,
    baseline: BaselineOption = None,
    write_baseline: Annotated[Optional[Path], typer.Option("--write-baseline", help="Write this scan's findings as a baseline file.")] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Audit a repository for the selected rules (all built-in rules by default)."""
    from auditor.commands.options import scan_config_from_flags
    from auditor.report import render
    from auditor.scan import failed_result, run_scan

    if format not in REPORT_FORMATS:
        raise UsageError(f"--format must be one of {', '.join(REPORT_FORMATS)}, not {format!r}")
    config = scan_config_from_flags(
        path, rule=rule, engine=engine, model=model, tokenizer=tokenizer, base_url=base_url, api_key=api_key,
        replay=replay, max_model_len=max_model_len, output_tokens=output_tokens,
        max_num_batched_tokens=max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, tensor_parallel_size=tensor_parallel_size, prefix_caching=not no_prefix_caching,
        temperature=temperature, seed=seed,
        thinking=thinking, thinking_token_budget=thinking_token_budget, timeout=timeout, retries=retries,
        include=include, exclude=exclude, max_file_bytes=max_file_bytes, max_windows=max_windows, static=static,
        no_cache=no_cache, probes=probes, recall_threshold=recall_threshold, baseline=baseline,
    )
    requested = {"json": json_output, "sarif": sarif_output, "markdown": markdown_output}
    try:
        with progress_for(format == "text" and stderr.is_terminal) as report:
            result = run_scan(config, report)
    except AuditorError as failure:
        # CI uploads the SARIF/JSON even when the scan could not run: write the error there.
        failed = failed_result(config, failure)
        for extra_format, extra_path in requested.items():
            if extra_path is not None:
                write_output(render(failed, extra_format), extra_path)
        if output is not None:
            write_output(render(failed, format), output)
        raise
    if write_baseline is not None:
        from auditor.suppress import write_baseline as save_baseline

        kept_by_baseline = [s.finding for s in result.suppressed if s.source == "baseline"]
        written = save_baseline(write_baseline, [*result.findings, *kept_by_baseline])
        stderr.print(f"baseline: {len(written.entries)} finding(s) written to {write_baseline}", highlight=False, markup=False)
    for notice in result.notices:
        stderr.print(f"[yellow]notice:[/] {escape(notice)}", highlight=False)
    for extra_format, extra_path in requested.items():
        if extra_path is not None:
            write_output(render(result, extra_format), extra_path)
    write_output(render(result, format), output)
    exit_for(result, blocking=len(result.findings), error=error, console=stderr)


@app.command("rules")
@_exit_on_error
def list_rules() -> None:
    """List the built-in rules."""
    from rich.table import Table

    from auditor.rules import builtin_rules

    table = Table(title="Built-in rules")
    table.add_column("id", no_wrap=True)
    for column in ("severity", "languages", "title"):
        table.add_column(column)
    for rule in builtin_rules().values():
        table.add_row(rule.id, rule.severity, ", ".join(rule.languages), rule.title)
    Console().print(table)


from auditor.commands.plan import doctor_command, plan_command  # noqa: E402  (registered below)
from auditor.commands.probe import probe_command  # noqa: E402
from auditor.commands.many import scan_many_command  # noqa: E402
from auditor.commands.review import review_command  # noqa: E402

app.command("plan")(_exit_on_error(plan_command))
app.command("doctor")(_exit_on_error(doctor_command))
app.command("probe")(_exit_on_error(probe_command))
app.command("review")(_exit_on_error(review_command))
app.command("scan-many")(_exit_on_error(scan_many_command))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
