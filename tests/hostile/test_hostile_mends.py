"""Issue 22's "Also" list, one regression test each: one engine failure is one error, a
looping root link is named as such, scan-many shows all of git's message, a configuration
error names the command being run, ``shop/./x.py`` is the repository's ``shop/x.py``. (The
cyclic chain's test is with the other hostile answers, in test_hostile_engine.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.config.scan import ScanConfig
from auditor.engine.base import EngineSettings
from auditor.findings.grounding import normalise_path
from auditor.runs.many.checkout import git_failure
from auditor.runs.scan import run_scan
from tests.support import FIXTURES, MockEngine

FIXTURE = FIXTURES / "django_shop"
TX = "tx-outside-transaction"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


def test_one_engine_failure_is_one_error_per_window(tiny_tokenizer_dir: Path) -> None:
    config = ScanConfig(root=FIXTURE, rules=(TX,), engine="mock", tokenizer=str(tiny_tokenizer_dir),
                        engine_settings=EngineSettings(max_model_len=65_536), use_cache=False, probes=0)
    result = run_scan(config, engine=MockEngine(fail="server went away"))
    for window in result.windows:
        about = [error for error in result.errors if error.window == window.index]
        assert [error.kind for error in about] == ["engine"], about


def test_a_looping_root_link_is_named_as_a_link_not_a_missing_path(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    result = CliRunner().invoke(app, ["scan", str(tmp_path / "a"), "--engine", "static"])
    assert result.exit_code == 64
    assert "looping symbolic link" in " ".join(result.output.split())


def test_git_failures_keep_every_line_of_the_message() -> None:
    stderr = "Cloning into 'x'...\nfatal: could not read Username for 'https://example.com': terminal prompts disabled\n"
    assert git_failure(stderr, 128) == (
        "Cloning into 'x'... | fatal: could not read Username for 'https://example.com': terminal prompts disabled"
    )
    assert git_failure("", 128) == "exit 128"
    assert len(git_failure("x" * 10_000, 1)) == 2000


def test_a_configuration_error_names_the_command_being_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.auditor]\nmax-file-bytes = "lots"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["scan", str(FIXTURE), "--engine", "static"])
    assert result.exit_code == 64 and "for 'scan'" in result.output and "'pack'" not in result.output


@pytest.mark.parametrize("claimed", ["shop/./services/orders.py", "./shop//services/orders.py", "shop/services/./orders.py"])
def test_dot_segments_in_a_claimed_path_name_the_repository_file(claimed: str) -> None:
    assert normalise_path(claimed) == "shop/services/orders.py"
    assert normalise_path("shop/../../etc/passwd") == "shop/../../etc/passwd"  # still rejected later
