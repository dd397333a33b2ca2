"""``auditor pack`` previews the GPU bill exactly: for each window, the prompt token count a real
vLLM (CPU build, tiny random NemotronH) reports equals ``pack``'s ``prompt_tokens``, with the
static candidates listed and the recall canaries planted as ``auditor scan`` sends them.

Both commands run with the same options (all defaults but the window, the engine and the
cache); ``pack`` plans through the scan's own ``plan_windows``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditor.errors import ExitCode
from tests.real_vllm.conftest import MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, OUTPUT_TOKENS, run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RULE = "tx-outside-transaction"
# The window and the rule as a user would give both commands (the tiny checkpoint has 8,192 positions).
SHARED = ("--rule", RULE, "--max-model-len", str(MAX_MODEL_LEN), "--output-tokens", str(OUTPUT_TOKENS),
          "--no-thinking", "--no-cache")


@pytest.mark.parametrize("fixture", ["django_shop", "flask_ledger"])
def test_vllm_counts_each_window_as_pack_does(
    nemotron_h_dir: Path, shared_vllm_engine: Any, tmp_path: Path, fixture: str
) -> None:
    root = str(FIXTURES / fixture)
    manifest = run_cli("pack", root, "--model", str(nemotron_h_dir), *SHARED, tmp_path=tmp_path)
    report = run_cli(
        "scan", root, "--engine", "vllm", "--model", str(nemotron_h_dir), *SHARED,
        "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS), "--no-prefix-caching",
        # Random weights answer nothing useful: findings, a degraded recall or a cut answer are fine here.
        tmp_path=tmp_path,
        exit_codes=(ExitCode.OK, ExitCode.FINDINGS, ExitCode.INCOMPLETE, ExitCode.RECALL_DEGRADED),
    )
    assert report["engine"] == "vllm"
    windows = report["windows"]
    assert len(windows) == len(manifest["windows"]) > 1
    for sent, packed in zip(windows, manifest["windows"]):
        assert sent["index"] == packed["index"]
        # Generated (not an engine error, whose count would be auditor's own).
        assert sent["finish_reason"] in ("stop", "length") and sent["completion_tokens"] > 0, sent
        # vLLM's own count (len(prompt_token_ids)) is pack's, canaries and candidates included.
        assert sent["prompt_tokens"] == packed["prompt_tokens"], (sent["index"], sent["prompt_tokens"], packed)
        assert sent["recall"] is not None and sent["recall"]["planted"] > 0, sent
    assert report["prompt_tokens_sent"] == sum(window["prompt_tokens"] for window in manifest["windows"])
    if fixture == "flask_ledger":
        assert any(window["static_candidates"] for window in manifest["windows"])
