"""Hostile inputs against the per-file deadline (issue 22, item 3's last part): a file whose
walk work (read, decode, classify, stand-in checks) runs past ``--file-deadline`` is
dropped, listed as not audited with the reason, and leaves the scan partial (exit 5 under
``--error``), whatever made it slow. Variants: a stalled read (a slow disk), a long line,
a large non-UTF-8 file, a file of a million short lines, a minified-looking file, a file
near the size limit, and every file at once under a deadline nothing meets.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.console import exit_on_error
from auditor.cli.scan import scan_command
from auditor.errors import ExitCode, UsageError
from auditor.walk import reading
from auditor.walk.files import SkipReason
from auditor.walk.walker import WalkOptions, walk
from tests.support import stepping_clock

VIEW = "def handler(request):\n    request.user.save()\n    request.user.profile.save()\n"
HOSTILE = {
    "long_line.py": "x = '" + "select " * 60_000 + "'\n",
    "latin1.py": ("# caf\xe9 " * 40_000 + "\nvalue = 1\n").encode("cp1252"),
    "many_lines.py": "a = 1\n" * 150_000,
    "bundle.min.py": "a=1;" * 100_000 + "\n",
    "near_limit.py": "# " + "z" * 990_000 + "\n",
}


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _write(root, {"app/views.py": VIEW, **{f"app/{name}": content for name, content in HOSTILE.items()}})
    return root



@pytest.mark.parametrize("slow", sorted(HOSTILE))
def test_the_one_slow_file_is_dropped_and_named_the_rest_audited(repo: Path, slow: str):
    order = sorted(path.relative_to(repo).as_posix() for path in repo.rglob("*") if path.is_file())
    durations = iter(45.0 if path == f"app/{slow}" else 0.01 for path in order)
    walked = walk(repo, WalkOptions(default_excludes=False), clock=stepping_clock(durations))
    [skipped] = [item for item in walked.skipped if item.reason is SkipReason.FILE_DEADLINE]
    assert skipped.path == f"app/{slow}" and "over the per-file deadline of 30 s" in skipped.detail
    assert {entry.path for entry in walked.files} == set(order) - {f"app/{slow}"}


def test_a_stalled_read_runs_past_the_deadline_in_real_time(repo: Path, monkeypatch: pytest.MonkeyPatch):
    read = reading.FileReader.read

    def stalled(self, path: str):
        if path == "app/views.py":
            time.sleep(1.5)  # a slow disk, a network mount, a file system under attack
        return read(self, path)

    monkeypatch.setattr(reading.FileReader, "read", stalled)
    walked = walk(repo, WalkOptions(file_deadline_s=0.5, default_excludes=False))
    assert [item.path for item in walked.skipped if item.reason is SkipReason.FILE_DEADLINE] == ["app/views.py"]


def test_no_deadline_and_a_bad_deadline(repo: Path):
    slow = iter([1e6] * 100)
    assert not [item for item in walk(repo, WalkOptions(file_deadline_s=None), clock=stepping_clock(slow)).skipped
                if item.reason is SkipReason.FILE_DEADLINE]
    with pytest.raises(UsageError, match="deadline must be positive"):
        walk(repo, WalkOptions(file_deadline_s=-1.0))


def test_a_scan_whose_files_overrun_is_partial_and_says_which(repo: Path, tmp_path: Path):
    app = typer.Typer()
    app.command("scan")(exit_on_error(scan_command))
    app.command("other")(lambda: None)
    sarif = tmp_path / "out.sarif"
    started = time.monotonic()
    outcome = CliRunner().invoke(app, ["scan", str(repo), "--engine", "static", "-f", "json", "--error",
                                       "--file-deadline", "0.000000001", "--sarif-output", str(sarif)])
    assert time.monotonic() - started < 60
    assert outcome.exit_code == ExitCode.INCOMPLETE, outcome.output  # partial coverage under --error
    report = json.loads(outcome.stdout)
    dropped = {item["path"] for item in report["coverage"]["not_audited"] if item["reason"] == "file-deadline"}
    assert dropped == {"app/views.py", *(f"app/{name}" for name in HOSTILE)}
    assert any("app/views.py was not audited (file-deadline" in error["message"] for error in report["errors"])
    assert json.loads(sarif.read_text())["runs"][0]["invocations"][0]["executionSuccessful"] is False
