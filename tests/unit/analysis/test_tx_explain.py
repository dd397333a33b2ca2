"""The explain API and ``auditor explain`` on the bundled django_shop fixture: one reported
function, one a transaction covers, one no entry point reaches."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from auditor.analysis.transactions import TxOptions
from auditor.analysis.transactions.explain import (
    COVERED,
    REPORTED,
    UNREACHABLE,
    AnalysisInputs,
    UnknownFunctionError,
    explain,
)
from auditor.cli.app import app
from auditor.rules.loader import builtin_rules
from auditor.runs.prepare import prepare_repository
from tests.support import REPO_ROOT

SHOP = REPO_ROOT / "fixtures" / "django_shop"
UNREACHED = ("shop/management/commands/close_stale_carts.py", "Command.add_arguments")


@pytest.fixture(scope="module")
def inputs() -> AnalysisInputs:
    prepared = prepare_repository(SHOP, use_cache=False)
    return AnalysisInputs(prepared.indexes, prepared.texts, builtin_rules()["tx-outside-transaction"], prepared.graph)


def test_a_reported_function_has_its_entry_path_effects_and_grade(inputs: AnalysisInputs):
    explanation = explain(inputs, "shop/services/catalog.py", "move_category", TxOptions(min_severity="low"))
    assert explanation.outcome == REPORTED
    assert explanation.severity == "critical"
    assert explanation.finding is not None and explanation.finding.function == "move_category"
    (entry_path,) = explanation.entry_paths
    assert entry_path.entry_function == "CategoryActionView.post" and not entry_path.boundaries
    assert [hop.callee for hop in entry_path.hops] == ["CategoryActionView.handle_move", "move_category"]
    assert [(effect.line, effect.effect, effect.covered) for effect in explanation.effects] == [(14, "write", False), (15, "write", False)]
    assert [site.line for site in explanation.sequence] == [14, 15]


def test_a_function_called_inside_atomic_is_covered_and_says_where(inputs: AnalysisInputs):
    explanation = explain(inputs, "shop/services/payments.py", "capture_payment")
    assert explanation.outcome == COVERED
    assert explanation.severity is None and explanation.finding is None
    (entry_path,) = explanation.entry_paths
    assert entry_path.entry_function == "checkout"
    assert entry_path.boundaries == ("shop/views.py:34: the call runs inside a transaction boundary",)


def test_a_function_no_entry_point_reaches_has_no_entry_path(inputs: AnalysisInputs):
    explanation = explain(inputs, *UNREACHED)
    assert explanation.outcome == UNREACHABLE
    assert explanation.entry_paths == ()


def test_an_unknown_function_is_a_usage_error(inputs: AnalysisInputs):
    with pytest.raises(UnknownFunctionError, match="capture_payment"):
        explain(inputs, "shop/services/payments.py", "nope")


def test_the_command_prints_text_and_json():
    runner = CliRunner()
    text = runner.invoke(app, ["explain", str(SHOP), "shop/services/catalog.py:move_category", "--no-cache"])
    assert text.exit_code == 0, text.output
    assert text.output.startswith("shop/services/catalog.py:move_category: reported\n")
    assert "line 14: category.move(...) (write)" in text.output
    covered = runner.invoke(app, ["explain", str(SHOP), "shop/services/payments.py:capture_payment", "-f", "json", "--no-cache"])
    assert covered.exit_code == 0, covered.output
    data = json.loads(covered.output)
    assert data["outcome"] == COVERED and data["entry_paths"][0]["entry_function"] == "checkout"
    unreached = runner.invoke(app, ["explain", str(SHOP), ":".join(UNREACHED), "--format", "json", "--no-cache"])
    assert json.loads(unreached.output)["entry_paths"] == []


def test_the_command_rejects_a_target_without_a_function():
    result = CliRunner().invoke(app, ["explain", str(SHOP), "shop/services/catalog.py", "--no-cache"])
    assert result.exit_code == 64
