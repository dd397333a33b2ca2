"""The engine stage's contract: chat requests in, completions out.

An engine takes a batch of ``ChatRequest`` (one per packed window) and returns one
``Completion`` per request, in request order. Engines differ in where the model runs
(in-process vLLM, an OpenAI-compatible server, recorded outputs) but never in this
contract: a request the engine could not complete still gets a ``Completion`` whose
``finish_reason`` is ``"error"`` and whose ``error`` says why, so nothing is dropped
silently. Only a failure that makes the whole engine unusable (no GPU, server down)
raises ``auditor.errors.EngineUnavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from auditor import defaults
from auditor.progress import ProgressCallback, no_progress


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a chat conversation (``role`` is "system", "user" or "assistant")."""

    role: str
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One conversation to complete.

    ``prompt_tokens`` is the auditor's own count of the rendered chat template (0 when
    unknown); ``max_tokens`` is the completion budget, reasoning and answer together;
    ``json_schema`` is the JSON text of the answer schema for structured output.
    """

    id: str
    messages: tuple[ChatMessage, ...]
    prompt_tokens: int
    max_tokens: int
    thinking: bool = True
    json_schema: str | None = None


@dataclass(frozen=True)
class Completion:
    """The engine's answer to one ``ChatRequest``.

    ``text`` is the answer only; ``reasoning`` the trace ("" when none). ``finish_reason``
    is "stop", "length", "abort", "error" or another engine-reported reason; ``error``
    explains a request the engine could not complete.
    """

    request_id: str
    text: str
    reasoning: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class EngineSettings:
    """Everything an engine needs to start, resolved once from flags and configuration.

    ``max_num_batched_tokens`` is vLLM's chunked-prefill chunk size (8,192 by default, as
    ``auditor plan`` recommends: a 262K-token window prefills in 32 steps). ``kv_cache_dtype`` None means "decide from
    the checkpoint": "fp8" for FP8/NVFP4 checkpoints, "auto" for BF16. ``timeout_s`` is
    per HTTP request and generous because a 256K-token prefill takes minutes; ``retries``
    counts extra attempts after a transient failure. ``enforce_eager`` skips vLLM's graph
    capture and compilation (a faster start for tests on a CPU build; slower generation).
    """

    model: str | None = None
    max_model_len: int = defaults.MAX_MODEL_LEN
    max_num_batched_tokens: int = defaults.MAX_NUM_BATCHED_TOKENS
    gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION
    max_num_seqs: int = defaults.MAX_NUM_SEQS
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    kv_cache_dtype: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    thinking_token_budget: int | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 900.0
    retries: int = 2
    replay_path: str | None = None


@runtime_checkable
class Engine(Protocol):
    """Something that turns chat requests into completions."""

    name: str

    def identity(self) -> str:
        """A stable string naming the model and every setting that changes its outputs."""
        ...

    def generate(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress
    ) -> list[Completion]:
        """One completion per request, in the order of ``requests``."""
        ...


class EngineCancelled(KeyboardInterrupt):
    """``generate`` was abandoned mid-batch (``cancel()`` or Ctrl-C): no completion is returned,
    so nothing half-done reaches the result cache. A ``KeyboardInterrupt``, so a run stops
    the way Ctrl-C stops it (exit 130 at the CLI boundary) and ``except Exception`` never
    swallows it."""


@runtime_checkable
class CancellableEngine(Engine, Protocol):
    """An engine whose requests in flight can be abandoned from another thread."""

    def cancel(self) -> None:
        """Abandon every request in flight now; ``generate`` then raises ``EngineCancelled``."""
        ...


def error_completion(request: ChatRequest, message: str) -> Completion:
    """A completion recording that ``request`` could not be completed, and why."""
    return Completion(
        request_id=request.id,
        text="",
        reasoning="",
        finish_reason="error",
        prompt_tokens=request.prompt_tokens,
        completion_tokens=0,
        error=message,
    )
