"""A constant argument switches off a branch (round 5, an "infeasible path" cause): the
caller passes ``None``/``False``/``0``/``""`` by position or keyword, and the callee's
writes sit under ``if param:``, under the ``else`` of ``if not param:`` or of
``if param is None:``. Read along the finding's own chain, and every other caller's."""

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

FORMS = """
    from .models import Book, Shelf

    class ShelfForm:
        def save(self, parent, **kwargs):
            shelf = Shelf.objects.create(name="a")
            if parent:
                Book.objects.create(title="b")
            return shelf

        def store(self, parent=None):
            shelf = Shelf.objects.create(name="a")
            if not parent:
                return shelf
            else:
                Book.objects.create(title="b")
            return shelf

        def keep(self, parent):
            shelf = Shelf.objects.create(name="a")
            if parent is None:
                return shelf
            Book.objects.create(title="b")
            return shelf

        def relay(self, parent=None):
            shelf = Shelf.objects.create(name="a")
            print(
                parent=parent,
            )
            if parent:
                Book.objects.create(title="b")
            return shelf

        def rebind(self, parent):
            parent = parent or Shelf.objects.first()
            shelf = Shelf.objects.create(name="a")
            if parent:
                Book.objects.create(title="b")
            return shelf
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _findings(views: str, rule: Rule) -> dict:
    """The findings shown by default (a single write alone is graded low)."""
    files = {"library/models.py": MODELS, "library/forms.py": FORMS, "library/views.py": views}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


@pytest.mark.parametrize(
    ("method", "arguments"),
    [
        ("save", "None"),
        ("save", "False"),
        ("save", "0"),
        ("save", '""'),
        ("save", "parent=None"),
        ("store", "None"),
        ("store", ""),  # the default None left in place
        ("keep", "None"),
        ("keep", "parent=None"),
        ("relay", ""),  # a keyword argument on its own line binds nothing
    ],
)
def test_a_constant_that_switches_the_second_write_off_leaves_no_finding(method: str, arguments: str, rule: Rule):
    views = f"""
        from .forms import ShelfForm

        def edit(request):
            form = ShelfForm()
            form.{method}({arguments})
            return None
        """
    assert ("library/forms.py", f"ShelfForm.{method}") not in _findings(views, rule)


@pytest.mark.parametrize(
    ("method", "arguments"),
    [
        ("save", "request.shelf"),  # a value: the arm may run
        ("keep", "False"),  # False is not None: the writing path runs
        ("rebind", "None"),  # bound again before the test
    ],
)
def test_an_argument_that_may_take_the_writing_arm_keeps_the_finding(method: str, arguments: str, rule: Rule):
    views = f"""
        from .forms import ShelfForm

        def edit(request):
            form = ShelfForm()
            form.{method}({arguments})
            return None
        """
    assert ("library/forms.py", f"ShelfForm.{method}") in _findings(views, rule)


def test_another_caller_passing_a_value_keeps_the_finding(rule: Rule):
    views = """
        from .forms import ShelfForm

        def edit(request):
            ShelfForm().save(None)
            return None

        def translate(request):
            ShelfForm().save(request.shelf)
            return None
        """
    assert ("library/forms.py", "ShelfForm.save") in _findings(views, rule)


def test_a_method_called_on_its_class_does_not_shift_positions(rule: Rule):
    # ``ShelfForm.keep(form, None)``: ``form`` is ``self``; None is ``parent`` only once
    # the positions are counted from ``self``, which the pass does not do.
    views = """
        from .forms import ShelfForm

        def edit(request):
            ShelfForm.save(ShelfForm(), None)
            return None
        """
    assert ("library/forms.py", "ShelfForm.save") in _findings(views, rule)
