"""scan-many without Ray: targets, the sequential run, resume after failures, the index,
git checkouts, the endpoint pool and the command."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.many import scan_many_command
from auditor.config.scan import ScanConfig
from auditor.engine import registry
from auditor.engine.base import (
    ChatRequest,
    Completion,
    error_completion,
)
from auditor.engine.pool import EndpointPoolEngine
from auditor.errors import EngineUnavailable, UsageError
from auditor.progress import ProgressEvent
from auditor.report import render
from auditor.runs.many import runner as many_runner
from auditor.runs.many.runner import RAY_MISSING_NOTICE, run_many
from auditor.runs.many.stages import ManyConfig
from auditor.runs.many.state import RunState, WorkItem
from auditor.runs.many.targets import parse_target_line, parse_targets
from auditor.runs.scan import run_scan
from tests.support import (
    MANY_FIXTURES,
    REPO_ROOT,
    Failure,
    MockEngine,
    answers,
    copy_fixtures,
    expected_single_reports,
    index,
    many_recording,
    many_reports,
    template,
)

# --- targets ---------------------------------------------------------------------------


def test_targets_file_paths_urls_revisions_and_comments(tmp_path: Path) -> None:
    (tmp_path / "local" / "svc").mkdir(parents=True)
    (tmp_path / "odd@name").mkdir()
    spec = tmp_path / "targets.txt"
    spec.write_text(
        "# nightly audit\n"
        "\n"
        "local/svc          # a relative path\n"
        "odd@name\n"
        "https://git.example.com/org/payments.git@v1.2\n"
        "git@github.com:org/ledger.git\n"
        "git@github.com:org/ledger.git#feature/x\n"
        "file:///srv/mirror/svc#0123abcd\n",
        encoding="utf-8",
    )
    targets = parse_targets(spec)
    assert [(t.key, t.source, t.revision, t.is_git) for t in targets] == [
        ("svc", str((tmp_path / "local" / "svc").resolve()), None, False),
        ("odd-name", str((tmp_path / "odd@name").resolve()), None, False),
        ("payments-v1.2", "https://git.example.com/org/payments.git", "v1.2", True),
        ("ledger", "git@github.com:org/ledger.git", None, True),
        ("ledger-feature-x", "git@github.com:org/ledger.git", "feature/x", True),
        ("svc-0123abcd", "file:///srv/mirror/svc", "0123abcd", True),
    ]


def test_targets_sharing_a_name_get_distinct_stable_keys(tmp_path: Path) -> None:
    spec = tmp_path / "targets.txt"
    spec.write_text("https://a.example/x/api.git\nhttps://b.example/y/api.git\n", encoding="utf-8")
    first = [t.key for t in parse_targets(spec)]
    assert len(set(first)) == 2 and all(key.startswith("api-") for key in first)
    spec.write_text("https://b.example/y/api.git\nhttps://a.example/x/api.git\n", encoding="utf-8")
    assert sorted(t.key for t in parse_targets(spec)) == sorted(first)


def test_a_repeated_target_or_an_empty_spec_is_a_usage_error(tmp_path: Path) -> None:
    spec = tmp_path / "targets.txt"
    spec.write_text("https://a.example/api.git\nhttps://a.example/api.git\n", encoding="utf-8")
    with pytest.raises(UsageError, match="listed twice"):
        parse_targets(spec)
    spec.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(UsageError, match="no targets"):
        parse_targets(spec)
    with pytest.raises(UsageError, match="not found"):
        parse_targets(tmp_path / "missing.txt")


def test_a_directory_of_repositories_lists_its_visible_subdirectories(tmp_path: Path) -> None:
    repos = copy_fixtures(tmp_path, ("go_inventory", "django_shop"))
    (repos / ".cache").mkdir()
    (repos / "notes.txt").write_text("not a repository", encoding="utf-8")
    assert [t.key for t in parse_targets(repos)] == ["django_shop", "go_inventory"]


def test_a_local_path_with_a_revision_is_cloned() -> None:
    assert parse_target_line("../mirror/api@v2", Path("/srv/runs")) == ("/srv/mirror/api", "v2", True)
    assert parse_target_line("   # only a comment", Path("/")) is None


# --- the sequential run ----------------------------------------------------------------


def test_sequential_scan_many_equals_three_single_scans(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(many_runner, "ray_available", lambda: False)
    repos = copy_fixtures(tmp_path)
    expected = expected_single_reports(tmp_path, repos, tiny_tokenizer_dir)
    events: list[ProgressEvent] = []
    out = tmp_path / "run"
    config = ManyConfig(targets=repos, out=out, scan=template(tiny_tokenizer_dir, replay=many_recording(tmp_path)))
    result = run_many(config, events.append)

    assert result.backend == "sequential"
    assert RAY_MISSING_NOTICE in [event.message for event in events]
    for name in MANY_FIXTURES:
        assert many_reports(out, name) == expected[name], name
    assert json.loads(expected["django_shop"]["report.json"])["findings"], "the recorded answer grounds findings"
    summary = index(out)
    assert [(r["key"], r["status"], r["windows"]) for r in summary["repositories"]] == [
        ("django_shop", "ok", 1), ("flask_ledger", "ok", 1), ("go_inventory", "ok", 1)]
    assert summary["totals"]["completion_tokens"] == 33
    markdown = (out / "index.md").read_text(encoding="utf-8")
    assert "| django_shop | ok | 1 |" in markdown and "[django_shop](repos/django_shop/report.md)" in markdown
    assert result.windows_generated == 3 and result.failures == 0


def flaky_engine(texts: dict[str, str], failing: set[str]) -> MockEngine:
    """Answers from a fixed table by repository; fails every request of the repositories in ``failing``."""

    def reply(request: ChatRequest) -> str:
        key = request.id.split("/", 1)[0]
        return Failure("GPU worker lost") if key in failing else texts[key].split("</think>")[-1]

    return MockEngine(reply, name="flaky", identity="flaky")


def test_resume_redoes_only_the_window_that_failed(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch) -> None:
    failing = {"flask_ledger"}
    engine = flaky_engine(answers(), failing)
    monkeypatch.setitem(registry._registered, "flaky", lambda settings: engine)
    repos = copy_fixtures(tmp_path)
    out = tmp_path / "run"
    config = ManyConfig(targets=repos, out=out, scan=template(tiny_tokenizer_dir, engine="flaky"), backend="sequential")

    first = run_many(config)
    assert {r.key: r.status for r in first.repositories} == {
        "django_shop": "ok", "flask_ledger": "incomplete", "go_inventory": "ok"}
    assert "GPU worker lost" in index(out)["repositories"][1]["error"]
    before = {name: many_reports(out, name) for name in MANY_FIXTURES}

    failing.clear()  # the GPU worker is back
    engine.history.clear()
    second = run_many(config)
    assert [request.id for request in engine.history] == ["flask_ledger/window-0"]
    assert {r.key: r.status for r in second.repositories} == dict.fromkeys(MANY_FIXTURES, "ok")
    assert (second.windows_generated, second.windows_reused) == (1, 2)
    for name in ("django_shop", "go_inventory"):
        assert many_reports(out, name) == before[name]

    engine.history.clear()
    assert run_many(config).windows_generated == 0 and not engine.history


def test_a_missing_repository_fails_alone_and_is_done_on_the_next_run(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch) -> None:
    engine = flaky_engine(answers(), set())
    monkeypatch.setitem(registry._registered, "flaky", lambda settings: engine)
    repos = copy_fixtures(tmp_path, ("django_shop", "go_inventory"))
    spec = tmp_path / "targets.txt"
    spec.write_text("repos/django_shop\nrepos/flask_ledger\nrepos/go_inventory\n", encoding="utf-8")
    out = tmp_path / "run"
    config = ManyConfig(targets=spec, out=out, scan=template(tiny_tokenizer_dir, engine="flaky"), backend="sequential")

    first = run_many(config)
    statuses = {r.key: (r.status, r.error) for r in first.repositories}
    assert statuses["flask_ledger"][0] == "failed" and "not a directory" in statuses["flask_ledger"][1]
    assert statuses["django_shop"][0] == statuses["go_inventory"][0] == "ok"
    assert not (out / "repos" / "flask_ledger").exists()

    shutil.copytree(REPO_ROOT / "fixtures" / "flask_ledger", repos / "flask_ledger")
    engine.history.clear()
    second = run_many(config)
    assert [request.id for request in engine.history] == ["flask_ledger/window-0"]
    assert second.failures == 0 and (out / "repos" / "flask_ledger" / "report.sarif").is_file()


def test_state_file_forgets_a_window_that_failed_after_it_was_done(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state.jsonl")
    item = WorkItem("svc", 0, "tx-outside-transaction", "ab" * 32)
    request = ChatRequest("svc/window-0", (), 10, 20)
    state.record(item, Completion("svc/window-0", "{}", "", "stop", 10, 3))
    assert RunState(tmp_path / "state.jsonl").done(item, request).text == "{}"
    state.record_repository_failure("web", "web: not a directory")
    assert RunState(tmp_path / "state.jsonl").done_items() == (item,)
    state.record(item, error_completion(request, "boom"))
    assert RunState(tmp_path / "state.jsonl").done(item, request) is None


def test_state_file_cut_mid_line_by_an_interruption_still_resumes(tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    first = WorkItem("svc", 0, "tx-outside-transaction", "ab" * 32)
    second = WorkItem("svc", 1, "tx-outside-transaction", "cd" * 32)
    RunState(path).record(first, Completion("svc/window-0", "{}", "trace \u2192 sink", "stop", 10, 3))
    whole = path.read_bytes()
    # The interrupted run had started appending the same line again: cut inside the arrow's UTF-8 bytes.
    path.write_bytes(whole + whole[: whole.index("\u2192".encode()) + 1])
    resumed = RunState(path)
    assert resumed.done_items() == (first,)
    resumed.record(second, Completion("svc/window-1", "{}", "", "stop", 10, 3))
    assert RunState(path).done_items() == (first, second)


# --- git targets and the static engine -------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(cwd), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_targets_are_cloned_shallowly_at_their_revision(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(many_runner, "ray_available", lambda: False)
    source = copy_fixtures(tmp_path, ("go_inventory",)) / "go_inventory"
    git("init", "-q", cwd=source)
    git("add", ".", cwd=source)
    git("commit", "-qm", "v1", cwd=source)
    git("tag", "v1", cwd=source)
    tagged = git("rev-parse", "HEAD", cwd=source)
    (source / "extra.go").write_text("package main\n\nfunc Extra() {}\n", encoding="utf-8")
    git("add", ".", cwd=source)
    git("commit", "-qm", "v2", cwd=source)
    spec = tmp_path / "targets.txt"
    spec.write_text(f"file://{source}@v1\n{source}#HEAD\nfile://{tmp_path}/nowhere.git\n", encoding="utf-8")
    out = tmp_path / "run"
    config = ManyConfig(targets=spec, out=out, scan=ScanConfig(root=Path("."), engine="static", use_cache=False, rules=("tx-outside-transaction",)))

    result = {r.key: r for r in run_many(config).repositories}
    assert result["go_inventory-v1"].commit == tagged
    assert not (out / "checkouts" / "go_inventory-v1" / "extra.go").exists()
    assert (out / "checkouts" / "go_inventory-HEAD" / "extra.go").is_file()
    assert git("rev-list", "--count", "HEAD", cwd=out / "checkouts" / "go_inventory-HEAD") == "1"
    assert result["nowhere"].status == "failed" and "git fetch failed" in result["nowhere"].error
    static = run_scan(ScanConfig(root=out / "checkouts" / "go_inventory-v1", engine="static", use_cache=False,
                                  rules=("tx-outside-transaction",)))
    assert many_reports(out, "go_inventory-v1")["report.json"] == render(static, "json")


# --- the endpoint pool -----------------------------------------------------------------


@dataclass
class Endpoint:
    name: str
    down: bool = False
    seen: list[str] = field(default_factory=list)

    def identity(self) -> str:
        if self.down:
            raise EngineUnavailable(f"{self.name} is down")
        return "served-model"

    def generate(self, requests: Sequence[ChatRequest], progress=None) -> list[Completion]:
        if self.down:
            raise EngineUnavailable(f"cannot reach {self.name}")
        self.seen.extend(r.id for r in requests)
        return [Completion(r.id, f"{self.name}:{r.id}", "", "stop", 1, 1) for r in requests]


def pool_requests(count: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", (), 1, 1) for i in range(count)]


def test_endpoint_pool_spreads_requests_and_keeps_their_order() -> None:
    a, b = Endpoint("a"), Endpoint("b")
    completions = EndpointPoolEngine([a, b]).generate(pool_requests(5))
    assert [c.request_id for c in completions] == ["r0", "r1", "r2", "r3", "r4"]
    assert (a.seen, b.seen) == (["r0", "r2", "r4"], ["r1", "r3"])


def test_endpoint_pool_moves_a_dead_endpoints_share_to_the_live_ones() -> None:
    a, b = Endpoint("a", down=True), Endpoint("b")
    pool = EndpointPoolEngine([a, b])
    completions = pool.generate(pool_requests(4))
    assert [c.text for c in completions] == ["b:r0", "b:r1", "b:r2", "b:r3"]
    assert pool.identity() == "served-model"
    dead = EndpointPoolEngine([Endpoint("c", down=True)]).generate(pool_requests(2))
    assert all(c.finish_reason == "error" and "cannot reach c" in c.error for c in dead)


# --- the command -----------------------------------------------------------------------


def test_command_writes_the_run_and_exits_5_when_a_repository_failed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(many_runner, "ray_available", lambda: False)
    app = typer.Typer()
    app.command()(scan_many_command)
    repos = copy_fixtures(tmp_path, ("flask_ledger",))
    spec = tmp_path / "targets.txt"
    spec.write_text("repos/flask_ledger\nrepos/missing\n", encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [str(spec), "--out", str(out), "--engine", "static", "--no-cache", "--rule", "tx-outside-transaction"])
    assert result.exit_code == 5, result.output
    assert "1 failed or incomplete" in result.output and "index.md" in result.output
    assert "ray is not installed" in result.output
    assert [r["status"] for r in index(out)["repositories"]] == ["ok", "failed"]
    spec.write_text("repos/flask_ledger\n", encoding="utf-8")
    assert CliRunner().invoke(app, [str(spec), "--out", str(out), "--engine", "static", "--no-cache", "--rule", "tx-outside-transaction"]).exit_code == 0
    assert repos.is_dir()


def test_a_repository_over_the_target_timeout_fails_alone(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    repos = tmp_path / "repos"
    shutil.copytree(REPO_ROOT / "fixtures" / "go_inventory", repos / "go_inventory")
    out = tmp_path / "run"
    config = ManyConfig(targets=repos, out=out, scan=ScanConfig(root=Path("."), engine="static", use_cache=False, rules=("tx-outside-transaction",)),
                        backend="sequential", target_timeout_s=0.01)
    result = run_many(config)
    [outcome] = result.repositories
    assert outcome.status == "failed" and "--target-timeout" in (outcome.error or "")
    # In its own process with time to spare, the repository plans exactly as in this one.
    isolated = run_many(replace(config, out=tmp_path / "again", target_timeout_s=120))
    inline = run_many(replace(config, out=tmp_path / "inline", target_timeout_s=0))
    assert [(r.status, r.findings, r.windows) for r in isolated.repositories] == [
        (r.status, r.findings, r.windows) for r in inline.repositories]
    assert isolated.repositories[0].status == "ok"
