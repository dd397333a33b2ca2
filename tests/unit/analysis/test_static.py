"""The static tx-outside-transaction pass: fixture apps against their expectations
(recall, precision, chains, controls), boundary kinds, finding shape and determinism."""

from __future__ import annotations

import json

import pytest

from auditor.analysis.transactions import (
    FOUND_BY,
    TxOptions,
    analyze_tx_outside_transaction,
)
from auditor.callgraph.graph import CallGraph
from auditor.findings.fingerprints import fingerprint, normalise_call
from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, FIXTURES, analyze_app, analyze_source, load_app, reported

EXPECTED = FIXTURES / "expected"
APPS = sorted(path.stem for path in EXPECTED.glob("*.json"))


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def expected_cases(app: str) -> list[dict]:
    return json.loads((EXPECTED / f"{app}.json").read_text(encoding="utf-8"))["cases"]


# ------------------------------------------------------------------ fixture apps


def test_fixture_apps_exist_with_expectations():
    assert {"django_shop", "flask_ledger"} <= set(APPS)
    for app in APPS:
        assert (FIXTURES / app).is_dir()
        depths = {case["depth"] for case in expected_cases(app) if case["kind"] == "bug"}
        assert depths, app
    python_depths = {case["depth"] for app in ("django_shop", "flask_ledger") for case in expected_cases(app) if case["kind"] == "bug"}
    assert {1, 2, 3} <= python_depths


@pytest.mark.parametrize("app", APPS)
def test_every_planted_bug_is_found_with_its_chain(app: str, rule: Rule):
    found = reported(analyze_app(app, rule))
    for case in expected_cases(app):
        if case["kind"] != "bug":
            continue
        finding = found.get((case["path"], case["function"]))
        assert finding is not None, f"missed {case['path']}:{case['function']}"
        assert finding.line == case["line"]
        assert [(step.path, step.function) for step in finding.chain] == [
            (step["path"], step["function"]) for step in case["chain"]
        ]
        assert len(finding.chain) - 1 == case["depth"]
        assert finding.severity == case["severity"], finding.title
        if case["severity"] in SHOWN:
            # Django's autocommit writes count as writes, a session's commits as commits.
            assert finding.title.startswith((f"{case['writes']} database writes", f"{case['writes']} commits on one path"))


@pytest.mark.parametrize("app", APPS)
def test_default_options_hide_single_autocommit_writes(app: str, rule: Rule):
    everything = analyze_app(app, rule)
    default = analyze_app(app, rule, TxOptions(min_severity="high"))
    below = [finding for finding in everything.findings if finding.severity in ("medium", "low")]
    assert list(default.findings) == [finding for finding in everything.findings if finding not in below]
    assert default.hidden_findings == len(below)


@pytest.mark.parametrize("app", APPS)
def test_no_finding_on_negative_controls(app: str, rule: Rule):
    found = reported(analyze_app(app, rule))
    controls = [case for case in expected_cases(app) if case["kind"] == "control"]
    assert controls
    for case in controls:
        assert (case["path"], case["function"]) not in found, case.get("covered_by")


def test_static_pass_leaves_suppression_comments_to_the_findings_stage(rule: Rule):
    found = reported(analyze_app("django_shop", rule))
    for case in expected_cases("django_shop"):
        if case["kind"] == "suppressed":
            finding = found[(case["path"], case["function"])]
            assert finding.line == case["line"]


def test_measured_precision_and_recall_against_planted_bugs(rule: Rule):
    """Quality of the static pass on every fixture app (suppressed lines are not scored)."""
    true_positives = false_positives = bugs = 0
    python_bugs = python_hits = 0
    for app in APPS:
        cases = expected_cases(app)
        planted = {(c["path"], c["function"], c["line"]) for c in cases if c["kind"] == "bug"}
        suppressed = {(c["path"], c["function"]) for c in cases if c["kind"] == "suppressed"}
        python = {(c["path"], c["function"], c["line"]) for c in cases if c["kind"] == "bug" and c["path"].endswith(".py") and 1 <= c["depth"] <= 3}
        bugs += len(planted)
        python_bugs += len(python)
        for finding in analyze_app(app, rule).findings:
            key = (finding.path, finding.function, finding.line)
            if key in planted:
                true_positives += 1
                python_hits += key in python
            elif (finding.path, finding.function) not in suppressed:
                false_positives += 1
    recall = true_positives / bugs
    precision = true_positives / (true_positives + false_positives)
    assert python_bugs >= 9 and python_hits / python_bugs == 1.0
    assert recall == 1.0
    assert precision == 1.0


def test_output_is_stable_across_runs_and_input_order(rule: Rule):
    indexes, texts = load_app(FIXTURES / "django_shop")
    first = analyze_tx_outside_transaction(indexes, texts, rule)
    second = analyze_tx_outside_transaction(dict(reversed(list(indexes.items()))), texts, rule)
    prebuilt = analyze_tx_outside_transaction(indexes, texts, rule, CallGraph.build(indexes))
    assert first == second == prebuilt
    assert list(first.findings) == sorted(first.findings, key=Finding.sort_key)
    # several writes in one function rank first
    severities = [finding.severity for finding in first.findings]
    assert severities == sorted(severities, key=["critical", "high", "medium", "low"].index)


def test_counters_on_the_django_fixture(rule: Rule):
    result = analyze_app("django_shop", rule)
    # views, the CBVs' methods, the tasks (one through an alias), the management command and
    # manage.py's main block
    assert result.entry_points == 16
    assert result.sinks == 29
    # create_order (3) and reserve_stock (2) under @atomic, capture_payment (2) and refund_payment (2) in
    # with-blocks, and touch_profile's two writes, reached only through a call passing save=False
    assert result.covered_sinks == 11


def test_finding_shape_matches_the_answer_contract(rule: Rule):
    indexes, texts = load_app(FIXTURES / "django_shop")
    result = analyze_tx_outside_transaction(indexes, texts, rule)
    path = "shop/services/inventory.py"
    finding = reported(result)[(path, "_release_reservation")]
    assert finding.rule == rule.id
    assert finding.found_by == FOUND_BY == ("static",)
    calls = tuple(normalise_call(site.path, texts[site.path].split("\n"), site.line) for site in finding.sequence)
    entry = f"{finding.chain[0].path}:{finding.chain[0].function}"
    assert finding.fingerprint == fingerprint(rule.id, path, "_release_reservation", calls, entry)
    assert all(step.verified for step in finding.chain)
    entry, middle, last = finding.chain
    # Each step's line is where it calls the next step; the last step's is the sink (issue 15).
    assert (entry.path, entry.line) == ("shop/tasks.py", 13)  # release_expired_reservations(...), not the def line
    assert middle.line == 26  # the call made at that step
    assert last.line == finding.line == 32
    assert "line 32: Product.objects.filter(...).update(...) (write)" in finding.explanation
    assert "line 34: reservation.save(...) (write)" in finding.explanation


def test_explanations_name_write_calls_as_written_and_entry_points_that_write_themselves(rule: Rule):
    # Issue 15: "Product.objects.filter(...).update(...)", not "Product.objects.filter.update";
    # an entry point writing in its own body does not "reach" itself "through 0 calls".
    findings = reported(analyze_app("django_shop", rule))
    own = [finding for finding in findings.values() if len(finding.chain) == 1]
    assert own, "the fixture has an entry point that writes in its own body"
    for finding in own:
        assert finding.chain[0].line == finding.line
        assert "through 0 calls" not in finding.explanation and "writes in its own body" in finding.explanation
    assert not any(".filter.update(" in finding.explanation for finding in findings.values())


# ------------------------------------------------------------------ boundary kinds


DJANGO_VIEWS = {
    "site/views.py": """
        from django.db import transaction
        from celery import shared_task

        from .models import Ledger

        def deposit(request):
            Ledger.objects.create(amount=1)

        @transaction.non_atomic_requests
        def withdraw(request):
            Ledger.objects.create(amount=-1)

        @shared_task
        def reconcile():
            Ledger.objects.filter(open=True).update(open=False)
        """,
    "site/models.py": "class Ledger:\n    pass\n",
}


def test_atomic_requests_covers_django_views_only(rule: Rule):
    without = reported(analyze_source(DJANGO_VIEWS, rule))
    assert set(without) == {("site/views.py", "deposit"), ("site/views.py", "withdraw"), ("site/views.py", "reconcile")}
    settings = {"site/settings.py": 'DATABASES = {"default": {"ENGINE": "x", "ATOMIC_REQUESTS": True}}\n'}
    covered = reported(analyze_source({**DJANGO_VIEWS, **settings}, rule))
    assert set(covered) == {("site/views.py", "withdraw"), ("site/views.py", "reconcile")}


def test_spring_transactional_and_self_invocation(rule: Rule):
    result = analyze_source(
        {
            "app/OrderController.java": """
                public class OrderController {
                    private OrderService service;

                    @PostMapping("/orders")
                    public void create(Order order) {
                        service.place(order);
                    }

                    @PostMapping("/orders/bulk")
                    public void bulk(Order order) {
                        service.importAll(order);
                    }
                }
                """,
            "app/OrderService.java": """
                public class OrderService {
                    private EntityManager em;

                    @Transactional
                    public void place(Order order) {
                        em.persist(order);
                    }

                    public void importAll(Order order) {
                        this.saveBatch(order);
                    }

                    @Transactional
                    public void saveBatch(Order order) {
                        em.persist(order);
                    }
                }
                """,
        },
        rule,
    )
    found = reported(result)
    assert ("app/OrderService.java", "OrderService.place") not in found
    finding = found[("app/OrderService.java", "OrderService.saveBatch")]
    assert [step.function for step in finding.chain] == [
        "OrderController.bulk",
        "OrderService.importAll",
        "OrderService.saveBatch",
    ]


def test_sql_writes_through_named_strings_and_session_begin(rule: Rule):
    found = reported(
        analyze_source(
            {
                "jobs/cleanup.py": """
                    import click
                    from sqlalchemy import text

                    PURGE = \"\"\"
                        DELETE FROM sessions WHERE expires_at < now()
                    \"\"\"
                    REPORT = "SELECT count(*) FROM sessions"

                    @click.command()
                    def purge(connection):
                        connection.execute(text(REPORT))
                        statement = "UPDATE users SET active = false WHERE last_seen < now()"
                        cursor = connection.cursor()
                        cursor.execute(statement)
                        connection.execute(text(PURGE))

                    @click.command()
                    def purge_safely(session):
                        with session.begin():
                            session.execute(text(PURGE))
                """,
            },
            rule,
        )
    )
    assert set(found) == {("jobs/cleanup.py", "purge")}
    finding = found[("jobs/cleanup.py", "purge")]
    assert finding.title.startswith("2 database writes")
    assert finding.line == 14


def test_go_transaction_handle_and_callback_boundaries(rule: Rule):
    found = reported(
        analyze_source(
            {
                "svc/main.go": """
                    package main

                    import "net/http"

                    func transfer(w http.ResponseWriter, r *http.Request) {
                        tx, _ := db.BeginTx(r.Context(), nil)
                        tx.Exec("UPDATE accounts SET balance = balance - 1")
                        applyFee(tx)
                        db.Exec("INSERT INTO audit (kind) VALUES ('transfer')")
                        tx.Commit()
                    }

                    func applyFee(tx *sql.Tx) {
                        tx.Exec("UPDATE accounts SET balance = balance - 0.1")
                    }

                    func main() {
                        http.HandleFunc("/transfer", transfer)
                    }
                    """,
                "web/server.js": """
                    const express = require('express');
                    const app = express();
                    async function archive(req, res) {
                      await db.transaction(async (session) => {
                        await orders.updateMany({ open: true }, { $set: { open: false } });
                      });
                      await events.insertOne({ kind: 'archived' });
                    }
                    app.post('/archive', archive);
                    """,
            },
            rule,
        )
    )
    go = found[("svc/main.go", "transfer")]
    assert go.line == 9 and go.title.startswith("Database write")  # only the db.Exec on the pool
    assert ("svc/main.go", "applyFee") not in found
    js = found[("web/server.js", "archive")]
    assert js.line == 7 and js.title.startswith("Database write")


def test_unreachable_writes_are_not_reported(rule: Rule):
    result = analyze_source(
        {"lib/cache.py": "def warm(model):\n    model.save()\n"},
        rule,
    )
    assert result.findings == ()
    assert (result.sinks, result.covered_sinks, result.entry_points) == (1, 0, 0)


def test_repository_wrappers_around_atomic_count_as_boundaries(rule: Rule):
    found = reported(
        analyze_source(
            {
                "core/tracing.py": """
                    from contextlib import contextmanager
                    from django.db import transaction

                    @contextmanager
                    def traced_atomic():
                        with transaction.atomic():
                            yield
                    """,
                "core/transactions.py": """
                    from contextlib import contextmanager
                    from .tracing import traced_atomic

                    @contextmanager
                    def commit_on_errors():
                        with traced_atomic():
                            yield

                    @contextmanager
                    def timed():
                        yield
                    """,
                "shop/tasks.py": """
                    from celery import shared_task
                    from core.tracing import traced_atomic
                    from core.transactions import commit_on_errors, timed

                    @shared_task
                    @traced_atomic()
                    def settle(order):
                        order.save()

                    @shared_task
                    def close(order):
                        with commit_on_errors():
                            order.save()

                    @shared_task
                    def measure(order):
                        with timed():
                            order.save()
                    """,
            },
            rule,
        )
    )
    assert set(found) == {("shop/tasks.py", "measure")}


def test_file_storage_cache_and_file_field_calls_are_not_database_writes(rule: Rule):
    result = analyze_source(
        {
            "shop/tasks.py": """
                from celery import shared_task
                from django.core.cache import cache
                from django.core.files.storage import default_storage

                @shared_task
                def purge(path, key):
                    default_storage.delete(path)
                    storage.bucket.Object(path).delete()
                    cache.delete(key)

                @shared_task
                def set_logo(product, logo):
                    product.logo.save(logo.name, logo, save=False)
                    product.save(update_fields=["logo"])
                    default_storage.save(logo.name, logo)
                """,
        },
        rule,
    )
    found = reported(result)
    assert set(found) == {("shop/tasks.py", "set_logo")}
    finding = found[("shop/tasks.py", "set_logo")]
    # the row is committed before the file reaches storage: a write and an irreversible side effect
    assert finding.severity in SHOWN and finding.line == 14
    assert finding.title.endswith("with 1 irreversible side effect")
    assert result.sinks == 1


def test_a_call_into_a_repository_save_method_is_judged_inside_that_method(rule: Rule):
    found = reported(
        analyze_source(
            {
                "shop/mutations.py": """
                    from celery import shared_task
                    from django.db import transaction

                    class AtomicUpdate:
                        @classmethod
                        def save(cls, order):
                            with transaction.atomic():
                                order.save()
                                order.lines.all().delete()

                        @classmethod
                        def perform(cls, order):
                            cls.save(order)

                    class PlainUpdate:
                        @classmethod
                        def save(cls, order):
                            order.save()

                        @classmethod
                        def perform(cls, order):
                            cls.save(order)

                    @shared_task
                    def update(order):
                        AtomicUpdate.perform(order)
                        PlainUpdate.perform(order)
                    """,
            },
            rule,
        )
    )
    assert set(found) == {("shop/mutations.py", "PlainUpdate.save")}
    chain = [step.function for step in found[("shop/mutations.py", "PlainUpdate.save")].chain]
    assert chain == ["update", "PlainUpdate.perform", "PlainUpdate.save"]
