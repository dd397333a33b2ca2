"""The one mapping from the shared options (``ScanFlags``) to the core's frozen configuration:
``engine_settings`` for anything that starts an engine, ``scan_config`` for every scan-like
command (scan, review, scan-many). Each flag sets exactly one field."""

from __future__ import annotations

from pathlib import Path

from auditor.cli.flags import ScanFlags
from auditor.engine.base import EngineSettings
from auditor.config.scan import ScanConfig, WindowOptions
from auditor.rules.severity import Severity
from auditor.walk.walker import WalkOptions


def engine_settings(flags: ScanFlags, *, max_model_len: int | None = None) -> EngineSettings:
    """The engine's settings; ``max_model_len`` overrides the flag (probe sizes it to its grid)."""
    return EngineSettings(
        model=flags.model,
        max_model_len=flags.max_model_len if max_model_len is None else max_model_len,
        max_num_batched_tokens=flags.max_num_batched_tokens,
        gpu_memory_utilization=flags.gpu_memory_utilization,
        max_num_seqs=flags.max_num_seqs,
        tensor_parallel_size=flags.tensor_parallel_size,
        enable_prefix_caching=not flags.no_prefix_caching,
        temperature=flags.temperature,
        seed=flags.seed,
        thinking_token_budget=flags.thinking_token_budget,
        base_url=flags.base_url,
        api_key=flags.api_key,
        replay_path=flags.replay,
        timeout_s=flags.timeout,
        retries=flags.retries,
    )


def window_options(flags: ScanFlags) -> WindowOptions:
    """How windows are cut and rendered."""
    return WindowOptions(
        output_tokens=flags.output_tokens, thinking=flags.thinking, max_windows=flags.max_windows,
        max_token_ratio=flags.max_token_ratio,
    )


def walk_options(flags: ScanFlags) -> WalkOptions:
    """Which files the walk keeps."""
    return WalkOptions(include=flags.include, exclude=flags.exclude, max_file_bytes=flags.max_file_bytes,
                       file_deadline_s=flags.file_deadline or None)


def scan_config(path: Path, flags: ScanFlags) -> ScanConfig:
    """The frozen ScanConfig for a command's options (the same mapping for every command)."""
    return ScanConfig(
        root=path,
        rules=flags.rule,
        engine=flags.engine,
        engine_settings=engine_settings(flags),
        tokenizer=flags.tokenizer,
        window=window_options(flags),
        walk=walk_options(flags),
        parse_budget_s=flags.parse_budget or None,
        use_cache=not flags.no_cache,
        static=flags.static,
        min_severity=Severity(flags.min_severity),
        include_tests=flags.include_tests,
        probes=flags.probes,
        recall_threshold=flags.recall_threshold,
        baseline=flags.baseline,
        tx_models=tuple(flags.tx_models),
    )
