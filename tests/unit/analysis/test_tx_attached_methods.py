"""Django's ``Model.add_to_class(name, value)`` attaches a plain function to a model as the
method ``name``: ``ModelBase.add_to_class`` (django/db/models/base.py) calls
``value.contribute_to_class(cls, name)`` when the value has one (a field, a manager) and
otherwise ``setattr(cls, name, value)``, so ``document.check_in(...)`` runs the function with
the instance as ``self``. An app's ``AppConfig.ready`` often extends another app's model so
(Mayan EDMS's checkouts app attaches ``check_in`` to ``Document``); the static pass follows
such a call into the function."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


MODELS = """
    from django.db import models

    class Document(models.Model):
        label = models.CharField(max_length=20)

    class Checkout(models.Model):
        document = models.ForeignKey(Document, on_delete=models.CASCADE)

    class Audit(models.Model):
        note = models.CharField(max_length=20)
    """

METHODS = """
    from .models import Audit, Checkout

    def method_check_in(self, user=None):
        Checkout.objects.filter(document=self).delete()
        Audit.objects.create(note="checked in")

    def method_archive(self):
        Checkout.objects.filter(document=self).delete()
        Audit.objects.create(note="archived")
    """

VIEWS = """
    from .loading import load_document

    def check_in(request, pk):
        document = load_document(pk)
        document.check_in(user=request.user)

    def archive(request, pk):
        document = load_document(pk)
        document.archive()
    """

LOADING = """
    def load_document(pk):
        return None
    """


def files(apps: str) -> dict[str, str]:
    return {
        "docs/models.py": MODELS,
        "docs/methods.py": METHODS,
        "docs/loading.py": LOADING,
        "docs/views.py": VIEWS,
        "docs/apps.py": apps,
    }


def test_a_function_attached_with_add_to_class_runs_from_the_instance_call(rule: Rule):
    found = reported(analyze_source(files("""
        from django.apps import AppConfig

        from .methods import method_archive, method_check_in

        class DocsApp(AppConfig):
            name = "docs"

            def ready(self):
                Document = self.get_model(model_name="Document")
                Document.add_to_class(name="check_in", value=method_check_in)
                Document.add_to_class("archive", method_archive)
        """), rule))
    check_in = found[("docs/methods.py", "method_check_in")]
    assert check_in.severity in SHOWN
    assert [step.function for step in check_in.chain] == ["check_in", "method_check_in"]
    # Positional arguments attach alike.
    assert ("docs/methods.py", "method_archive") in found


def test_without_the_attachment_the_instance_call_reaches_nothing(rule: Rule):
    """Negative controls: no ``add_to_class`` for ``check_in``, and one whose value is a
    factory's result (not a reference the pass follows)."""
    found = reported(analyze_source(files("""
        from django.apps import AppConfig

        from .methods import method_archive

        def make_archive():
            return method_archive

        class DocsApp(AppConfig):
            name = "docs"

            def ready(self):
                Document = self.get_model(model_name="Document")
                Document.add_to_class("archive", make_archive())
        """), rule))
    assert ("docs/methods.py", "method_check_in") not in found
    assert ("docs/methods.py", "method_archive") not in found
