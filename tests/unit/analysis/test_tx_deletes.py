"""Django's own transactions around deletes and link changes (fixtures/django_deletes), and
the framework facts as data (models/django.yaml, a project's ``--tx-models`` file).

``Collector.delete`` (django/db/models/deletion.py) sends ``pre_delete``/``post_delete``
inside ``transaction.atomic``, with the cascades; the many-to-many manager
(django/db/models/fields/related_descriptors.py) sends ``m2m_changed`` inside one too;
``Model.save_base`` (django/db/models/base.py) sends ``post_save`` outside any."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor.analysis.transactions import StaticResult, TxOptions
from auditor.analysis.transactions.framework_facts import Kind, ModelsFileError, builtin_facts, load_facts, parse_facts
from auditor.cli.app import app
from auditor.errors import ExitCode
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, ALL_SEVERITIES, analyze_app, analyze_source, reported

SIGNALS = "library/signals.py"
VIEWS = "library/views.py"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def result(rule: Rule) -> StaticResult:
    return analyze_app("django_deletes", rule)


# -------------------------------------------------------------------- delete semantics


@pytest.mark.parametrize(
    "function",
    [
        "release_shelf_space",  # @receiver(post_delete): inside Collector.delete's atomic
        "close_open_loans",  # pre_delete.connect(...): the same
        "count_tag_uses",  # @receiver(m2m_changed): inside the related manager's atomic
    ],
)
def test_receivers_of_signals_sent_inside_a_transaction_are_covered(result: StaticResult, function: str):
    assert (SIGNALS, function) not in reported(result)


@pytest.mark.parametrize(
    "function",
    [
        "take_shelf_space",  # post_save: sent outside any transaction
        "recount_shelf",  # [post_save, post_delete]: a save runs it outside
    ],
)
def test_receivers_of_save_signals_stay_reported(result: StaticResult, function: str):
    assert reported(result)[(SIGNALS, function)].severity in SHOWN


def test_a_delete_is_one_write_with_its_cascade_and_receivers(result: StaticResult):
    found = reported(result)[(VIEWS, "remove_book")]
    assert found.severity == "low"
    assert [site.line for site in found.sequence] == [9]


def test_a_delete_then_a_write_is_two_writes(result: StaticResult):
    found = reported(result)[(VIEWS, "remove_book_and_record")]
    assert found.severity in SHOWN
    assert [site.line for site in found.sequence] == [16, 17]


def test_the_covered_receivers_writes_count_as_covered_sinks(result: StaticResult):
    # 2 writes in each of the three covered receivers
    assert result.covered_sinks == 6


# ------------------------------------------------------------------- facts as data


def test_every_builtin_row_names_its_proof():
    facts = builtin_facts().facts
    assert facts
    for fact in facts:
        assert fact.proof is not None and fact.proof.file.startswith(("django/", "rest_framework/", "pyhermes/", "mozilla_django_oidc/")) and fact.proof.function


def test_the_builtin_rows_say_what_django_does():
    facts = builtin_facts()
    assert {"transaction.atomic", "atomic"} <= set(facts.calls(Kind.OPENS))
    assert facts.signals(Kind.INSIDE) == {"pre_delete", "post_delete", "m2m_changed"}
    assert {"pre_save", "post_save"} <= facts.signals(Kind.OUTSIDE)
    assert "bulk_update" in facts.methods(Kind.WRITE, "manager")
    assert "bulk_update" not in facts.methods(Kind.WRITE, "related-manager")


HELPER_APP = {
    "shop/db.py": """
        def unit_of_work():
            return lock_and_begin()
    """,
    "shop/views.py": """
        from .db import unit_of_work
        from .models import Order, Line

        def checkout(request):
            with unit_of_work():
                Order.objects.create(total=1)
                Line.objects.create(order_id=1)

        def refund(request):
            Order.objects.filter(pk=1).update(total=0)
            record_refund(amount=1)
    """,
    "shop/urls.py": """
        from django.urls import path
        from . import views

        urlpatterns = [path("checkout/", views.checkout), path("refund/", views.refund)]
    """,
}

PROJECT_MODELS = """
framework: shop
facts:
  - call: unit_of_work
    kind: opens
    proof: {file: shop/db.py, function: unit_of_work}
  - call: record_refund
    kind: write
"""


def test_a_project_file_adds_a_boundary_helper_and_a_write(rule: Rule, tmp_path: Path):
    before = reported(analyze_source(HELPER_APP, rule))
    assert ("shop/views.py", "checkout") in before  # the helper's transaction is not seen
    assert before[("shop/views.py", "refund")].severity == "low"  # record_refund is no write
    models = tmp_path / "models.yaml"
    models.write_text(PROJECT_MODELS, encoding="utf-8")
    after = reported(analyze_source(HELPER_APP, rule, TxOptions(min_severity="low", models=(models,))))
    assert ("shop/views.py", "checkout") not in after
    assert after[("shop/views.py", "refund")].severity in SHOWN


def test_a_project_file_without_rows_changes_nothing(rule: Rule, tmp_path: Path):
    models = tmp_path / "models.yaml"
    models.write_text("framework: shop\nfacts: []\n", encoding="utf-8")
    plain = analyze_source(HELPER_APP, rule, ALL_SEVERITIES).findings
    assert analyze_source(HELPER_APP, rule, TxOptions(min_severity="low", models=(models,))).findings == plain


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("framework: x\nfacts:\n  - call: a\n    kind: begins\n", "row 1: field 'kind': 'begins' is not one of"),
        ("framework: x\nfacts:\n  - {call: a, kind: opens}\n  - {kind: opens}\n", "row 2: a row names exactly one of call"),
        ("framework: x\nfacts:\n  - {signal: a, kind: opens}\n", "row 1: field 'signal': a 'opens' row names call"),
        ("framework: x\nfacts:\n  - {call: a, kind: opens, when: 1}\n", "row 1: unknown field 'when'"),
        ("framework: x\nfacts:\n  - {method: save, through: model, kind: write}\n", "row 1: field 'method': only the built-in models"),
        ("framework: x\nfacts:\n  - {call: a, kind: opens, atomic: true}\n", "row 1: field 'atomic'"),
        ("framework: x\nfacts:\n  - {call: a, kind: opens, proof: here}\n", "row 1: field 'proof'"),
        ("facts: []\n", "'framework' must name"),
        ("framework: x\nfacts: {}\n", "'facts' must be a list"),
        ("framework: [x\n", "not valid YAML"),
    ],
)
def test_a_bad_row_names_the_file_the_row_and_the_field(text: str, message: str):
    with pytest.raises(ModelsFileError) as raised:
        parse_facts(text, "proj/models.yaml", builtin=False)
    assert str(raised.value).startswith("proj/models.yaml: ")
    assert message in str(raised.value)


def test_the_package_models_read_through_libyaml_are_the_rows_the_pure_loader_reads(monkeypatch: pytest.MonkeyPatch):
    """The built-in model files are parsed with libyaml's safe loader where it is built (a
    tenth of the time at every run's start): the same rows as the pure safe loader, which a
    project's own file still goes through (its error texts)."""
    from importlib import resources

    import yaml

    from auditor.analysis.transactions import framework_facts

    fast = builtin_facts()
    monkeypatch.setattr(framework_facts, "_FAST_LOADER", yaml.SafeLoader)
    folder = resources.files(framework_facts.__package__).joinpath("models")
    pure = framework_facts.FrameworkFacts()
    for name in framework_facts._BUILTIN_FILES:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        pure = pure.extended(parse_facts(text, f"{framework_facts.__package__}/models/{name}", builtin=True))
    assert fast.facts and pure == fast


def test_a_missing_project_file_is_a_usage_error(tmp_path: Path):
    with pytest.raises(ModelsFileError, match="cannot read transaction models"):
        load_facts((tmp_path / "absent.yaml",))


# -------------------------------------------------------------------- config plumbing


def _scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, *flags: str):
    repo = tmp_path / "repo"
    for path, text in HELPER_APP.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (repo / "models.yaml").write_text(PROJECT_MODELS, encoding="utf-8")
    (tmp_path / "auditor.toml").write_text(config, encoding="utf-8")
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["scan", str(repo), "--engine", "static", "--rule", "tx-outside-transaction", "-f", "json", "--min-severity", "low", *flags])
    report = json.loads(result.stdout) if result.exit_code in (0, 1) else None
    return result, report


def test_tx_models_in_the_project_config_reach_the_static_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    result, report = _scan(tmp_path, monkeypatch, 'tx-models = ["models.yaml"]\n')
    assert report is not None, result.output
    functions = {finding["function"] for finding in report["findings"]}
    assert "checkout" not in functions and "refund" in functions


def test_a_bad_tx_models_flag_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "bad.yaml").write_text("framework: x\nfacts:\n  - {call: a, kind: begins}\n", encoding="utf-8")
    result, _ = _scan(tmp_path, monkeypatch, "", "--tx-models", str(tmp_path / "bad.yaml"))
    assert result.exit_code == ExitCode.USAGE
    assert "bad.yaml: row 1: field 'kind'" in " ".join(result.output.split())
