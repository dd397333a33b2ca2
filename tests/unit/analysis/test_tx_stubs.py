"""Type stubs (``.pyi``) checked into a repository stand for a library's code: a model
whose base resolves into one still writes through Django's own manager, not through the
stub's bodiless ``save``."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported

# The shape of tjcsl/ion's ``import_students`` command: Django stubs under a test folder
# whose ``django.db.models`` re-exports ``Model`` with ``*``, a user created through
# ``get_user_model()``, then a row of a model imported from a relative parent package.
STUBBED_DJANGO = {
    "site/test/stubs/django/db/__init__.pyi": "",
    "site/test/stubs/django/db/models/__init__.pyi": "from django.db.models.base import *\n",
    "site/test/stubs/django/db/models/base.pyi": """
        class Model:
            def __init__(self, *args, **kwargs): ...
            def save(self, force_insert=False, using=None): ...
        """,
    "site/__init__.py": "",
    "site/apps/__init__.py": "",
    "site/apps/users/__init__.py": "",
    "site/apps/users/models.py": """
        from django.db import models

        class Email(models.Model):
            address = models.EmailField()
        """,
    "site/apps/dataimport/__init__.py": "",
    "site/apps/dataimport/management/__init__.py": "",
    "site/apps/dataimport/management/commands/__init__.py": "",
    "site/apps/dataimport/management/commands/import_students.py": """
        from django.contrib.auth import get_user_model
        from django.core.management.base import BaseCommand

        from ....users.models import Email

        class Command(BaseCommand):
            def handle(self, *args, **options):
                user = get_user_model().objects.create(username=options["username"])
                Email.objects.create(address="a@example.com", user=user)
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def test_a_model_based_on_a_stubbed_class_keeps_its_manager_write(rule: Rule):
    found = reported(analyze_source(STUBBED_DJANGO, rule))
    finding = found[("site/apps/dataimport/management/commands/import_students.py", "Command.handle")]
    assert finding.title == "2 database writes outside a transaction in Command.handle"
    assert [step.line for step in finding.sequence] == [8, 9]
    assert finding.severity in SHOWN
