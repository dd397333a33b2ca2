"""The flags ``auditor pack``, ``scan``, ``review`` and ``scan-many`` share, each declared once.

Each flag is an ``Annotated`` alias holding its spellings, limits, environment variable and
help; a command declares ``max_num_batched_tokens: MaxNumBatchedTokensOption =
DEFAULT_MAX_NUM_BATCHED_TOKENS``. typer takes an ``Annotated`` option's default from the
parameter, so the defaults are the constants below, taken from ``EngineSettings`` where the
engine has one. tests/test_cli_flags.py checks that every command spells, limits and
defaults a shared flag the same way.

Building the CLI imports this module, so besides the standard library it imports only
typer and ``auditor.engine.base`` (a leaf of dataclasses). Defaults whose source would pull
in a pipeline stage are restated here and compared with their source by
tests/test_cli_flags.py and tests/test_cli_imports.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from auditor.engine.base import EngineSettings

_ENGINE_DEFAULTS = EngineSettings()

DEFAULT_ENGINE = "auto"
DEFAULT_MAX_MODEL_LEN = _ENGINE_DEFAULTS.max_model_len
DEFAULT_MAX_NUM_BATCHED_TOKENS = _ENGINE_DEFAULTS.max_num_batched_tokens
DEFAULT_GPU_MEMORY_UTILIZATION = _ENGINE_DEFAULTS.gpu_memory_utilization
DEFAULT_MAX_NUM_SEQS = _ENGINE_DEFAULTS.max_num_seqs
DEFAULT_TENSOR_PARALLEL_SIZE = _ENGINE_DEFAULTS.tensor_parallel_size
DEFAULT_TEMPERATURE = _ENGINE_DEFAULTS.temperature
DEFAULT_SEED = _ENGINE_DEFAULTS.seed
DEFAULT_TIMEOUT_S = _ENGINE_DEFAULTS.timeout_s
DEFAULT_RETRIES = _ENGINE_DEFAULTS.retries
# Restated so that building the CLI imports neither auditor.pack, auditor.walk nor
# auditor.canary: auditor.pack.DEFAULT_OUTPUT_TOKENS, WalkOptions().max_file_bytes,
# PackOptions().max_windows, auditor.canary.DEFAULT_CANARIES and DEFAULT_RECALL_THRESHOLD.
DEFAULT_OUTPUT_TOKENS = 32_768
DEFAULT_MAX_FILE_BYTES = 1_000_000
DEFAULT_MAX_WINDOWS = 0
DEFAULT_PROBES = 3
DEFAULT_RECALL_THRESHOLD = 0.8
REPORT_FORMATS = ("text", "json", "sarif", "markdown")

# --- what to audit ---------------------------------------------------------------------

RuleOption = Annotated[list[str], typer.Option("--rule", "-r", help="Rule id or path to a rule file (repeatable).")]
IncludeOption = Annotated[
    list[str], typer.Option("--include", help="Only files matching this gitignore-style glob (repeatable).")
]
ExcludeOption = Annotated[
    list[str], typer.Option("--exclude", help="Skip files matching this gitignore-style glob (repeatable).")
]
MaxFileBytesOption = Annotated[int, typer.Option("--max-file-bytes", min=1, help="Skip files larger than this many bytes.")]
StaticOption = Annotated[
    bool, typer.Option("--static/--no-static", help="Also run the static pass and merge its findings.")
]
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Do not read or write the caches (file index, call graph, token counts, relevance scores, model answers).",
    ),
]

# --- packing ---------------------------------------------------------------------------

MaxModelLenOption = Annotated[int, typer.Option("--max-model-len", min=1024, help="Model context window in tokens.")]
OutputTokensOption = Annotated[
    int, typer.Option("--output-tokens", min=1, help="Tokens reserved for the model's reasoning and answer.")
]
ThinkingOption = Annotated[bool, typer.Option("--thinking/--no-thinking", help="Render the prompt with reasoning on or off.")]
MaxWindowsOption = Annotated[
    int, typer.Option("--max-windows", min=0, help="Stop after this many windows per repository (0: no limit).")
]
TokenizerOption = Annotated[
    str | None, typer.Option("--tokenizer", help="Tokenizer directory (tokenizer.json + chat template).")
]
# ``pack`` uses the model only to find its tokenizer; the engine commands also send it.
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Checkpoint directory or Hugging Face id (local cache).")
]

# --- the engine ------------------------------------------------------------------------

EngineOption = Annotated[
    str, typer.Option("--engine", "-e", help="auto | vllm | openai | replay | static | a plugin's name.")
]
EngineModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", "-m",
        help="Checkpoint directory or Hugging Face id (local cache); with --engine openai, the served model name.",
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option("--base-url", envvar="AUDITOR_BASE_URL", help="OpenAI-compatible server, e.g. http://host:8000/v1."),
]
ApiKeyOption = Annotated[
    str | None, typer.Option("--api-key", envvar="AUDITOR_API_KEY", help="API key for the OpenAI-compatible server(s).")
]
ReplayOption = Annotated[
    str | None,
    typer.Option("--replay", help="Recorded completions (JSONL file or directory) for --engine replay."),
]
# scan-many's request ids name the repository.
ManyReplayOption = Annotated[
    str | None,
    typer.Option("--replay", help="Recorded completions (JSONL file or directory) for --engine replay; ids <repo>/window-<i>."),
]
MaxNumBatchedTokensOption = Annotated[
    int,
    typer.Option("--max-num-batched-tokens", min=1, help="vLLM chunked-prefill chunk size (tokens per prefill step)."),
]
GpuMemoryUtilizationOption = Annotated[
    float, typer.Option("--gpu-memory-utilization", min=0.05, max=1.0, help="Fraction of GPU memory vLLM may use.")
]
MaxNumSeqsOption = Annotated[int, typer.Option("--max-num-seqs", min=1, help="Sequences vLLM runs at once.")]
TensorParallelSizeOption = Annotated[
    int, typer.Option("--tensor-parallel-size", min=1, help="GPUs one vLLM engine spans (tensor parallelism).")
]
NoPrefixCachingOption = Annotated[
    bool,
    typer.Option(
        "--no-prefix-caching",
        help="Turn vLLM's prefix caching off (it breaks on some backends, e.g. NemotronH on vLLM's CPU build).",
    ),
]
TemperatureOption = Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy).")]
SeedOption = Annotated[int, typer.Option("--seed", help="Sampling seed.")]
ThinkingTokenBudgetOption = Annotated[
    int | None,
    typer.Option("--thinking-token-budget", min=1, help="Cap on reasoning tokens per answer (default: no cap)."),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout", min=1.0,
        help="Seconds per request to an OpenAI-compatible server (a 256K prefill takes minutes).",
    ),
]
RetriesOption = Annotated[int, typer.Option("--retries", min=0, help="Extra attempts after a transient server error.")]

# --- canaries and suppression ----------------------------------------------------------

ProbesOption = Annotated[
    int, typer.Option("--probes", min=0, max=8, help="Recall canaries planted per window (0 disables).")
]
RecallThresholdOption = Annotated[
    float,
    typer.Option(
        "--recall-threshold", min=0.0, max=1.0, help="Canary recall below this marks a window recall-degraded."
    ),
]
BaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--baseline", help="Suppress the findings listed in this baseline file (auditor scan --write-baseline)."
    ),
]

# --- reports ---------------------------------------------------------------------------

ReportFormatOption = Annotated[str, typer.Option("--format", "-f", help=" | ".join(REPORT_FORMATS))]
ReportOutputOption = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write the report here instead of stdout.")
]
JsonOutputOption = Annotated[Path | None, typer.Option("--json-output", help="Also write a JSON report here.")]
SarifOutputOption = Annotated[Path | None, typer.Option("--sarif-output", help="Also write a SARIF report here.")]
MarkdownOutputOption = Annotated[
    Path | None, typer.Option("--markdown-output", help="Also write a Markdown report here.")
]
# In review the Markdown report is the pull-request comment.
ReviewMarkdownOutputOption = Annotated[
    Path | None, typer.Option("--markdown-output", help="Also write the PR comment (Markdown) here.")
]
ErrorOption = Annotated[bool, typer.Option("--error", help="Exit 1 when there are findings.")]
ReviewErrorOption = Annotated[bool, typer.Option("--error", help="Exit 1 when there are new findings on the change.")]
