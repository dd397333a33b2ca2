"""A transaction opened through a variable (round 5, a "covered by a caller" cause):
``with context:`` where ``context`` was bound once, above, to ``transaction.atomic()`` or
to ``atomic() if ... else nullcontext()``."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
    from django.db import models

    class Shelf(models.Model):
        name = models.CharField(max_length=20)

    class Book(models.Model):
        title = models.CharField(max_length=20)
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


HEADER = """\
from contextlib import nullcontext
import contextlib

from django.db import transaction

from .models import Book, Shelf

def restock(request, dry_run=False, mode=None):
"""


def _restock(body: str, rule: Rule) -> dict:
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    files = {"library/models.py": MODELS, "library/views.py": HEADER + indented + "\n"}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


@pytest.mark.parametrize(
    "binding",
    [
        "context = transaction.atomic() if not dry_run else nullcontext()",
        "context = contextlib.nullcontext() if dry_run else transaction.atomic()",
        "context = transaction.atomic()",
    ],
)
def test_a_with_on_a_variable_bound_to_a_boundary_covers_its_body(binding: str, rule: Rule):
    body = f"""
{binding}
with context:
    Shelf.objects.create(name="a")
    Book.objects.create(title="b")
return None
"""
    assert ("library/views.py", "restock") not in _restock(body, rule)


@pytest.mark.parametrize(
    "body",
    [
        # the other arm is not a null context: a real context that opens no transaction
        """
context = transaction.atomic() if not dry_run else open("log")
with context:
    Shelf.objects.create(name="a")
    Book.objects.create(title="b")
""",
        # rebound on a branch: the block may run under either value
        """
context = transaction.atomic()
if mode:
    context = nullcontext()
with context:
    Shelf.objects.create(name="a")
    Book.objects.create(title="b")
""",
        # bound below the block, not above it
        """
with context:
    Shelf.objects.create(name="a")
    Book.objects.create(title="b")
context = transaction.atomic()
""",
        # a null context in both arms
        """
context = nullcontext() if dry_run else nullcontext()
with context:
    Shelf.objects.create(name="a")
    Book.objects.create(title="b")
""",
    ],
)
def test_a_variable_that_may_hold_no_boundary_covers_nothing(body: str, rule: Rule):
    assert ("library/views.py", "restock") in _restock(body, rule)


def test_the_null_arm_is_not_read_as_a_boundary_elsewhere(rule: Rule):
    # A variable bound to a boundary covers only its own ``with`` block.
    body = """
context = transaction.atomic() if not dry_run else nullcontext()
with context:
    Shelf.objects.create(name="a")
Shelf.objects.create(name="b")
Book.objects.create(title="c")
"""
    assert ("library/views.py", "restock") in _restock(body, rule)
