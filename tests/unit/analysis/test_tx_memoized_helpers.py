"""Memoized helpers (round 6, an "infeasible path" cause): a helper that returns early once
an attribute of its argument is set, and sets it on the path that writes, writes once per
object. A view that calls it several times with the same object makes no sequence of its
own: the helper's writes are the helper's finding. A different object, a guard on another
attribute, or the attribute reset by the caller keep every write."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = """
    from django.db import models

    class Mark(models.Model):
        name = models.CharField(max_length=20)

    class Notice(models.Model):
        name = models.CharField(max_length=20)
    """

# Each helper writes two rows the first time it is asked about an object.
HELPERS = """
    import functools

    from .models import Mark, Notice

    @functools.lru_cache
    def ensure_defaults(name):
        Mark.objects.create(name=name)
        Notice.objects.create(name=name)
        return name

    def build_rights(user):
        if hasattr(user, "_rights"):
            return user._rights
        Mark.objects.create(name="seen")
        Notice.objects.create(name="welcome")
        user._rights = {"read": True}
        return user._rights

    def can(user, what):
        if not hasattr(user, "_rights"):
            user._rights = build_rights(user)
        return user._rights.get(what)

    def rights_of(user):
        return {"read": can(user, "read"), "write": can(user, "write")}

    def cached_on_dict(user):
        if "_rights" in user.__dict__:
            return user.__dict__["_rights"]
        Mark.objects.create(name="seen")
        Notice.objects.create(name="welcome")
        user.__dict__["_rights"] = {}
        return user.__dict__["_rights"]

    def cached_by_getattr(user):
        if getattr(user, "_rights", None) is not None:
            return user._rights
        Mark.objects.create(name="seen")
        Notice.objects.create(name="welcome")
        user._rights = {}
        return user._rights

    def guarded_elsewhere(user):
        if hasattr(user, "_rights"):
            return user._rights
        Mark.objects.create(name="seen")
        Notice.objects.create(name="welcome")
        user._other = {}
        return user._other

    def returns_before_setting(user, quick):
        if hasattr(user, "_rights"):
            return user._rights
        Mark.objects.create(name="seen")
        Notice.objects.create(name="welcome")
        if quick:
            return {}
        user._rights = {}
        return user._rights

    class Profile:
        def __init__(self):
            self._summary = None

        def summary(self):
            if self._summary is not None:
                return self._summary
            Mark.objects.create(name="seen")
            Notice.objects.create(name="welcome")
            self._summary = "done"
            return self._summary
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _findings(views: str, rule: Rule) -> dict:
    files = {"app/models.py": MODELS, "app/helpers.py": HELPERS, "app/views.py": views}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


@pytest.mark.parametrize(
    "calls",
    [
        "build_rights(request.user)\n    build_rights(request.user)",
        "can(request.user, 'a')\n    can(request.user, 'b')\n    can(request.user, 'c')",
        "rights_of(request.user)\n    can(request.user, 'delete')",  # keyed through a helper's parameter
        "cached_on_dict(request.user)\n    cached_on_dict(request.user)",
        "cached_by_getattr(request.user)\n    cached_by_getattr(request.user)",
        "request.profile.summary()\n    request.profile.summary()",
        "ensure_defaults('site')\n    ensure_defaults('site')",  # functools.lru_cache: the same call
    ],
)
def test_repeated_calls_on_one_object_write_once(calls: str, rule: Rule):
    views = f"""
from .helpers import build_rights, can, rights_of, cached_on_dict, cached_by_getattr, ensure_defaults

def page(request):
    {calls}
    return None
"""
    found = _findings(views, rule)
    assert ("app/views.py", "page") not in found
    assert any(path == "app/helpers.py" for path, _ in found)  # the helper's own two writes stay


@pytest.mark.parametrize(
    "calls",
    [
        "build_rights(request.user)\n    build_rights(request.owner)",  # two objects
        "guarded_elsewhere(request.user)\n    guarded_elsewhere(request.user)",  # tests one attribute, sets another
        "returns_before_setting(request.user, True)\n    returns_before_setting(request.user, True)",
        "build_rights(request.user)\n    request.user._rights = None\n    build_rights(request.user)",
        "build_rights(user)\n    user = request.owner\n    build_rights(user)",
        "build_rights(request.user)\n    request.user = request.owner\n    build_rights(request.user)",
        "Profile().summary()\n    Profile().summary()",  # a new object each time
        "ensure_defaults('site')\n    ensure_defaults('shop')",  # another cache entry
    ],
)
def test_calls_that_may_write_again_keep_the_finding(calls: str, rule: Rule):
    views = f"""
from .helpers import build_rights, guarded_elsewhere, returns_before_setting, Profile, ensure_defaults

def page(request, user=None):
    {calls}
    return None
"""
    assert ("app/views.py", "page") in _findings(views, rule)


# A command that opens one batch row per run and caches it on ``self``; ``{reset}`` is the
# body of a method that may drop the cached batch, which ``handle`` calls between two uses.
_RUNNER = """
    from django.core.management.base import BaseCommand

    from app.models import Mark, Notice

    class Command(BaseCommand):
        def __init__(self):
            self._batch = None

        def batch(self, name):
            if self._batch is not None:
                return self._batch
            Mark.objects.create(name=name)
            self._batch = Notice.objects.create(name=name)
            return self._batch

        def rollover(self):
            {reset}

        def handle(self, *args, **options):
            self.batch("first")
            self.rollover()
            self.batch("second")
    """


def _runner_findings(reset: str, rule: Rule) -> dict:
    files = {"app/models.py": MODELS, "app/management/commands/run.py": _RUNNER.format(reset=reset)}
    return {key: finding for key, finding in reported(analyze_source(files, rule)).items() if finding.severity in ("critical", "high")}


def test_a_cached_attribute_nothing_resets_writes_once_across_self_calls(rule: Rule):
    found = _runner_findings("return None", rule)
    assert ("app/management/commands/run.py", "Command.handle") not in found
    assert ("app/management/commands/run.py", "Command.batch") in found  # its own two writes stay


@pytest.mark.parametrize(
    "reset",
    [
        "self._batch = None",  # reset by a method the caller reaches between the two calls
        "self.__dict__.pop('_batch', None)",  # the cached_property invalidation
        "vars(self).pop('_batch', None)",
        "del self.__dict__['_batch']",
        "delattr(self, '_batch')",
    ],
)
def test_a_reset_the_caller_may_reach_between_two_calls_keeps_both_writes(reset: str, rule: Rule):
    assert ("app/management/commands/run.py", "Command.handle") in _runner_findings(reset, rule)
