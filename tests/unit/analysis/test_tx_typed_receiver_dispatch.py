"""``self`` inside a base model's ``save`` has the class of the row the chain saves: a
variable read as a row of ``M`` (``m = M.objects.get(...)``, :mod:`.receivers`) or a
``M.objects.create(...)`` (Django's manager builds an ``M`` and calls its ``save``:
django/db/models/query.py ``QuerySet.create``) enters the inherited ``save`` with ``self``
an ``M``. Its self-calls then run what ``M``'s MRO finds (Python's attribute lookup on an
instance, ``type(obj).__mro__``), never a sibling subclass's override; and an override of
``M`` that writes nothing hides a writing one further up its MRO (kolibri's
``FacilityUser.infer_dataset`` reads a cached id; ``Facility.infer_dataset`` creates a
``FacilityDataset``, ``BaseLogModel.infer_dataset`` may save device settings).

The counter-tests keep the real two-write shape reported: a class whose own override
writes, or one that inherits a writing override, still sequences it with the save."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

MODELS = '''
from django.db import models


class Dataset(models.Model):
    name = models.CharField(max_length=10)


class DataModel(models.Model):
    dataset_id = models.IntegerField(null=True)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        self.ensure_dataset()
        super().save(*args, **kwargs)

    def ensure_dataset(self):
        if not self.dataset_id:
            self.dataset_id = self.infer_dataset()

    def infer_dataset(self):
        raise NotImplementedError


class Facility(DataModel):
    name = models.CharField(max_length=10)

    def infer_dataset(self):
        return Dataset.objects.create(name=self.name).id


class Member(DataModel):
    facility = models.ForeignKey(Facility, on_delete=models.CASCADE)

    def infer_dataset(self):
        return self.facility.dataset_id


class BaseLog(DataModel):
    class Meta:
        abstract = True

    def infer_dataset(self):
        return Dataset.objects.create(name="default").id


class UserLog(BaseLog):
    member = models.ForeignKey(Member, on_delete=models.CASCADE)

    def infer_dataset(self):
        return self.member.dataset_id


class AnonymousLog(BaseLog):
    pass
'''

FETCHED = '''
from django.http import JsonResponse
from shop.models import {cls}


def touch(request, pk):
    row = {cls}.objects.get(pk=pk)
    row.dataset_id = None
    row.save()
    return JsonResponse({{}})
'''

CREATED = '''
from django.http import JsonResponse
from shop.models import {cls}


def touch(request, pk):
    {cls}.objects.create(dataset_id=None)
    return JsonResponse({{}})
'''

URLS = '''
from django.urls import path
from shop.views import touch

urlpatterns = [path("touch/<int:pk>/", touch)]
'''


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _save_writes(rule: Rule, view: str, cls: str) -> set[str] | None:
    """The functions the finding shown by default at ``DataModel.save`` sequences (None:
    no finding; a single write is shown only at ``--min-severity low``)."""
    files = {"shop/models.py": MODELS, "shop/views.py": view.format(cls=cls), "shop/urls.py": URLS}
    finding = reported(analyze_source(files, rule)).get(("shop/models.py", "DataModel.save"))
    shown = finding is not None and finding.severity in ("critical", "high")
    return {site.function for site in finding.sequence} if shown else None


@pytest.mark.parametrize("view", [FETCHED, CREATED], ids=["fetched-row", "manager-create"])
@pytest.mark.parametrize("cls", ["Member", "UserLog"], ids=["own-quiet-override", "quiet-override-below-a-writing-base"])
def test_a_typed_row_runs_its_own_quiet_override_not_a_siblings(rule: Rule, view: str, cls: str):
    assert _save_writes(rule, view, cls) is None


@pytest.mark.parametrize("view", [FETCHED, CREATED], ids=["fetched-row", "manager-create"])
@pytest.mark.parametrize(
    "cls, writer",
    [("Facility", "Facility.infer_dataset"), ("AnonymousLog", "BaseLog.infer_dataset")],
    ids=["own-writing-override", "inherited-writing-override"],
)
def test_a_typed_row_whose_override_writes_is_still_reported(rule: Rule, view: str, cls: str, writer: str):
    assert _save_writes(rule, view, cls) == {writer, "DataModel.save"}


REBOUND = '''
from django.http import JsonResponse
from shop.models import {cls}


def pick(pk):
    return pk, None


def touch(request, pk):
    row = {cls}.objects.get(pk=pk)
    other, row = pick(pk)
    row.save()
    return JsonResponse({{}})
'''


def test_a_row_variable_bound_again_carries_no_class(rule: Rule):
    """``row`` may no longer hold the ``Member`` first read (every target position binds,
    Python's language reference "Naming and binding"): any subclass's override may run,
    so a writing one is still sequenced with the save."""
    assert _save_writes(rule, REBOUND, "Member") is not None
