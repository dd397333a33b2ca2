"""A scan never reads as clean when part of the repository went unaudited: skipped source
files, windows cut by --max-windows and scans that selected nothing are listed in every
report, make the coverage partial, and fail ``--error`` with exit 5."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.report import render
from auditor.runs.scan import run_scan
from tests.support import MockEngine, git

TX = "tx-outside-transaction"
BUGGY = (
    "from django.views import View\n\n\n"
    "class Pay(View):\n"
    "    def post(self, request):\n"
    "        order = Order.objects.create(total=1)\n"
    "        Payment.objects.create(order=order)\n"
    "        return order\n"
)


def _auditor(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor", *argv], capture_output=True, text=True, cwd=cwd, check=False)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "small.py").write_text("def ok():\n    return 1\n", encoding="utf-8")
    (root / "shop" / "views.py").write_text(BUGGY + "\n# padding\n" * 200, encoding="utf-8")
    (root / "poetry.lock").write_text("[[package]]\n", encoding="utf-8")
    return root


def test_a_skipped_source_file_is_listed_everywhere_and_fails_error(repo: Path, tmp_path: Path) -> None:
    completed = _auditor("scan", str(repo), "--engine", "static", "--rule", TX, "--max-file-bytes", "500",
                         "--format", "json", "--error", "--sarif-output", str(tmp_path / "r.sarif"),
                         "--markdown-output", str(tmp_path / "r.md"), cwd=tmp_path)
    assert completed.returncode == 5, completed.stderr
    report = json.loads(completed.stdout)
    assert report["coverage"]["partial"] is True
    assert {"path": "shop/views.py", "reason": "too-large", "source": True}.items() <= report["coverage"]["not_audited"][0].items()
    assert any(e["kind"] == "not-audited" and "shop/views.py" in e["message"] for e in report["errors"])
    assert any("poetry.lock (lockfile)" in notice for notice in report["notices"])
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert any("shop/views.py was not audited" in note["message"]["text"] for note in notes)
    assert "shop/views.py was not audited" in (tmp_path / "r.md").read_text()
    text = _auditor("scan", str(repo), "--engine", "static", "--rule", TX, "--max-file-bytes", "500", cwd=tmp_path)
    assert text.returncode == 0  # without --error the scan reports, and says it is partial
    assert "PARTIAL" in text.stdout and "coverage partial" in text.stderr


def test_a_scan_that_selects_nothing_is_not_a_pass(repo: Path, tmp_path: Path) -> None:
    completed = _auditor("scan", str(repo), "--engine", "static", "--rule", TX, "--include", "nothing/**",
                         "--format", "json", "--error", cwd=tmp_path)
    assert completed.returncode == 5, completed.stderr
    assert any(e["kind"] == "nothing-audited" for e in json.loads(completed.stdout)["errors"])


def test_max_windows_says_what_it_left_out(repo: Path, tiny_tokenizer_dir: Path) -> None:
    # Twelve modules of views, each on a chain of the static pass: more than one window holds.
    for index in range(12):
        (repo / "shop" / f"module_{index}.py").write_text("from django.views import View\n\n" + "".join(
            f"class Pay{n}(View):\n    def post(self, request):\n        order = Order.objects.create(total={n})\n"
            f"        Payment.objects.create(order=order)\n        return order\n\n" for n in range(8)), encoding="utf-8")
    config = ScanConfig(root=repo, rules=(TX,), engine="mock", tokenizer=str(tiny_tokenizer_dir),
                        engine_settings=EngineSettings(max_model_len=9_000), window=WindowOptions(output_tokens=512, max_windows=1),
                        use_cache=False, probes=0)
    result = run_scan(config, engine=MockEngine())
    assert len(result.windows) == 1
    [capped] = [error for error in result.errors if error.kind == "windows-capped"]
    assert "--max-windows 1 left" in capped.message
    assert result.partial and result.complete  # every window sent was answered, but not every file was sent
    assert "--max-windows 1 left" in render(result, "text")


def test_a_file_decoded_from_latin1_is_audited_and_the_report_says_so(repo: Path, tmp_path: Path) -> None:
    (repo / "shop" / "legacy.py").write_bytes(("# caf\xe9\n" + BUGGY).encode("cp1252"))
    completed = _auditor("scan", str(repo), "--engine", "static", "--rule", TX, "--format", "json", cwd=tmp_path)
    report = json.loads(completed.stdout)
    assert any(f["path"] == "shop/legacy.py" for f in report["findings"])
    assert any("shop/legacy.py (cp1252)" in notice for notice in report["notices"])


def test_an_index_over_its_parse_budget_is_not_audited(repo: Path) -> None:
    from auditor.runs.prepare import prepare_repository

    prepared = prepare_repository(repo, use_cache=False, parse_budget_s=1e-9)
    assert {skip.path for skip in prepared.index_skipped} >= {"shop/small.py"}
    config = ScanConfig(root=repo, rules=(TX,), engine="static", use_cache=False, parse_budget_s=1e-9)
    result = run_scan(config)
    assert result.partial
    assert any(error.kind == "not-audited" and "parse-budget" in error.message for error in result.errors)


def test_a_rule_the_static_pass_cannot_run_is_not_a_pass(repo: Path, tmp_path: Path) -> None:
    completed = _auditor("scan", str(repo), "--engine", "static", "--rule", "sql-injection", "--format", "json",
                         "--error", cwd=tmp_path)
    assert completed.returncode == 5, completed.stderr
    report = json.loads(completed.stdout)
    assert any(e["kind"] == "rule-not-run" and "sql-injection" in e["message"] for e in report["errors"])
    assert report["coverage"]["partial"] is True


def test_scan_many_marks_a_partly_audited_repository_and_fails_error(repo: Path, tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    (repos / "docs_only").mkdir(parents=True)
    (repos / "docs_only" / "README.md").write_text("# nothing to audit\n", encoding="utf-8")
    argv = ["scan-many", str(repos), "--out", str(tmp_path / "run"), "--engine", "static", "--rule", TX,
            "--backend", "sequential", "--target-timeout", "0"]
    plain = _auditor(*argv, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    index = json.loads((tmp_path / "run" / "index.json").read_text())
    assert [r["status"] for r in index["repositories"]] == ["partial"]
    assert _auditor(*argv, "--error", cwd=tmp_path).returncode == 5


def test_a_comment_mentioning_generated_values_keeps_a_file_in_scope() -> None:
    from auditor.pack.scope import scope_class

    assert scope_class("app/views.py", "# Order views. Primary keys are generated by the database.\n") is None
    assert scope_class("app/snapshots/service.py", "def take():\n    pass\n") is None
    assert scope_class("gen/api.go", "// Code generated by protoc-gen-go. DO NOT EDIT.\n") == "generated"


def test_without_a_model_the_rules_that_need_one_are_not_selected(tmp_path: Path) -> None:
    # Issue 23 item 3: a static scan of a clean tree with --error passes instead of exiting 5.
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "app.py").write_text("def ok():\n    return 1\n", encoding="utf-8")
    completed = _auditor("scan", str(clean), "--engine", "static", "--format", "json", "--error", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["coverage"]["partial"] is False
    assert not [e for e in report["errors"] if e["kind"] == "rule-not-run"]
    (notice,) = [n for n in report["notices"] if n.startswith("rules that need a model were not selected")]
    assert "missing-authorization, network-call-in-transaction, sql-injection" in notice


def test_a_static_review_of_an_empty_diff_passes_error(repo: Path) -> None:
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    completed = _auditor("review", str(repo), "--base", "HEAD", "--engine", "static", "--error", cwd=repo)
    assert completed.returncode == 0, completed.stderr


def test_auditor_rules_marks_the_rules_that_need_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    completed = _auditor("rules", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    rows = {line.split("│")[1].strip(): line for line in completed.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip()}
    assert "model only" in rows["sql-injection"] and "model only" not in rows["tx-outside-transaction"]
