"""Calls that are one atomic effect, and calls that are no write at all.

* ``QuerySet.update_or_create`` runs its lookup and the save inside
  ``transaction.atomic`` (django/db/models/query.py ``QuerySet.update_or_create``), and
  ``get_or_create``'s create path too (``QuerySet.get_or_create``): a model ``save``
  override run by them is inside that block, so the call is one effect, never the
  override's writes one by one.
* ``create`` runs the save outside any transaction of its own (``QuerySet.create``): the
  override's writes stay separate.
"""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.framework_facts import builtin_facts
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MEMBERSHIP = {
    "club/models.py": """
        from django.db import models

        class Member(models.Model):
            def save(self, *args, **kwargs):
                Member.objects.filter(user=self.user).exclude(pk=self.pk).update(active=False)
                super().save(*args, **kwargs)
                Badge.objects.create(member=self)

        class Badge(models.Model):
            pass
        """,
    "club/tasks.py": """
        from celery import shared_task
        from .models import Member

        @shared_task
        def enrol(user, club):
            Member.objects.update_or_create(user=user, defaults={"club": club})

        @shared_task
        def join(user, club):
            Member.objects.get_or_create(user=user, defaults={"club": club})

        @shared_task
        def admit(user, club):
            Member.objects.create(user=user, club=club)
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def test_update_or_create_and_get_or_create_run_the_save_override_in_their_own_atomic(rule: Rule):
    found = reported(analyze_source(MEMBERSHIP, rule))
    for function in ("enrol", "join"):  # one upsert: a single write (low), not the override's three
        single = found[("club/tasks.py", function)]
        assert single.severity == "low" and [site.line for site in single.sequence] == [single.line]
    # create saves outside any block of its own: the override's writes are reached from it
    admitted = found[("club/models.py", "Member.save")]
    assert [step.function for step in admitted.chain] == ["admit", "Member.save"]


def test_the_atomic_manager_rows_name_their_proof():
    rows = {fact.method: fact for fact in builtin_facts().facts if fact.through == "manager" and fact.atomic}
    assert {"get_or_create", "update_or_create"} <= set(rows)
    assert rows["update_or_create"].proof is not None and rows["update_or_create"].proof.function == "QuerySet.update_or_create"
