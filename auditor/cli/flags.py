"""The options ``pack``, ``scan``, ``review``, ``scan-many`` and ``probe`` share, each declared once.

Every shared option is declared once below (spellings, limits, environment variable, help
and its ``--help`` panel) and belongs to a group: files, window and packing, engine,
recall, cache, output. A command takes the groups it needs with ``@shared_options(...)``
and receives their values as one frozen ``ScanFlags`` record; ``auditor.cli.options``
turns that record into the one ``ScanConfig`` every scan-like command runs with. So a flag
has one spelling, one default and one meaning wherever it appears.

Building the CLI imports this module, so besides the standard library it imports only
typer, ``auditor.engine.base`` (a leaf of dataclasses) and the leaves ``auditor.defaults``,
``auditor.rules.severity`` and ``auditor.report`` (the format names): the option defaults
are the stages' own, read from ``auditor.defaults`` without loading a stage.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Callable, TypeVar

import typer

from auditor import defaults
from auditor.engine.base import EngineSettings
from auditor.errors import UsageError
from auditor.report import Format
from auditor.rules.severity import Severity

_ENGINE_DEFAULTS = EngineSettings()


# --help panels, so a user without a GPU sees at once which options concern them.
FILES_PANEL = "Files"
WINDOW_PANEL = "Window and packing"
ENGINE_PANEL = "Engine"
RECALL_PANEL = "Recall canaries"
OUTPUT_PANEL = "Output"
CACHE_PANEL = "Cache"


# The ``--min-severity`` choices: every severity but info (the static pass grades none
# info), most severe first.
MinSeverity = StrEnum("MinSeverity", [(severity.name, severity.value) for severity in Severity if severity is not Severity.INFO])


@dataclass(frozen=True)
class ScanFlags:
    """The values of the shared options a command was given (defaults for groups it lacks)."""

    # files
    rule: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_bytes: int = defaults.MAX_FILE_BYTES
    parse_budget: float = defaults.PARSE_BUDGET_S
    file_deadline: float = defaults.FILE_DEADLINE_S
    include_tests: bool = False
    min_severity: MinSeverity = MinSeverity.HIGH
    static: bool = True
    baseline: Path | None = None
    tx_models: tuple[Path, ...] = ()
    # window and packing
    model: str | None = None
    tokenizer: str | None = None
    max_model_len: int = _ENGINE_DEFAULTS.max_model_len
    output_tokens: int = defaults.OUTPUT_TOKENS
    thinking: bool = True
    max_windows: int = defaults.MAX_WINDOWS
    max_token_ratio: float = 0.0
    # engine
    engine: str = "auto"
    base_url: str | None = None
    api_key: str | None = None
    replay: str | None = None
    max_num_batched_tokens: int = _ENGINE_DEFAULTS.max_num_batched_tokens
    gpu_memory_utilization: float = _ENGINE_DEFAULTS.gpu_memory_utilization
    max_num_seqs: int = _ENGINE_DEFAULTS.max_num_seqs
    tensor_parallel_size: int = _ENGINE_DEFAULTS.tensor_parallel_size
    no_prefix_caching: bool = not _ENGINE_DEFAULTS.enable_prefix_caching
    temperature: float = _ENGINE_DEFAULTS.temperature
    seed: int = _ENGINE_DEFAULTS.seed
    thinking_token_budget: int | None = _ENGINE_DEFAULTS.thinking_token_budget
    timeout: float = _ENGINE_DEFAULTS.timeout_s
    retries: int = _ENGINE_DEFAULTS.retries
    # recall
    probes: int = defaults.CANARIES
    recall_threshold: float = defaults.RECALL_THRESHOLD
    # cache
    no_cache: bool = False
    # output
    format: str = Format.TEXT.value
    output: Path | None = None
    json_output: Path | None = None
    sarif_output: Path | None = None
    markdown_output: Path | None = None

    def report_format(self) -> Format:
        """The ``--format`` asked for; a name that is no format is a UsageError listing them."""
        try:
            return Format(self.format)
        except ValueError:
            raise UsageError(f"--format must be one of {', '.join(Format)}, not {self.format!r}") from None

    def requested_outputs(self) -> dict[Format, Path]:
        """The extra report files asked for (``--json-output`` and the like), by format."""
        wanted = {Format.JSON: self.json_output, Format.SARIF: self.sarif_output, Format.MARKDOWN: self.markdown_output}
        return {name: path for name, path in wanted.items() if path is not None}


def _option(*spellings: str, panel: str, **settings: Any) -> Any:
    return typer.Option(*spellings, rich_help_panel=panel, **settings)


# One row per shared option: (parameter name, annotation, group). The default is the
# ScanFlags field's, so it is written once.
_FILES = "files"
_WINDOW = "window"
_ENGINE = "engine"
_RECALL = "recall"
_CACHE = "cache"
_OUTPUT = "output"

_SHARED: tuple[tuple[str, Any, str], ...] = (
    ("rule", Annotated[list[str], _option("--rule", "-r", panel=FILES_PANEL, help="Rule id or path to a rule file (repeatable).")], _FILES),
    ("include", Annotated[list[str], _option("--include", panel=FILES_PANEL, help="Only files matching this gitignore-style glob, relative to PATH (repeatable).")], _FILES),
    ("exclude", Annotated[list[str], _option("--exclude", panel=FILES_PANEL, help="Skip files matching this gitignore-style glob, relative to PATH (repeatable).")], _FILES),
    ("max_file_bytes", Annotated[int, _option("--max-file-bytes", min=1, panel=FILES_PANEL, help="Skip files larger than this many bytes.")], _FILES),
    ("include_tests", Annotated[bool, _option("--include-tests", panel=FILES_PANEL, help="Audit test code, fixtures and dev-data commands too (left out of the pack and not entry points by default; always listed).")], _FILES),
    ("min_severity", Annotated[MinSeverity, _option("--min-severity", case_sensitive=False, panel=OUTPUT_PANEL, help="Lowest severity of static findings to report (low adds single autocommit writes).")], _FILES),
    ("parse_budget", Annotated[float, _option("--parse-budget", min=0.0, panel=FILES_PANEL, help="Seconds one file's indexing may take before it is skipped and listed as not audited (0: no limit).")], _FILES),
    ("file_deadline", Annotated[float, _option("--file-deadline", min=0.0, panel=FILES_PANEL, help="Seconds reading and classifying one file may take before it is skipped and listed as not audited (0: no limit).")], _FILES),
    ("model", Annotated[str | None, _option("--model", "-m", panel=WINDOW_PANEL, help="Checkpoint directory or Hugging Face id (local cache): its tokenizer counts the window; engines load it (with --engine openai, the served model name).")], _WINDOW),
    ("tokenizer", Annotated[str | None, _option("--tokenizer", panel=WINDOW_PANEL, help="Tokenizer directory (tokenizer.json + chat template).")], _WINDOW),
    ("max_model_len", Annotated[int, _option("--max-model-len", min=1024, panel=WINDOW_PANEL, help="Model context window in tokens.")], _WINDOW),
    ("output_tokens", Annotated[int, _option("--output-tokens", min=1, panel=WINDOW_PANEL, help="Tokens reserved for the model's reasoning and answer.")], _WINDOW),
    ("thinking", Annotated[bool, _option("--thinking/--no-thinking", panel=WINDOW_PANEL, help="Render the prompt with reasoning on or off.")], _WINDOW),
    ("max_windows", Annotated[int, _option("--max-windows", min=0, panel=WINDOW_PANEL, help="Send at most this many windows per repository (0: no limit); a capped scan is partial.")], _WINDOW),
    ("max_token_ratio", Annotated[float, _option("--max-token-ratio", min=0.0, panel=WINDOW_PANEL, help="Stop before sending anything when the planned prompt tokens exceed this many times the tokens of the code audited (0: a notice above 3x, never a stop).")], _WINDOW),
    ("engine", Annotated[str, _option("--engine", "-e", panel=ENGINE_PANEL, help="auto | vllm | openai | replay | static | a plugin's name.")], _ENGINE),
    ("static", Annotated[bool, _option("--static/--no-static", panel=ENGINE_PANEL, help="Also run the static pass and merge its findings.")], _ENGINE),
    ("base_url", Annotated[str | None, _option("--base-url", envvar="AUDITOR_BASE_URL", panel=ENGINE_PANEL, help="OpenAI-compatible server, e.g. http://host:8000/v1.")], _ENGINE),
    ("api_key", Annotated[str | None, _option("--api-key", envvar="AUDITOR_API_KEY", panel=ENGINE_PANEL, help="API key for the OpenAI-compatible server(s).")], _ENGINE),
    ("replay", Annotated[str | None, _option("--replay", panel=ENGINE_PANEL, help="Recorded completions (JSONL file or directory) for --engine replay.")], _ENGINE),
    ("max_num_batched_tokens", Annotated[int, _option("--max-num-batched-tokens", min=1, panel=ENGINE_PANEL, help="vLLM chunked-prefill chunk size (tokens per prefill step).")], _ENGINE),
    ("gpu_memory_utilization", Annotated[float, _option("--gpu-memory-utilization", min=0.05, max=1.0, panel=ENGINE_PANEL, help="Fraction of GPU memory vLLM may use.")], _ENGINE),
    ("max_num_seqs", Annotated[int, _option("--max-num-seqs", min=1, panel=ENGINE_PANEL, help="Sequences vLLM runs at once.")], _ENGINE),
    ("tensor_parallel_size", Annotated[int, _option("--tensor-parallel-size", min=1, panel=ENGINE_PANEL, help="GPUs one vLLM engine spans (tensor parallelism).")], _ENGINE),
    ("no_prefix_caching", Annotated[bool, _option("--no-prefix-caching", panel=ENGINE_PANEL, help="Turn vLLM's prefix caching off (results never depend on it; it breaks on some backends, e.g. NemotronH on vLLM's CPU build).")], _ENGINE),
    ("temperature", Annotated[float, _option("--temperature", min=0.0, panel=ENGINE_PANEL, help="Sampling temperature (0: greedy).")], _ENGINE),
    ("seed", Annotated[int, _option("--seed", panel=ENGINE_PANEL, help="Sampling seed.")], _ENGINE),
    ("thinking_token_budget", Annotated[int | None, _option("--thinking-token-budget", min=1, panel=ENGINE_PANEL, help="Cap on reasoning tokens per answer (default: no cap).")], _ENGINE),
    ("timeout", Annotated[float, _option("--timeout", min=1.0, panel=ENGINE_PANEL, help="Wall-clock deadline in seconds for each request to an OpenAI-compatible server, retries included (a 256K prefill takes minutes).")], _ENGINE),
    ("retries", Annotated[int, _option("--retries", min=0, panel=ENGINE_PANEL, help="Extra attempts after a transient server error.")], _ENGINE),
    ("probes", Annotated[int, _option("--probes", min=0, max=8, panel=RECALL_PANEL, help="Recall canaries planted per window (0 disables).")], _RECALL),
    ("recall_threshold", Annotated[float, _option("--recall-threshold", min=0.0, max=1.0, panel=RECALL_PANEL, help="Canary recall below this marks a window recall-degraded.")], _RECALL),
    ("tx_models", Annotated[list[Path], _option("--tx-models", panel=FILES_PANEL, help="A transaction-models file with the project's own boundary helpers, writes and signals (repeatable; relative to the repository; docs/tx-models.md).")], _FILES),
    ("baseline", Annotated[Path | None, _option("--baseline", panel=OUTPUT_PANEL, help="Suppress the findings listed in this baseline file (auditor scan --write-baseline).")], _OUTPUT),
    ("format", Annotated[str, _option("--format", "-f", panel=OUTPUT_PANEL, help=" | ".join(Format))], _OUTPUT),
    ("output", Annotated[Path | None, _option("--output", "-o", panel=OUTPUT_PANEL, help="Write the report here instead of stdout.")], _OUTPUT),
    ("json_output", Annotated[Path | None, _option("--json-output", panel=OUTPUT_PANEL, help="Also write a JSON report here.")], _OUTPUT),
    ("sarif_output", Annotated[Path | None, _option("--sarif-output", panel=OUTPUT_PANEL, help="Also write a SARIF report here.")], _OUTPUT),
    ("markdown_output", Annotated[Path | None, _option("--markdown-output", panel=OUTPUT_PANEL, help="Also write a Markdown report (in review: the PR comment) here.")], _OUTPUT),
    ("no_cache", Annotated[bool, _option("--no-cache", panel=CACHE_PANEL, help="Do not read or write the caches (file index, call graph, static analysis, token counts, relevance scores, model answers).")], _CACHE),
)

FILES = _FILES
WINDOW = _WINDOW
ENGINE = _ENGINE
RECALL = _RECALL
CACHE = _CACHE
OUTPUT = _OUTPUT
GROUPS = (FILES, WINDOW, ENGINE, RECALL, CACHE, OUTPUT)

_DEFAULTS = {f.name: f.default for f in fields(ScanFlags)}

F = TypeVar("F", bound=Callable[..., object])


def shared_option_names(*groups: str) -> tuple[str, ...]:
    """The parameter names of the shared options in ``groups``, in declaration order."""
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown option groups: {sorted(unknown)}")
    return tuple(name for name, _, group in _SHARED if group in groups)


def shared_options(*groups: str, exclude: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Give a command the shared options of ``groups`` (less ``exclude``); it receives them as
    ``flags: ScanFlags``. Its own parameters keep their place before the shared ones."""
    names = [name for name in shared_option_names(*groups) if name not in exclude]

    def decorate(command: F) -> F:
        own = inspect.signature(command, eval_str=True)
        if "flags" not in own.parameters:
            raise TypeError(f"{command.__name__} must take a keyword-only 'flags' parameter")
        kept = [p for p in own.parameters.values() if p.name != "flags"]
        declared = {name: annotation for name, annotation, _ in _SHARED}
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=_typer_default(name), annotation=declared[name])
            for name in names
        ]
        # Arguments first, then the command's options in panels of its own (review's
        # "Change under review": --help shows what the command is about first), then the
        # shared options, then the command's options in shared panels.
        positional = [p for p in kept if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p for p in kept if p.kind is inspect.Parameter.KEYWORD_ONLY]
        shared_panels = {_panel_of(p.annotation) for p in shared}
        leading = [p for p in keyword if _panel_of(p.annotation) not in shared_panels]
        trailing = [p for p in keyword if _panel_of(p.annotation) in shared_panels]
        # typer sees keyword-only parameters with and without defaults alike.
        parameters = positional + leading + shared + trailing

        @functools.wraps(command)
        def wrapper(*args: object, **kwargs: object) -> object:
            values = {name: kwargs.pop(name) for name in names if name in kwargs}
            return command(*args, flags=_flags(values), **kwargs)

        wrapper.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        del wrapper.__wrapped__  # typer must read the signature above, not the command's
        return wrapper  # type: ignore[return-value]

    return decorate


def _panel_of(annotation: Any) -> str | None:
    """The ``--help`` panel an ``Annotated[..., typer.Option(...)]`` parameter is shown in."""
    for info in getattr(annotation, "__metadata__", ()):
        panel = getattr(info, "rich_help_panel", None)
        if panel is not None:
            return panel
    return None


def _typer_default(name: str) -> Any:
    """A list option's default is a list for typer; ScanFlags keeps tuples."""
    default = _DEFAULTS[name]
    return list(default) if isinstance(default, tuple) else default


def _flags(values: dict[str, Any]) -> ScanFlags:
    converted = {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}
    return ScanFlags(**converted)
