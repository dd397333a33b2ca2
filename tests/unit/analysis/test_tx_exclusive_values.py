"""Arms guarded by tests of one name against different string literals never both run on
one path: a value equals at most one literal. Round 9's onadata FALSE: ``process_label_request``
posts a label when ``request.method == "POST"`` and deletes one when ``request.method ==
"DELETE"``, two separate ``if`` statements. Counter-tests: the same literal tested twice,
two different names, and a name reassigned between the tests keep both writes."""

from __future__ import annotations

import pytest

from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

VIEWS = """
    from django.db import models
    from rest_framework.decorators import api_view

    from .models import Label, Tag


    @api_view(["POST", "DELETE"])
    def labels(request, label):
        if request.method == "POST":
            Label.objects.create(name=label)

        if request.method == 'GET' and label:
            data = []
        elif request.method == "DELETE" and label:
            Tag.objects.filter(name=label).delete()
        return data


    @api_view(["POST"])
    def same_value_twice(request, label):
        if request.method == "POST":
            Label.objects.create(name=label)
        if request.method == "POST":
            Tag.objects.filter(name=label).delete()


    @api_view(["POST"])
    def two_names(request, label):
        if request.method == "POST":
            Label.objects.create(name=label)
        if request.user.role == "admin":
            Tag.objects.filter(name=label).delete()


    @api_view(["POST"])
    def augmented(request, label, mode):
        if mode == "add":
            Label.objects.create(name=label)
            mode += "-then-purge"
        if mode == "add-then-purge":
            Tag.objects.filter(name=label).delete()


    @api_view(["POST"])
    def unpacked(request, label, mode):
        if mode == "add":
            Label.objects.create(name=label)
            mode, rest = request.data["next"]
        if mode == "purge":
            Tag.objects.filter(name=label).delete()


    @api_view(["POST"])
    def state_machine(request, label):
        if request.user.status == "new":
            Label.objects.create(name=label)
            request.user.activate()
        if request.user.status == "active":
            Tag.objects.filter(name=label).delete()


    @api_view(["POST"])
    def reassigned(request, label):
        mode = request.data.get("mode")
        if mode == "add":
            Label.objects.create(name=label)
            mode = "purge"
        if mode == "purge":
            Tag.objects.filter(name=label).delete()
"""


COMMAND = """
    from django.core.management.base import BaseCommand

    from app.models import Label, Tag


    class Command(BaseCommand):
        def handle(self, *args, **options):
            if options["operation"] == "register":
                Label.objects.create(name=options["name"])
            if options["operation"] == "unregister":
                Tag.objects.filter(name=options["name"]).delete()
"""

COMMAND_PATH = "app/management/commands/plugin.py"

CHANGED_OPTIONS = """
    from django.core.management.base import BaseCommand

    from app.models import Label, Tag


    class Command(BaseCommand):
        def handle(self, *args, **options):
            if options["operation"] == "register":
                Label.objects.create(name=options["name"])
                options.update(operation="unregister")
            if options["operation"] == "unregister":
                Tag.objects.filter(name=options["name"]).delete()
"""

CHANGED_PATH = "app/management/commands/chained.py"


@pytest.fixture(scope="module")
def found() -> dict:
    files = {"app/views.py": VIEWS, COMMAND_PATH: COMMAND, CHANGED_PATH: CHANGED_OPTIONS}
    return reported(analyze_source(files, load_rule("tx-outside-transaction")))


@pytest.mark.parametrize(("path", "function"), [("app/views.py", "labels"), (COMMAND_PATH, "Command.handle")])
def test_arms_guarded_by_different_values_of_one_name_never_both_run(found, path, function):
    # Round 9's onadata ``process_label_request``; round 11's arches ``Command.handle``
    # dispatching on ``options["operation"]``.
    finding = found.get((path, function))
    assert finding is None or (len(finding.sequence) == 1 and finding.severity.value == "low")


@pytest.mark.parametrize("function", ["same_value_twice", "two_names", "reassigned", "augmented", "unpacked", "state_machine"])
def test_arms_that_may_both_run_keep_both_writes(found, function):
    assert function in found[("app/views.py", function)].title
    assert len(found[("app/views.py", function)].sequence) == 2


def test_an_item_the_body_changes_keeps_both_writes(found):
    assert len(found[(CHANGED_PATH, "Command.handle")].sequence) == 2
