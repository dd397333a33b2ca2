"""A boundary decorator with a comment after it on its line still covers the function.
Round 10's kobocat FALSE: ``@transaction.atomic  # paranoia; redundant since
ATOMIC_REQUESTS...`` above ``create_instance`` was read with its comment as the decorator's
text, so no boundary matched and the submission path's writes were reported. tree-sitter's
Python ``decorator`` node holds the comment that follows it."""

from __future__ import annotations

from auditor.index.extract import index_source
from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

LOGGER = """
    from celery import shared_task
    from django.db import transaction

    from .models import Attachment, Instance


    @transaction.atomic  # paranoia; redundant since ATOMIC_REQUESTS is set
    def create_instance(xml):
        instance = Instance.objects.create(xml=xml)
        Attachment.objects.create(instance=instance)
        return instance


    def create_uncovered(xml):  # transaction.atomic would help here
        instance = Instance.objects.create(xml=xml)
        Attachment.objects.create(instance=instance)
        return instance


    @shared_task
    def import_one(xml):
        return create_instance(xml)


    @shared_task
    def import_uncovered(xml):
        return create_uncovered(xml)
"""


def test_a_decorator_is_indexed_without_the_comment_after_it():
    index = index_source("a.py", "@transaction.atomic  # paranoia\n@app.route('/x')  # route\ndef f():\n    pass\n", "python")
    assert index.definitions[0].decorators == ("transaction.atomic", "app.route('/x')")


def test_a_boundary_decorator_followed_by_a_comment_covers_the_function():
    found = reported(analyze_source({"app/logger.py": LOGGER}, load_rule("tx-outside-transaction")))
    assert not any(function in ("create_instance", "import_one") for _, function in found)
    assert any(function in ("create_uncovered", "import_uncovered") for _, function in found)
