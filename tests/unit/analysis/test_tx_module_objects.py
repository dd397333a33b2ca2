"""A module-level object's methods: ``namespace = EventNamespace(...)`` and
``event_checked_in = namespace.add_event_type(...)`` run once, when the module is first
imported (the Python reference, "The import system": a module's code is executed once and
the module object is kept in ``sys.modules``; every later ``from events import
event_checked_in`` binds that same object). So ``event_checked_in.commit(...)`` in a view runs
the method of the class the assignment built: here ``EventType.commit``, read from
``add_event_type``'s body, which returns a local variable holding ``EventType(...)``.
Mayan EDMS declares its event types this way (``mayan/apps/*/events.py``)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


FILES = {
    "docs/models.py": """
        from django.db import models

        class Checkout(models.Model):
            label = models.CharField(max_length=20)

        class Action(models.Model):
            verb = models.CharField(max_length=20)
        """,
    "docs/classes.py": """
        from .models import Action

        class EventType:
            def __init__(self, namespace, name):
                self.namespace = namespace
                self.name = name

            def commit(self, target=None):
                Action.objects.create(verb=self.name)

        class EventNamespace:
            def __init__(self, name):
                self.name = name
                self.event_types = []

            def add_event_type(self, name):
                event_type = EventType(namespace=self, name=name)
                self.event_types.append(event_type)
                return event_type
        """,
    "docs/events.py": """
        from .classes import EventNamespace

        namespace = EventNamespace(name="docs")

        event_checked_in = namespace.add_event_type(
            name="checked_in"
        )
        """,
    "docs/views.py": """
        from .events import event_checked_in
        from .models import Checkout

        def check_in(request, pk):
            checkout = Checkout.objects.get(pk=pk)
            event_checked_in.commit(target=checkout)
            checkout.delete()

        def check_in_with(request, pk, event_checked_in=None):
            checkout = Checkout.objects.get(pk=pk)
            event_checked_in.commit(target=checkout)
            checkout.delete()
        """,
}


def test_a_method_of_an_imported_module_level_object_runs(rule: Rule):
    found = reported(analyze_source(FILES, rule))
    finding = found[("docs/views.py", "check_in")]
    assert finding.severity in SHOWN
    assert ("docs/classes.py", "EventType.commit") in {(site.path, site.function) for site in finding.sequence}


def test_a_parameter_of_the_same_name_is_not_the_module_object(rule: Rule):
    """Negative control: inside ``check_in_with`` the name is a parameter, whatever the
    caller passes: its ``commit`` is not followed (the delete alone is left)."""
    found = reported(analyze_source(FILES, rule))
    finding = found.get(("docs/views.py", "check_in_with"))
    assert finding is None or ("docs/classes.py", "EventType.commit") not in {(site.path, site.function) for site in finding.sequence}
