"""Ctrl-C stops a scan promptly, even while a request is in flight to a server that drips
its answer: exit 130, a one-line message, no traceback, and the caches stay usable (the
next scan runs). SIGTERM and SIGHUP do the same, exiting 143 and 129 (issue 22 item 8);
a review they stop, or one killed outright, leaves no registered worktree behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO_ROOT, HostileServer, chat, drip, http_response

FIXTURE = REPO_ROOT / "fixtures" / "go_inventory"


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery as on a terminal")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (getattr(signal, "SIGHUP", 1), 129)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_the_first_signal_stops_a_scan_waiting_on_a_server(tmp_path: Path, tiny_tokenizer_dir: Path, signum: int, code: int) -> None:
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
        process.send_signal(signum)
        try:
            _, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("the scan did not stop within 15 s of Ctrl-C") from None
        assert process.returncode == code, stderr
        assert time.monotonic() - started < 10
        assert "Traceback" not in stderr and "stopped before the run finished" in stderr
    # The caches the interrupted run left are consistent: a static scan over them runs.
    again = subprocess.run([sys.executable, "-m", "auditor", "scan", str(FIXTURE), "--engine", "static", "--format", "json"],
                           capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 0, again.stderr


def _worktrees(repo: Path) -> list[str]:
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True, check=True)
    return [line.split(" ", 1)[1] for line in listed.stdout.splitlines() if line.startswith("worktree ")][1:]


def _review_repo(tmp_path: Path) -> Path:
    import shutil

    from tests.support import git

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE.parent / "django_shop", repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "shop" / "extra.py").write_text("def f():\n    return 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")
    return repo


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_killed_reviews_worktree_is_pruned_by_the_next_review(tmp_path: Path) -> None:
    from auditor.runs.worktrees import review_worktree

    repo = _review_repo(tmp_path)
    env = {**os.environ, "AUDITOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(FIXTURE.parent.parent)}
    # A review killed outright (SIGKILL) inside its worktree cannot clean up.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from auditor.runs.worktrees import review_worktree\n"
         "with review_worktree(Path(sys.argv[1]), 'HEAD~1') as tree:\n    print(tree, flush=True); time.sleep(60)\n", str(repo)],
        stdout=subprocess.PIPE, text=True, env=env)
    left = Path(holder.stdout.readline().strip())
    holder.kill()
    holder.wait()
    assert left.is_dir() and [str(left)] == _worktrees(repo)
    # The next review removes it (its owner is gone), and removes its own on the way out.
    with review_worktree(repo, "HEAD") as tree:
        assert _worktrees(repo) == [str(tree)]
    assert _worktrees(repo) == [] and not left.exists()


def test_a_review_never_prunes_the_users_own_worktrees(tmp_path: Path) -> None:
    from auditor.runs.worktrees import review_worktree
    from tests.support import git

    repo = _review_repo(tmp_path)
    # The user's own worktree, its directory away for now (an unmounted disk, say).
    mine = tmp_path / "elsewhere" / "mine"
    git(repo, "worktree", "add", "--detach", "-q", str(mine), "HEAD~1")
    moved = tmp_path / "parked"
    mine.rename(moved)
    with review_worktree(repo, "HEAD") as tree:
        assert str(tree) in _worktrees(repo)
    assert _worktrees(repo) == [str(mine)]


def test_a_worktree_owned_on_another_host_is_left_alone(tmp_path: Path) -> None:
    from auditor.runs.worktrees import prune_stale_worktrees, review_worktree

    repo = _review_repo(tmp_path)
    with review_worktree(repo, "HEAD~1") as tree:
        # Another container sharing the checkout: its pid means nothing here.
        (tree.parent / "owner.pid").write_text("1\nsome-other-host\n", encoding="utf-8")
        assert prune_stale_worktrees(repo) == ()
        assert tree.is_dir()


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, getattr(signal, "SIGHUP", 1)], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_during_a_review_removes_its_worktree(tmp_path: Path, signum: int) -> None:
    repo = _review_repo(tmp_path)
    env = {**os.environ, "AUDITOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(FIXTURE.parent.parent)}
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path\n"
         "from auditor.cli.signals import interrupt_on_termination; from auditor.runs.worktrees import review_worktree\n"
         "interrupt_on_termination()\n"
         "with review_worktree(Path(sys.argv[1]), 'HEAD~1') as tree:\n    print(tree, flush=True); time.sleep(60)\n", str(repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    left = Path(holder.stdout.readline().strip())
    holder.send_signal(signum)
    holder.communicate(timeout=30)
    assert _worktrees(repo) == [] and not left.exists()
