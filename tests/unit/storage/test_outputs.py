"""Issue 22 items 5, 6 and 9: every output is replaced whole (a full disk keeps the previous
report, exit 2), never written through a link the repository planted, found unwritable
before the scan runs; JSONL is split on ``\\n`` only."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.engine.base import ChatMessage, ChatRequest, Completion
from auditor.engine.replay import load_recording, write_recording
from auditor.runs.many.state import RunState, WorkItem
from auditor.storage import atomic
from auditor.storage.jsonl import jsonl_lines
from tests.support import FIXTURES

FIXTURE = FIXTURES / "django_shop"
OUTPUT_FLAGS = ("-o", "--json-output", "--sarif-output", "--markdown-output")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


def scan(*args: str) -> int:
    return CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static", "--rule", "tx-outside-transaction", *args]).exit_code


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
def test_a_link_planted_at_an_output_path_is_replaced_not_followed(tmp_path: Path, flag: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = tmp_path / "repo" / "auditor.sarif"
    planted.parent.mkdir()
    planted.symlink_to(Path("..") / "victim.txt")
    assert scan("-f", "sarif", flag, str(planted)) == 0
    assert victim.read_text() == "precious\n"
    assert not planted.is_symlink() and planted.stat().st_size > 0


def test_a_full_disk_keeps_the_previous_report_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "report.json"
    report.write_text('{"previous": true}\n')

    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    result = CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static", "-f", "json", "-o", str(report)])
    assert result.exit_code == 2, result.output
    assert "No space left on device" in " ".join(result.output.split())
    assert report.read_text() == '{"previous": true}\n'
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")) == []


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
def test_an_unwritable_output_is_a_usage_error_before_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    import auditor.runs.scan as scan_module

    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("the scan ran before the output was checked")

    monkeypatch.setattr(scan_module, "run_scan", never)
    (tmp_path / "a-directory").mkdir()
    for unwritable in (tmp_path / "missing" / "report", tmp_path / "a-directory"):
        assert scan("-f", "json", flag, str(unwritable)) == 64


def test_jsonl_lines_split_on_newline_only() -> None:
    text = json.dumps({"a": "x\u2028y\x85z\x0c\x1c"}, ensure_ascii=False) + "\r\n\n" + '{"b": 1}\n'
    assert [json.loads(line) for _, line in jsonl_lines(text)] == [{"a": "x\u2028y\x85z\x0c\x1c"}, {"b": 1}]


def test_a_recording_with_line_separators_in_its_text_replays(tmp_path: Path) -> None:
    request = ChatRequest("w0", (ChatMessage("user", "hi"),), 3, 10)
    answer = '{"findings": []}  \u2028 \u2029 \x85'
    path = write_recording(tmp_path / "rec.jsonl", [request], [Completion("w0", answer, "trace\u2028", "stop", 3, 4)])
    [record] = load_recording(path)
    assert record.text == answer and record.reasoning == "trace\u2028"


def test_scan_many_resume_keeps_records_with_line_separators(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state.jsonl")
    item = WorkItem("repo", 0, "tx", "hash")
    state.record(item, Completion("w0", '{"findings": []}\u2028\x85', "", "stop", 3, 4))
    again = RunState(tmp_path / "state.jsonl")
    assert again.done_items() == (item,)


def test_a_device_named_as_the_output_is_written_in_place_never_replaced(tmp_path: Path) -> None:
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a character device needs root")
    result = CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static", "-f", "json", "-o", str(device)])
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_named_pipe_output_receives_the_report_and_stays_a_pipe(tmp_path: Path) -> None:
    pipe = tmp_path / "report.fifo"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    atomic.write_atomically(pipe, '{"findings": []}\n')
    reader.join(timeout=10)
    assert received == [b'{"findings": []}\n']
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_a_link_to_a_device_planted_at_the_output_is_replaced_not_written_through(tmp_path: Path) -> None:
    planted = tmp_path / "auditor.json"
    planted.symlink_to("/dev/null")
    atomic.write_atomically(planted, "report\n")
    assert not planted.is_symlink() and planted.read_text() == "report\n"


def test_a_baseline_can_be_written_into_a_new_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static", "-f", "json", "--write-baseline", "sub/dir/b.json"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "sub" / "dir" / "b.json").read_text(encoding="utf-8"))


def test_a_baseline_under_an_unwritable_ancestor_is_refused_before_the_scan(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that may write anywhere")
        result = CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static", "--write-baseline", str(locked / "a" / "b.json")])
        assert result.exit_code == 64, result.output
    finally:
        locked.chmod(0o700)
