"""What the infeasible-path reading must not hide (round 5 review): a loop always has a
passing path, an arm that always runs keeps the feasible arms before it, a positional
constant never reaches a keyword-only parameter, a parameter passed on after being bound
again is not the caller's, and an in-memory connection or a ``with NAME:`` transaction
only counts when bound once, at the function's top level."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported

MODELS = """
    from django.db import models

    class Crate(models.Model):
        label = models.CharField(max_length=20)

    class Parcel(models.Model):
        code = models.CharField(max_length=20)
    """

DEPOT = """
    from .models import Crate, Parcel

    def probe():
        return 1

    class Depot:
        def every(self, items):
            crate = Crate.objects.create(label="a")
            for item in items:
                return crate
            Parcel.objects.create(code="b")
            return crate

        def until(self, items):
            crate = Crate.objects.create(label="a")
            while items:
                if probe():
                    break
                return crate
            Parcel.objects.create(code="b")
            return crate

        def forever(self, items):
            crate = Crate.objects.create(label="a")
            while True:
                try:
                    probe()
                except ValueError:
                    break
                return crate
            Parcel.objects.create(code="b")
            return crate

        def closed(self, items):
            crate = Crate.objects.create(label="a")
            if items:
                return crate
            else:
                raise ValueError
            Parcel.objects.create(code="b")

        def arms(self, owner, urgent):
            crate = Crate.objects.create(label="a")
            if urgent:
                Parcel.objects.create(code="b")
            elif not owner:
                pass
            return crate

        def starred(self, owner, *extra, notify=True):
            crate = Crate.objects.create(label="a")
            if notify:
                Parcel.objects.create(code="b")
            return crate

        def guarded(self, owner=None):
            crate = Crate.objects.create(label="a")
            if owner:
                Parcel.objects.create(code="b")
            return crate

    def forward(owner):
        owner = owner or Crate.objects.first()
        depot.guarded(owner=owner)
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _severity(call: str, rule: Rule, function: str) -> str | None:
    views = f"""
        from .depot import Depot, forward

        def edit(request):
            depot = Depot()
            {call}
            return None
        """
    files = {"stock/models.py": MODELS, "stock/depot.py": DEPOT, "stock/views.py": views}
    found = reported(analyze_source(files, rule))
    finding = found.get(("stock/depot.py", function))
    return None if finding is None else str(finding.severity.value)


@pytest.mark.parametrize("method", ["every", "until", "forever"])
def test_code_after_a_loop_whose_body_returns_is_on_a_path(rule: Rule, method: str):
    assert _severity(f"depot.{method}(request.items)", rule, f"Depot.{method}") in SHOWN


def test_code_after_an_if_whose_every_arm_exits_is_on_no_path(rule: Rule):
    assert _severity("depot.closed(request.items)", rule, "Depot.closed") not in SHOWN


def test_a_certain_arm_keeps_the_feasible_arms_before_it(rule: Rule):
    assert _severity("depot.arms(None, request.urgent)", rule, "Depot.arms") in SHOWN


@pytest.mark.parametrize("call", ["depot.starred(request.owner, None)", "depot.starred(request.owner, False)"])
def test_a_positional_constant_never_reaches_a_keyword_only_parameter(rule: Rule, call: str):
    assert _severity(call, rule, "Depot.starred") in SHOWN


def test_a_keyword_only_constant_still_switches_off(rule: Rule):
    assert _severity("depot.starred(request.owner, notify=False)", rule, "Depot.starred") not in SHOWN


def test_a_parameter_bound_again_is_not_relayed_as_false(rule: Rule):
    assert _severity("forward(None)", rule, "Depot.guarded") in SHOWN


RUNNER = """
    import sqlite3

    connection = None

    def load_given(connection=None):
        if connection is None:
            connection = sqlite3.connect(":memory:")
        connection.execute("INSERT INTO a VALUES (1)")
        connection.execute("INSERT INTO b VALUES (1)")

    def load_global(fresh):
        global connection
        if fresh:
            connection = sqlite3.connect(":memory:")
        connection.execute("INSERT INTO a VALUES (1)")
        connection.execute("INSERT INTO b VALUES (1)")
    """


@pytest.mark.parametrize("call, function", [("load_given(request.db)", "load_given"), ("load_global(request.fresh)", "load_global")])
def test_an_in_memory_connection_counts_only_bound_once_at_the_top(rule: Rule, call: str, function: str):
    views = f"""
        from .runner import load_given, load_global

        def run(request):
            {call}
            return None
        """
    found = reported(analyze_source({"reports/runner.py": RUNNER, "reports/views.py": views}, rule))
    assert found[("reports/runner.py", function)].severity in SHOWN


def _restock(body: str) -> dict:
    files = {"stock/models.py": MODELS, "stock/views.py": "from contextlib import nullcontext\nfrom django.db import transaction\nfrom .models import Crate, Parcel\n\n" + body}
    found = reported(analyze_source(files, load_rule("tx-outside-transaction")))
    return {key: finding.severity for key, finding in found.items() if finding.severity in SHOWN}


def test_a_with_over_a_parameter_is_not_a_transaction():
    body = (
        "def restock(request, context=nullcontext(), fresh=False):\n"
        "    if fresh:\n"
        "        context = transaction.atomic()\n"
        "    with context:\n"
        "        Crate.objects.create(label='a')\n"
        "        Parcel.objects.create(code='b')\n"
        "    return None\n"
    )
    assert _restock(body)[("stock/views.py", "restock")] in SHOWN


def test_a_with_over_a_variable_bound_under_a_branch_is_not_a_transaction():
    body = (
        "def restock(request):\n"
        "    if request.fresh:\n"
        "        context = transaction.atomic()\n"
        "    with context:\n"
        "        Crate.objects.create(label='a')\n"
        "        Parcel.objects.create(code='b')\n"
        "    return None\n"
    )
    assert _restock(body)[("stock/views.py", "restock")] in SHOWN


def test_a_null_context_chosen_by_a_flag_that_is_no_dry_run_is_not_covered():
    body = (
        "def restock(request):\n"
        "    context = transaction.atomic() if request.user.is_staff else nullcontext()\n"
        "    with context:\n"
        "        Crate.objects.create(label='a')\n"
        "        Parcel.objects.create(code='b')\n"
        "    return None\n"
    )
    assert _restock(body)[("stock/views.py", "restock")] in SHOWN


def test_a_null_context_chosen_by_a_dry_run_flag_is_covered():
    body = (
        "def restock(request, dry_run=False):\n"
        "    context = transaction.atomic() if not dry_run else nullcontext()\n"
        "    with context:\n"
        "        Crate.objects.create(label='a')\n"
        "        Parcel.objects.create(code='b')\n"
        "    return None\n"
    )
    assert ("stock/views.py", "restock") not in _restock(body)
