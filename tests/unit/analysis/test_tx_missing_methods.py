"""A call on a row of a repository model to a method nothing gives that model always
raises ``AttributeError`` (Python's attribute lookup: the instance's ``__dict__``,
``type(obj).__mro__``, then ``__getattr__``; django/db/models/base.py ``Model`` and
``ModelBase`` for what Django adds): the path through it ends there, as at a ``raise``.
django-helpdesk's ``create_queue_permissions`` calls ``q.generate_permission_name()`` on a
``Queue`` that defines ``prepare_permission_name``: the ``q.save()`` after it never runs.

Counter-tests keep the real two-write shape reported: a method the model defines, one
Django's ``Model`` has, a model with a base the repository does not define, a name the
repository writes elsewhere (an assignment, ``setattr`` with its string), and a receiver
bound twice."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.missing_methods import DJANGO_MODEL_METHODS
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = '''
from django.db import models
{imports}


class Queue({bases}):
    title = models.CharField(max_length=10)
    permission_name = models.CharField(max_length=10, blank=True)

    def prepare_permission_name(self):
        self.permission_name = "queue." + self.title
        return self.permission_name


class Permission(models.Model):
    codename = models.CharField(max_length=10)
{extra}
'''

LOOP = '''
from django.core.management.base import BaseCommand
from shop.models import Permission, Queue


class Command(BaseCommand):
    def handle(self, *args, **options):
        if options["queues"]:
            queues = Queue.objects.filter(slug__in=options["queues"])
        else:
            queues = Queue.objects.all()
        for q in queues:
            if q.permission_name:
                basename = q.permission_name[9:]
            else:
                basename = q.{method}()
                q.save()
            Permission.objects.create(codename=basename)
'''

STRAIGHT = '''
from django.core.management.base import BaseCommand
from shop.models import Permission, Queue


class Command(BaseCommand):
    def handle(self, *args, **options):
        q = Queue.objects.get(pk=options["pk"])
        basename = q.{method}()
        q.save()
        Permission.objects.create(codename=basename)
'''

REBOUND = '''
from django.core.management.base import BaseCommand
from shop.models import Permission, Queue


class Command(BaseCommand):
    def handle(self, *args, **options):
        q = Queue.objects.get(pk=options["pk"])
        if options["other"]:
            q = options["other"]
        basename = q.{method}()
        q.save()
        Permission.objects.create(codename=basename)
'''

COMMAND = "shop/management/commands/permissions.py"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _shown(rule: Rule, command: str, method: str, *, bases: str = "models.Model", imports: str = "", extra: str = "") -> bool:
    """Whether the command's writes are reported by default (critical or high)."""
    models = MODELS.format(bases=bases, imports=imports, extra=extra)
    files = {"shop/models.py": models, COMMAND: command.format(method=method)}
    finding = reported(analyze_source(files, rule)).get((COMMAND, "Command.handle"))
    return finding is not None and finding.severity in ("critical", "high")


@pytest.mark.parametrize("command", [LOOP, STRAIGHT], ids=["loop-arm", "straight"])
def test_a_call_to_a_method_the_model_lacks_ends_the_path(rule: Rule, command: str):
    assert not _shown(rule, command, "generate_permission_name")


@pytest.mark.parametrize("command", [LOOP, STRAIGHT], ids=["loop-arm", "straight"])
def test_a_method_the_model_defines_runs_and_the_writes_are_reported(rule: Rule, command: str):
    assert _shown(rule, command, "prepare_permission_name")


@pytest.mark.parametrize("command", [LOOP, STRAIGHT], ids=["loop-arm", "straight"])
def test_a_method_of_djangos_model_runs(rule: Rule, command: str):
    assert "full_clean" in DJANGO_MODEL_METHODS
    assert _shown(rule, command, "full_clean")


@pytest.mark.parametrize("command", [LOOP, STRAIGHT], ids=["loop-arm", "straight"])
def test_a_model_with_a_base_from_outside_the_repository_may_have_it(rule: Rule, command: str):
    bases = "PermissionMixin, models.Model"
    assert _shown(rule, command, "generate_permission_name", bases=bases, imports="from guardian.mixins import PermissionMixin")


@pytest.mark.parametrize(
    "extra",
    [
        "\n\ndef _generate(queue):\n    return queue.title\n\n\nQueue.generate_permission_name = _generate\n",
        '\n\ndef install(fn):\n    setattr(Queue, "generate_permission_name", fn)\n',
    ],
    ids=["assigned", "setattr"],
)
def test_a_name_the_repository_writes_elsewhere_may_exist(rule: Rule, extra: str):
    assert _shown(rule, STRAIGHT, "generate_permission_name", extra=extra)


def test_a_receiver_bound_twice_may_hold_anything(rule: Rule):
    assert _shown(rule, REBOUND, "generate_permission_name")
