"""Rule and configuration mistakes are named errors with the documented exit codes (3 for
rules, 64 for usage), naming their source (the flag, or file and key), never a traceback
or a silent shadowing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from auditor.errors import RuleError
from auditor.rules.loader import builtin_rules, load_rules
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "fixtures" / "go_inventory"


def _auditor(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor", *argv], capture_output=True, text=True, cwd=cwd, check=False)


def _custom_rule(path: Path, rule_id: str) -> Path:
    builtin = builtin_rules()["tx-outside-transaction"].source.split(":", 1)[1]
    from importlib import resources

    text = resources.files("auditor.rules").joinpath("builtin", builtin).read_text(encoding="utf-8")
    path.write_text(text.replace("id: tx-outside-transaction", f"id: {rule_id}", 1), encoding="utf-8")
    return path


def test_a_custom_rule_reusing_a_builtin_id_is_an_error_in_either_order(tmp_path: Path) -> None:
    custom = _custom_rule(tmp_path / "mine.md", "tx-outside-transaction")
    for specs in ([str(custom), "tx-outside-transaction"], ["tx-outside-transaction", str(custom)], [str(custom)]):
        with pytest.raises(RuleError, match="already the built-in rule"):
            load_rules(specs)


def test_two_custom_rules_with_one_id_are_an_error_and_one_named_twice_is_not(tmp_path: Path) -> None:
    first = _custom_rule(tmp_path / "a.md", "my-rule")
    second = _custom_rule(tmp_path / "b.md", "my-rule")
    assert len(load_rules([str(first), str(first)])) == 1
    with pytest.raises(RuleError, match="two rules share the id 'my-rule'"):
        load_rules([str(first), str(second)])


def test_a_rule_file_that_is_not_utf8_exits_3(tmp_path: Path) -> None:
    bad = tmp_path / "latin.md"
    bad.write_bytes("---\nid: caf\xe9\n---\n".encode("latin-1"))
    completed = _auditor("scan", str(FIXTURE), "--engine", "static", "--rule", str(bad), cwd=tmp_path)
    assert completed.returncode == 3 and "not UTF-8" in " ".join(completed.stderr.split())
    assert "Traceback" not in completed.stderr


def test_a_misspelt_rule_gets_a_did_you_mean(tmp_path: Path) -> None:
    completed = _auditor("scan", str(FIXTURE), "--engine", "static", "--rule", "tx-outside-transacton", cwd=tmp_path)
    assert completed.returncode == 3
    assert "Did you mean 'tx-outside-transaction'?" in " ".join(completed.stderr.split())


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('probes = "many"', "probes = 'many' is not valid for 'scan'"),
        ("probes = -1", "probes = -1 is not valid for 'scan'"),
        ("include = [{a = 1}]", "include takes a value or a list of values"),
        ('[tool.auditor.scan]\nmax-model-len = "big"', "max-model-len = 'big' is not valid for 'scan'"),
    ],
)
def test_a_bad_configuration_value_is_a_usage_error_naming_file_and_key(tmp_path: Path, table: str, says: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.auditor]\n{table}\n", encoding="utf-8")
    completed = _auditor("scan", str(FIXTURE), "--engine", "static", cwd=tmp_path)
    assert completed.returncode == 64, completed.stderr
    message = " ".join(completed.stderr.split())
    assert str(tmp_path / "pyproject.toml") in message.replace(" ", "") or "pyproject.toml" in message
    assert says in message
    assert "--probes" not in message and "Traceback" not in completed.stderr


def test_a_tool_key_that_is_not_a_table_is_ignored_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('tool = "x"\n', encoding="utf-8")
    completed = _auditor("scan", str(FIXTURE), "--engine", "static", "--format", "json", cwd=tmp_path)
    assert completed.returncode == 0 and "Traceback" not in completed.stderr
