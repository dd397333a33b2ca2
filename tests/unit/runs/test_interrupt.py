"""Ctrl-C stops a scan promptly, even while a request is in flight to a server that drips
its answer: exit 130, a one-line message, no traceback, and the caches stay usable (the
next scan runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.test_hostile_engine import HostileServer, chat, drip, http_response
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "fixtures" / "go_inventory"


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery as on a terminal")
def test_the_first_ctrl_c_stops_a_scan_waiting_on_a_server(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    with HostileServer() as server:
        server.behaviour = drip(http_response(200, chat('{"findings": [], "probes": []}')), 1.0)
        env = {**os.environ, "AUDITOR_CACHE_DIR": str(tmp_path / "cache"), "AUDITOR_BASE_URL": ""}
        argv = [sys.executable, "-m", "auditor", "scan", str(FIXTURE), "--engine", "openai", "--base-url", server.base_url,
                "--model", "m", "--tokenizer", str(tiny_tokenizer_dir), "--rule", "tx-outside-transaction",
                "--timeout", "900", "--format", "json"]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while server.attempts == 0 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert server.attempts >= 1, "the scan never reached the server"
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("the scan did not stop within 15 s of Ctrl-C") from None
        assert process.returncode == 130, stderr
        assert time.monotonic() - started < 10
        assert "Traceback" not in stderr
    # The caches the interrupted run left are consistent: a static scan over them runs.
    again = subprocess.run([sys.executable, "-m", "auditor", "scan", str(FIXTURE), "--engine", "static", "--format", "json"],
                           capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 0, again.stderr
