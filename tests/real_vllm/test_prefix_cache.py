"""Prefix-cache accounting (``num_cached_tokens``) through ``--engine vllm``, with a tiny Qwen2.

NemotronH cannot take prefix caching on vLLM's CPU backend (the engine dies on the first
prefill over 128 tokens), so the accounting is checked on an attention-only model: a second
scan of the same repository finds its windows' prompts in the cache, and the report says
how many tokens were served from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.real_vllm.conftest import MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, OUTPUT_TOKENS, run_cli

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REPO_ROOT / "fixtures" / "flask_ledger"
RULE = "tx-outside-transaction"


def scan(model: Path, tmp_path: Path) -> dict[str, Any]:
    return run_cli(
        "scan", str(FIXTURE), "--rule", RULE, "--engine", "vllm", "--model", str(model),
        "--max-model-len", str(MAX_MODEL_LEN), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
        "--output-tokens", str(OUTPUT_TOKENS), "--probes", "0", "--no-static", "--no-cache", "--no-thinking",
        tmp_path=tmp_path,
    )


def test_a_repeated_scan_reads_its_prompts_from_the_prefix_cache(
    qwen2_dir: Path, shared_vllm_engine: Any, tmp_path: Path
) -> None:
    first = scan(qwen2_dir, tmp_path)
    second = scan(qwen2_dir, tmp_path)
    for report in (first, second):
        assert report["complete"] is True and report["errors"] == [], report["errors"]
    first_cached = [window["cached_prompt_tokens"] for window in first["windows"]]
    assert all(isinstance(cached, int) for cached in first_cached)
    for window in second["windows"]:
        prompt, cached = window["prompt_tokens"], window["cached_prompt_tokens"]
        # All but the last partial block (and at least the last token) comes from the cache.
        assert prompt // 2 < cached < prompt, window
    assert sum(w["cached_prompt_tokens"] for w in second["windows"]) > sum(first_cached)
