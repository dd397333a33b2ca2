"""Doctor asks the server at --base-url / AUDITOR_BASE_URL what it serves (reachable, the
model, its max_model_len) and says when a checkpoint directory holds no weights (issue 23)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.doctor import doctor_command
from auditor.engine.doctor import report_to_dict, run_doctor
from auditor.engine.server_probe import probe_server
from tests.support import TEST_DATA

NEMOTRON = TEST_DATA / "configs" / "nemotron-3-nano-30b-a3b.json"
LISTING = {"object": "list", "data": [
    {"id": "nemotron", "object": "model", "root": "/models/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "max_model_len": 262144},
]}


class _Models(http.server.BaseHTTPRequestHandler):
    """A vLLM-like /v1/models; /v1/elsewhere redirects to another origin; the key is checked."""

    seen_keys: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        type(self).seen_keys.append(self.headers.get("Authorization"))
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2:9/v1/models")
            self.end_headers()
            return
        if self.path.startswith("/locked/"):
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps(LISTING).encode() if self.path == "/v1/models" else b"<html>not here</html>"
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "AUDITOR_BASE_URL": "", **extra}


def test_doctor_names_the_served_model_and_its_window(server: str, tmp_path: Path):
    report = run_doctor(base_url=f"{server}/v1", environ=_env(tmp_path, AUDITOR_API_KEY="sekret"), cache_dir=tmp_path)
    assert report.server is not None and report.server.reachable
    [served] = report.server.models
    assert (served.id, served.max_model_len, served.root) == ("nemotron", 262144, "/models/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8")
    assert _Models.seen_keys[-1] == "Bearer sekret"
    assert report_to_dict(report)["server"]["models"][0]["max_model_len"] == 262144


def test_doctor_reads_the_base_url_from_the_environment_and_prints_it(server: str, tmp_path: Path):
    app = typer.Typer()
    app.command("doctor")(doctor_command)
    app.command("other")(lambda: None)
    shown = CliRunner().invoke(app, ["doctor"], env={**_env(tmp_path, AUDITOR_BASE_URL=f"{server}/v1"), "COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "model nemotron" in shown.output and "262,144 tokens" in shown.output


def test_an_unreachable_or_wrong_server_is_a_note_not_a_crash(server: str, tmp_path: Path):
    down = run_doctor(base_url="http://127.0.0.1:9/v1", environ=_env(tmp_path), cache_dir=tmp_path)
    assert down.server is not None and not down.server.reachable
    assert any("is not usable" in note and "cannot reach" in note for note in down.notes)
    wrong = probe_server(f"{server}/v2")
    assert not wrong.reachable and "HTTP 404" in wrong.detail
    assert "API key was refused" in probe_server(f"{server}/locked/v1").detail


def test_the_probe_never_follows_a_redirect_to_another_host(server: str):
    status = probe_server(f"{server}/redirect/v1", "sekret")
    assert not status.reachable and "leaves the server's origin" in status.detail


def test_a_config_only_checkpoint_is_named(tmp_path: Path):
    directory = tmp_path / "NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"
    directory.mkdir()
    (directory / "config.json").write_text(NEMOTRON.read_text())
    report = run_doctor(str(directory), environ=_env(tmp_path), cache_dir=tmp_path)
    assert report.checkpoint is not None and report.checkpoint.weight_files == 0
    assert any("holds config.json but no weights" in note for note in report.notes)
    (directory / "model-00001-of-00001.safetensors").write_bytes(b"\0")
    again = run_doctor(str(directory), environ=_env(tmp_path), cache_dir=tmp_path)
    assert again.checkpoint is not None and again.checkpoint.weight_files == 1
    assert not any("no weights" in note for note in again.notes)
