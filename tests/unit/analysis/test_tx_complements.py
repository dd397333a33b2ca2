"""Sibling ``if`` statements with negated tests (``if x: A`` ... ``if not x: B``) run one arm
on a path, never both, when the name is a local nothing touches between the tests: a local
flag and a None test. Counter-tests: an attribute (any call may set it), a rebinding, a call
on or a hand-off of the name (in a list too), a subscript write, a closure's ``nonlocal``, a
module-level name, a collection or a parameter tested for truth (another name may change it),
two different names and the same test twice keep both arms on one path."""

from __future__ import annotations

import pytest

from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

VIEWS = """
    from rest_framework.decorators import api_view

    from .models import READY, Label, Tag, mark_all, notify, prepare


    @api_view(["POST"])
    def flag(request, name):
        Label.objects.create(name=name)
        empty = not Tag.objects.filter(name=name).exists()
        if empty:
            Tag.objects.create(name=name)
        if not empty:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def none_test(request, name):
        label = Label.objects.filter(name=name).first()
        Label.objects.create(name=f"{name}-seen")
        if label is None:
            Tag.objects.create(name=name)
        notify(name)
        if label is not None:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def rebound(request, name):
        Label.objects.create(name=name)
        empty = not Tag.objects.filter(name=name).exists()
        if empty:
            Tag.objects.create(name=name)
            empty = False
        if not empty:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def handed_on(request, name):
        order = Label.objects.create(name=name)
        if not order.paid:
            charge(order)
        if order.paid:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def method_on_owner(request, name):
        order = Label.objects.create(name=name)
        if not order.paid:
            order.pay()
            Tag.objects.create(name=name)
        if order.paid:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def collection(request, name):
        items = [Label.objects.create(name=name)] if name else []
        if not items:
            items.append(Tag.objects.create(name=name))
        if items:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def two_names(request, name, keep):
        label, created = Label.objects.get_or_create(name=name)
        if created:
            Tag.objects.create(name=name)
        if not keep:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def same_test(request, name):
        label, created = Label.objects.get_or_create(name=name)
        if created:
            Tag.objects.create(name=name)
        if created:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def subscript_write(request, name):
        Label.objects.create(name=name)
        data = {}
        if not data:
            data["k"] = Tag.objects.create(name=name)
        if data:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def closure(request, name):
        Label.objects.create(name=name)
        empty = True

        def fill():
            nonlocal empty
            empty = False

        if empty:
            Tag.objects.create(name=name)
        fill()
        if not empty:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def module_flag(request, name):
        Label.objects.create(name=name)
        if READY:
            Tag.objects.create(name=name)
        prepare()
        if not READY:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def handed_in_a_list(request, name):
        Label.objects.create(name=name)
        empty = not Tag.objects.filter(name=name).exists()
        if empty:
            Tag.objects.create(name=name)
        mark_all([empty])
        if not empty:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def one_line(request, name):
        empty = not Tag.objects.filter(name=name).exists()
        if empty: Tag.objects.create(name=name)
        if not empty:
            Label.objects.create(name=name)


    @api_view(["POST"])
    def aliased_collection(request, name):
        Label.objects.create(name=name)
        errors = []
        box = errors
        if not errors:
            box.append("x")
            Tag.objects.create(name=name)
        if errors:
            Tag.objects.filter(name=name).delete()


    @api_view(["POST"])
    def flag_parameter(request, name, empty):
        Label.objects.create(name=name)
        if empty:
            Tag.objects.create(name=name)
        if not empty:
            Tag.objects.filter(name=name).delete()


    def charge(order):
        order.paid = True
        Tag.objects.create(name=order.name)
"""


@pytest.fixture(scope="module")
def found() -> dict:
    return reported(analyze_source({"app/views.py": VIEWS}, load_rule("tx-outside-transaction")))


@pytest.mark.parametrize("function", ["flag", "none_test"])
def test_arms_under_negated_tests_of_one_value_never_both_run(found, function):
    finding = found[("app/views.py", function)]
    assert "2 database writes" in finding.title
    assert len(finding.sequence) == 2  # the lookup and one arm's write, not both arms'


@pytest.mark.parametrize(
    "function",
    ["rebound", "handed_on", "method_on_owner", "collection", "two_names", "same_test", "subscript_write", "closure",
     "module_flag", "handed_in_a_list", "aliased_collection", "flag_parameter"],
)
def test_arms_whose_test_may_read_another_value_keep_both_writes(found, function):
    assert len(found[("app/views.py", function)].sequence) == 3


LOOPS = """
    from django.core.management.base import BaseCommand

    from app.models import Log, Video


    class Command(BaseCommand):
        def handle(self, *args, **options):
            for pk in options["pks"]:
                live = Video.objects.get(pk=pk)
                if live.starting_at:
                    Video.objects.filter(pk=pk).update(state=1)
                elif live.started:
                    Log.objects.create(video=live)

"""

BOTH = LOOPS.split("    class Command(BaseCommand):")[0] + """
    class Command(BaseCommand):
        def handle(self, *args, **options):
            for pk in options["pks"]:
                live = Video.objects.get(pk=pk)
                if live.starting_at:
                    Video.objects.filter(pk=pk).update(state=1)
                if live.started:
                    Log.objects.create(video=live)
"""


def test_a_write_on_the_line_of_its_test_is_kept_on_both_paths(found):
    # ``if empty: Tag.objects.create(...)`` on one line: the write sits with the condition,
    # so it stays on the path that skips the arm too (counted, never dropped).
    assert len(found[("app/views.py", "one_line")].sequence) == 2


def test_the_arms_of_an_if_inside_a_loop_still_exclude_each_other():
    # Round 14's marsha ``clean_aws_elemental_stack`` (and round 12's froide
    # ``deliver_no_spam``): the walker read a loop's body as part of its header, so every arm
    # of every branch in a loop was on one path.
    files = {"app/management/commands/clean.py": LOOPS, "app/management/commands/both.py": BOTH}
    found = reported(analyze_source(files, load_rule("tx-outside-transaction")))
    assert found[("app/management/commands/clean.py", "Command.handle")].severity.value == "low"
    assert len(found[("app/management/commands/clean.py", "Command.handle")].sequence) == 1
    assert len(found[("app/management/commands/both.py", "Command.handle")].sequence) == 2
