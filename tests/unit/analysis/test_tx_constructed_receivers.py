"""``self`` along a chain has the class of the object the call was made on: a viewset
instance built by a constructor call (``exam_viewset = ExamViewset()`` at module level, or
a local bound so) runs the base method's ``self.list(...)`` by that class's MRO
(Python's attribute lookup on an instance: ``type(obj).__mro__``), never a sibling
subclass's override. Kolibri's composite views call ``serialize_list`` on such module-level
viewsets (kolibri/core/api.py ``ListModelMixin.serialize_list`` -> ``self.list``)."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

BASE = '''
class ListMixin(object):
    def list(self, request):
        return []

    def serialize_list(self, request):
        return self.list(request)
'''

VIEWSETS = '''
from rest_framework.viewsets import GenericViewSet
from shop.base import ListMixin
from shop.models import Notice


class LessonViewset(ListMixin, GenericViewSet):
    def list(self, request):
        return ["lesson"]


class NoticeViewset(ListMixin, GenericViewSet):
    def list(self, request):
        Notice.objects.create(kind="seen")
        Notice.objects.filter(kind="old").delete()
        return ["notice"]
'''

MODELS = '''
from django.db import models


class Notice(models.Model):
    kind = models.CharField(max_length=10)
'''

SUMMARY = '''
from django.http import JsonResponse
from django.views import View
from shop.viewsets import {cls}

lesson_viewset = {cls}()


class SummaryView(View):
    def get(self, request):
        lessons = lesson_viewset.serialize_list(request)
        more = lesson_viewset.serialize_list(request)
        return JsonResponse({{"lessons": lessons, "more": more}})
'''

LOCAL = '''
from django.http import JsonResponse
from django.views import View
from shop.viewsets import {cls}


class SummaryView(View):
    def get(self, request):
        viewset = {cls}()
        lessons = viewset.serialize_list(request)
        more = viewset.serialize_list(request)
        return JsonResponse({{"lessons": lessons, "more": more}})
'''

URLS = '''
from django.urls import path
from shop.summary import SummaryView

urlpatterns = [path("summary/", SummaryView.as_view())]
'''


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _summary_writes(rule: Rule, summary: str) -> set[str] | None:
    """The functions the finding at ``SummaryView.get`` sequences (None: no finding)."""
    files = {"shop/base.py": BASE, "shop/viewsets.py": VIEWSETS, "shop/models.py": MODELS, "shop/summary.py": summary, "shop/urls.py": URLS}
    finding = reported(analyze_source(files, rule)).get(("shop/summary.py", "SummaryView.get"))
    return None if finding is None else {site.function for site in finding.sequence}


@pytest.mark.parametrize("template", [SUMMARY, LOCAL], ids=["module-level", "local"])
def test_a_constructed_viewset_runs_its_own_list_not_a_siblings(rule: Rule, template: str):
    assert _summary_writes(rule, template.format(cls="LessonViewset")) is None


@pytest.mark.parametrize("template", [SUMMARY, LOCAL], ids=["module-level", "local"])
def test_a_constructed_viewset_whose_list_writes_is_still_reported(rule: Rule, template: str):
    assert _summary_writes(rule, template.format(cls="NoticeViewset")) == {"NoticeViewset.list"}


def test_a_module_level_name_bound_twice_carries_no_class(rule: Rule):
    # Rebound elsewhere in the module: what it holds is not known, so every override may run.
    summary = SUMMARY.format(cls="LessonViewset") + "\n\ndef reset():\n    global lesson_viewset\n    lesson_viewset = None\n"
    assert _summary_writes(rule, summary) == {"NoticeViewset.list"}


RUNNERS = '''
from django.http import JsonResponse
from shop.models import Notice


class Base:
    def run(self):
        self.step()

    def step(self):
        pass


class Dry(Base):
    def step(self):
        pass


class Real(Base):
    def step(self):
        Notice.objects.create(kind="a")
        Notice.objects.filter(kind="old").delete()


def make_pair(request):
    return request, Real()


def go(request):
    runner = Dry()
    {rebinding}
    runner.run()
    return JsonResponse({{}})
'''

RUNNER_URLS = 'from django.urls import path\nfrom shop.views import go\n\nurlpatterns = [path("g/", go)]\n'


@pytest.mark.parametrize(
    "rebinding",
    [
        "other, runner = make_pair(request)",
        "other = runner = make_pair(request)[1]",
        "with make_pair(request)[1] as runner:\n        pass",
        "if (runner := make_pair(request)[1]):\n        pass",
        "runner += make_pair(request)[1]",
        "[other, *runner] = make_pair(request)",
        "del runner\n    runner = Dry()",
    ],
    ids=["unpacked-second", "chained", "with-as", "walrus", "augmented", "starred", "deleted"],
)
def test_a_local_rebound_in_any_target_position_carries_no_class(rule: Rule, rebinding: str):
    """``runner`` may no longer hold the ``Dry()`` it was first bound to (Python's binding
    rules, language reference "Naming and binding": every target position binds): every
    override may run, so ``Real.step``'s two writes are reported through ``go``."""
    files = {"shop/models.py": MODELS, "shop/views.py": RUNNERS.format(rebinding=rebinding), "shop/urls.py": RUNNER_URLS}
    finding = reported(analyze_source(files, rule)).get(("shop/views.py", "Real.step"))
    assert finding is not None
    assert finding.severity == "high", finding.explanation
    assert [step.function for step in finding.chain] == ["go", "Base.run", "Real.step"]


def test_a_local_bound_once_to_a_constructor_still_carries_its_class(rule: Rule):
    files = {"shop/models.py": MODELS, "shop/views.py": RUNNERS.format(rebinding="other = make_pair(request)"), "shop/urls.py": RUNNER_URLS}
    assert reported(analyze_source(files, rule)).get(("shop/views.py", "Real.step")) is None
