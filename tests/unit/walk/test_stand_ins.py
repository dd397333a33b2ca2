"""Issue 22 items 1-3: submodules, nested repositories and placeholder files are named as
not audited (never a clean pass), and one long line does not stall the rule patterns."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.errors import RuleError
from auditor.pack.rank import relevance_scores
from auditor.rules.loader import builtin_rules, parse_rule
from auditor.walk.walker import SkipReason, walk
from tests.support import REPO_ROOT, git

REPO = REPO_ROOT
FIXTURE = REPO / "fixtures" / "django_shop"
requires_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def scan_json(root: Path, *args: str) -> tuple[int, dict]:
    """`auditor scan ROOT --engine static -f json --error --rule tx-outside-transaction`."""
    result = CliRunner().invoke(app, ["scan", str(root), "--engine", "static", "-f", "json", "--error",
                                      "--rule", "tx-outside-transaction", *args])
    return result.exit_code, json.loads(result.stdout[result.stdout.index("{"):])


def committed_copy(source: Path, destination: Path) -> Path:
    """``source`` copied to ``destination`` and committed as a new repository."""
    shutil.copytree(source, destination)
    git(destination, "init", "-q")
    git(destination, "add", "-A")
    git(destination, "commit", "-qm", "init")
    return destination


def not_audited(report: dict) -> dict[str, tuple[str, bool]]:
    return {item["path"]: (item["reason"], item["source"]) for item in report["coverage"]["not_audited"]}


@requires_git
def test_a_submodule_is_not_audited_coverage_never_a_clean_pass(tmp_path: Path) -> None:
    library = committed_copy(FIXTURE, tmp_path / "library")
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "app.py").write_text("x = 1\n")
    git(outer, "init", "-q")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "libs/shop")
    git(outer, "commit", "-qm", "with a submodule")
    code, report = scan_json(outer)
    assert not_audited(report)["libs/shop"] == ("submodule", True)
    assert report["coverage"]["partial"] and code == 5
    assert "auditor scan libs/shop" in json.dumps(report["errors"])
    # The submodule scanned on its own has the findings the outer scan could not see.
    inner_code, inner = scan_json(outer / "libs" / "shop")
    assert inner["findings"] and inner_code == 1


@requires_git
def test_an_uninitialised_submodule_and_an_untracked_clone_are_named(tmp_path: Path) -> None:
    library = committed_copy(FIXTURE, tmp_path / "library")
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "app.py").write_text("x = 1\n")
    git(outer, "init", "-q")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(outer, "commit", "-qm", "with a submodule")
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(outer), str(fresh))  # submodule left uninitialised
    git(fresh, "clone", "-q", str(library), "nested")
    result = walk(fresh)
    reasons = {item.path: item for item in result.skipped}
    assert reasons["lib"].reason is SkipReason.SUBMODULE and "submodule update --init" in reasons["lib"].detail
    assert reasons["nested"].reason is SkipReason.NESTED_REPOSITORY
    code, report = scan_json(fresh)
    assert not_audited(report)["nested"] == ("nested-repository", True) and code == 5


def test_lfs_pointers_are_placeholders_and_the_scan_is_partial(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "shop")
    pointers = [path for path in (tmp_path / "shop").rglob("*.py") if path.stat().st_size > 0]
    for path in pointers:
        path.write_text(LFS_POINTER)
    code, report = scan_json(tmp_path / "shop")
    listed = not_audited(report)
    assert all(listed[str(path.relative_to(tmp_path / "shop"))] == ("placeholder", True) for path in pointers)
    assert report["coverage"]["partial"] and code == 5
    assert "git lfs pull" in json.dumps(report["errors"])


def test_an_empty_file_is_audited_not_a_placeholder(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "notes.py").write_text("# see version https://git-lfs.github.com/spec/v1\n")
    result = walk(tmp_path)
    assert {entry.path for entry in result.files} == {"pkg/__init__.py", "pkg/notes.py"}


def test_the_sql_injection_pattern_is_linear_on_one_long_line() -> None:
    rules = builtin_rules()
    line = "# " + "select " * 140_000  # 980 KB: ~17 minutes with a backtracking engine
    entry = type("Entry", (), {"path": "long.py", "text": line, "content_hash": ""})()
    started = time.monotonic()
    relevance_scores([entry], [rules["sql-injection"]])
    assert time.monotonic() - started < 2


def test_a_pattern_that_needs_backtracking_is_a_rule_error() -> None:
    text = "---\nid: custom\ntitle: t\nseverity: low\nlanguages: [python]\ndescription: d\nrelevance:\n  - '(a)\\1'\n---\nbody\n"
    with pytest.raises(RuleError, match="linear time"):
        parse_rule(text, "custom.md")
