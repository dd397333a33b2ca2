"""Option defaults from auditor.toml / [tool.auditor]: the file sets defaults, flags win."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.config.project import load_project_config
from auditor.errors import ExitCode, UsageError
from tests.support import REPO_ROOT

SHOP = REPO_ROOT / "fixtures" / "django_shop"
COMMANDS = {"scan": frozenset({"rule", "engine", "format", "exclude"}), "pack": frozenset({"rule", "format"})}


def test_pyproject_table_sets_shared_and_command_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.auditor]\nrule = ["tx-outside-transaction"]\n'
        '[tool.auditor.scan]\nengine = "static"\n'
    )
    nested = tmp_path / "src" / "pkg"
    nested.mkdir(parents=True)
    config = load_project_config(nested, COMMANDS)
    assert config.source == tmp_path / "pyproject.toml"
    assert config.defaults["scan"] == {"rule": ["tx-outside-transaction"], "engine": "static"}
    assert config.defaults["pack"] == {"rule": ["tx-outside-transaction"]}


def test_unknown_keys_are_errors_naming_file_and_key(tmp_path):
    (tmp_path / "auditor.toml").write_text("[pack]\nengine = 'static'\n")
    with pytest.raises(UsageError, match="'pack' has no option 'engine'"):
        load_project_config(tmp_path, COMMANDS)
    (tmp_path / "auditor.toml").write_text("colour = 'blue'\n")
    with pytest.raises(UsageError, match="unknown option 'colour'"):
        load_project_config(tmp_path, COMMANDS)


def test_no_configuration_means_no_defaults(tmp_path):
    assert load_project_config(tmp_path, COMMANDS).defaults == {}


def test_the_cli_uses_the_file_and_flags_win(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "auditor.toml").write_text('rule = ["tx-outside-transaction"]\n[scan]\nengine = "static"\nformat = "json"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["scan", str(SHOP)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["engine"] == "static"
    assert [rule["id"] for rule in report["rules"]] == ["tx-outside-transaction"]
    flagged = CliRunner().invoke(app, ["scan", str(SHOP), "--format", "markdown"])
    assert flagged.stdout.startswith("## auditor")


def test_a_broken_file_is_a_usage_error(tmp_path, monkeypatch):
    (tmp_path / "auditor.toml").write_text("rule = [\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["rules"])
    assert result.exit_code == ExitCode.USAGE
    assert "cannot read configuration" in result.stderr
