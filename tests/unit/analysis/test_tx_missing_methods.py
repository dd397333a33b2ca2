"""A call on a row of a repository model to a method nothing gives that model always
raises ``AttributeError`` (Python's attribute lookup: the instance's ``__dict__``,
``type(obj).__mro__``, then ``__getattr__``; django/db/models/base.py ``Model`` and
``ModelBase`` for what Django adds): the path through it ends there, as at a ``raise``.
django-helpdesk's ``create_queue_permissions`` calls ``q.generate_permission_name()`` on a
``Queue`` that defines ``prepare_permission_name``: the ``q.save()`` after it never runs.

Counter-tests keep the real two-write shape reported: a method the model defines, one
Django's ``Model`` has, a model with a base the repository does not define, a name the
repository writes elsewhere (an assignment, ``setattr`` with its string), a receiver
bound twice, a model whose class body binds a value that may add methods
(``ModelBase.__new__`` -> ``add_to_class`` -> ``contribute_to_class``,
django/db/models/base.py; django-simple-history's ``HistoricalRecords`` adds
``save_without_historical_record``, simple_history/models.py) or carries a class decorator,
a call that may go unevaluated (``or``, ``x if c else y``, a lambda, a comprehension, an
``assert`` message: language reference, "Expressions"), and a ``values_list`` row (a tuple:
django/db/models/query.py ``QuerySet.values_list``), which is no model row."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.missing_methods import DJANGO_MODEL_METHODS
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = '''
from django.db import models
{imports}


{decorator}class Queue({bases}):
    title = models.CharField(max_length=10)
    permission_name = models.CharField(max_length=10, blank=True)
{body}

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


def _shown(
    rule: Rule, command: str, method: str, *, bases: str = "models.Model", imports: str = "", extra: str = "", body: str = "",
    decorator: str = "",
) -> bool:
    """Whether the command's writes are reported by default (critical or high)."""
    models = MODELS.format(bases=bases, imports=imports, extra=extra, body=body, decorator=decorator)
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


CLOSED_BODIES = {
    "meta-docstring-literals": '''
    """A queue."""
    KINDS = (("a", "A"), ("b", "B"))
    limit = -1
    objects = models.Manager()
    rank = IntegerField(default=0)

    class Meta:
        ordering = ["title"]

    @property
    def label(self):
        return self.title

    @label.setter
    def label(self, value):
        self.title = value
''',
}


@pytest.mark.parametrize("body", CLOSED_BODIES.values(), ids=CLOSED_BODIES.keys())
def test_a_body_of_djangos_fields_managers_and_literals_is_closed(rule: Rule, body: str):
    imports = "from django.db.models import IntegerField"
    assert not _shown(rule, STRAIGHT, "generate_permission_name", body=body, imports=imports)


OPEN_BODIES = {
    "third-party-field": ("from simple_history.models import HistoricalRecords", "    history = HistoricalRecords()\n", ""),
    "repository-field": ("from shop.fields import AuditField", "    audit = AuditField()\n", ""),
    "call-in-body": ("from shop.registry import register", "    register(locals())\n", ""),
    "unknown-method-decorator": ("from shop.hooks import hook", "    @hook\n    def ping(self):\n        return 1\n", ""),
    "class-decorator": ("from shop.registry import register", "", "@register\n"),
}


@pytest.mark.parametrize(("imports", "body", "decorator"), OPEN_BODIES.values(), ids=OPEN_BODIES.keys())
def test_a_body_binding_what_may_add_methods_is_not_closed(rule: Rule, imports: str, body: str, decorator: str):
    assert _shown(rule, STRAIGHT, "generate_permission_name", body=body, imports=imports, decorator=decorator)


SOMETIMES_EVALUATED = {
    "or": "basename = q.permission_name or q.{method}()",
    "and": "basename = options['fresh'] and q.{method}()",
    "conditional": "basename = q.{method}() if options['fresh'] else q.title",
    "lambda": "make = lambda: q.{method}()\n        basename = q.title",
    "comprehension": "basename = [q.{method}() for _ in options['names']]",
    "generator": "basename = list(q.{method}() for _ in options['names'])",
    "assert": "assert q.title, q.{method}()\n        basename = q.title",
    "chained-comparison": "basename = 0 < len(q.title) < q.{method}()",
}


@pytest.mark.parametrize("statement", SOMETIMES_EVALUATED.values(), ids=SOMETIMES_EVALUATED.keys())
def test_a_call_that_may_go_unevaluated_does_not_end_the_path(rule: Rule, statement: str):
    command = STRAIGHT.replace("basename = q.{method}()", statement)
    assert _shown(rule, command, "generate_permission_name")


def test_a_values_list_row_is_a_tuple_not_a_row(rule: Rule):
    command = STRAIGHT.replace(
        'q = Queue.objects.get(pk=options["pk"])\n        basename = q.{method}()\n        q.save()',
        'q = Queue.objects.values_list("title", flat=False).first()\n        basename = q.{method}("x")\n        Queue.objects.filter(pk=1).delete()',
    )
    assert "values_list" in command
    assert _shown(rule, command, "index")
