"""The scan configuration that ``scan``, ``review`` and ``scan-many`` build from the same flags, in one place."""

from __future__ import annotations

from pathlib import Path

from auditor.engine.base import EngineSettings
from auditor.pack import DEFAULT_PROBE_RESERVE_TOKENS, PackOptions
from auditor.scan import ScanConfig
from auditor.tokens import TokenizerRequest
from auditor.walk import WalkOptions

_ENGINE_DEFAULTS = EngineSettings()


def scan_config_from_flags(
    path: Path,
    *,
    rule: list[str],
    engine: str,
    model: str | None,
    tokenizer: str | None,
    base_url: str | None,
    api_key: str | None,
    replay: str | None,
    max_model_len: int,
    output_tokens: int,
    max_num_batched_tokens: int,
    gpu_memory_utilization: float,
    max_num_seqs: int,
    temperature: float,
    seed: int,
    thinking: bool,
    thinking_token_budget: int | None,
    include: list[str],
    exclude: list[str],
    static: bool,
    no_cache: bool,
    probes: int,
    recall_threshold: float,
    tensor_parallel_size: int = _ENGINE_DEFAULTS.tensor_parallel_size,
    prefix_caching: bool = _ENGINE_DEFAULTS.enable_prefix_caching,
    timeout: float = _ENGINE_DEFAULTS.timeout_s,
    retries: int = _ENGINE_DEFAULTS.retries,
    max_file_bytes: int = WalkOptions().max_file_bytes,
    max_windows: int = 0,
    baseline: Path | None = None,
) -> ScanConfig:
    """The frozen ScanConfig for a command's flags (the same mapping for every command)."""
    return ScanConfig(
        root=path,
        rules=tuple(rule),
        engine=engine,
        engine_settings=EngineSettings(
            model=model, max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
            gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
            tensor_parallel_size=tensor_parallel_size, temperature=temperature, seed=seed,
            thinking_token_budget=thinking_token_budget, base_url=base_url, api_key=api_key, replay_path=replay,
            timeout_s=timeout, retries=retries, enable_prefix_caching=prefix_caching,
        ),
        tokenizer=TokenizerRequest(tokenizer=tokenizer, model=model),
        pack=PackOptions(max_model_len=max_model_len, output_tokens=output_tokens,
                         probe_reserve_tokens=DEFAULT_PROBE_RESERVE_TOKENS, thinking=thinking, max_windows=max_windows),
        walk=WalkOptions(include=tuple(include), exclude=tuple(exclude), max_file_bytes=max_file_bytes),
        use_cache=not no_cache,
        static=static,
        probes=probes,
        recall_threshold=recall_threshold,
        baseline=baseline,
    )
