"""The serializer class a view saves through, carried along the chain: a shared base
serializer's ``save`` override (one node of the call graph) runs, for a view whose
``serializer_class`` is ``S``, the ``create``/``update`` that ``S``'s MRO finds, not every
subclass's (DRF: ``serializer.save()`` -> ``BaseSerializer.save`` -> ``self.update``).
Where the chain carries no known serializer class the base ``save`` still reaches them all."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

SERIALIZERS = '''
from django.db import transaction
from rest_framework import serializers
from shop.models import Log


class BaseModelSerializer(serializers.ModelSerializer):
    def save(self, **kwargs):
        kwargs["current_user"] = self.context["request"].user
        return super().save(**kwargs)


class EventSerializer(BaseModelSerializer):
    def update(self, instance, validated_data):
        with transaction.atomic():
            instance.title = validated_data["title"]
            instance.save()
            Log.objects.create(event=instance)
        return instance


class ArticleSerializer(BaseModelSerializer):
    def update(self, instance, validated_data):
        instance.title = validated_data["title"]
        instance.save()
        Log.objects.create(article=instance)
        return instance
'''

VIEWS = '''
from rest_framework import viewsets
from shop.serializers import ArticleSerializer, EventSerializer
from shop.tasks import notify


class EventViewSet(viewsets.ModelViewSet):
    serializer_class = EventSerializer

    def update(self, request, *args, **kwargs):
        response = super().update(request, *args, **kwargs)
        notify.delay(self.kwargs["pk"])
        return response

    def perform_update(self, serializer):
        serializer.save(is_ready=False)


class ArticleViewSet(viewsets.ModelViewSet):
    serializer_class = ArticleSerializer

    def update(self, request, *args, **kwargs):
        response = super().update(request, *args, **kwargs)
        notify.delay(self.kwargs["pk"])
        return response
'''

MODELS = '''
from django.db import models


class Event(models.Model):
    title = models.CharField(max_length=10)


class Article(models.Model):
    title = models.CharField(max_length=10)


class Log(models.Model):
    event = models.ForeignKey(Event, null=True, on_delete=models.CASCADE)
    article = models.ForeignKey(Article, null=True, on_delete=models.CASCADE)
'''

TASKS = '''
from celery import shared_task


@shared_task
def notify(pk):
    print(pk)
'''

# A hand-written view calling the shared save on a serializer it builds from a name the
# analysis cannot resolve to a class: no serializer class on the chain, so the shared save
# may run every subclass's update (today's fan-out), the non-atomic one among them.
UNKNOWN = '''
from rest_framework.views import APIView
from shop.models import Log
from shop.serializers import BaseModelSerializer


class BulkView(APIView):
    def put(self, request, pk):
        serializer = self.serializer_for(request)(instance=self.get_object(), data=request.data)
        serializer.is_valid(raise_exception=True)
        BaseModelSerializer.save(serializer)
        Log.objects.create()
        return serializer.data
'''


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _files(views: str = VIEWS, **extra: str) -> dict[str, str]:
    return {"shop/serializers.py": SERIALIZERS, "shop/views.py": views, "shop/models.py": MODELS, "shop/tasks.py": TASKS, **extra}


def _functions(rule: Rule, files: dict[str, str]) -> dict[str, list[str]]:
    return {function: [step.function for step in finding.chain] for (_, function), finding in reported(analyze_source(files, rule)).items()}


def _runs(rule: Rule, files: dict[str, str], function: str) -> set[str]:
    """The functions whose effects the finding at ``function`` sequences."""
    found = {finding.function: finding for finding in reported(analyze_source(files, rule)).values()}
    return {site.function for site in found[function].sequence} if function in found else set()


def test_a_view_whose_serializer_update_is_atomic_gets_no_finding(rule: Rule):
    # EventViewSet saves through EventSerializer: the shared save runs its atomic update,
    # never ArticleSerializer's, so nothing of the view's path is outside a transaction.
    found = _functions(rule, _files())
    assert not {function for function in found if function.startswith("EventViewSet.")}
    assert all("EventViewSet" not in step for chain in found.values() for step in chain)


def test_a_view_whose_serializer_update_is_not_atomic_is_still_reported(rule: Rule):
    found = _functions(rule, _files())
    assert found["ArticleSerializer.update"][0].startswith("ArticleViewSet.")
    assert "ArticleSerializer.update" in _runs(rule, _files(), "ArticleSerializer.update")


def test_a_view_with_both_serializers_runs_the_non_atomic_update(rule: Rule):
    # get_serializer_class may return either: the save may run either update, the
    # non-atomic one among them, and the view's own task call follows it.
    views = VIEWS.replace(
        "    serializer_class = EventSerializer\n",
        "    serializer_class = EventSerializer\n\n"
        "    def get_serializer_class(self):\n"
        "        if self.action == \"partial_update\":\n"
        "            return ArticleSerializer\n"
        "        return EventSerializer\n",
    )
    assert "ArticleSerializer.update" in _runs(rule, _files(views), "EventViewSet.update")


def test_a_chain_without_a_known_serializer_class_keeps_the_fan_out(rule: Rule):
    files = _files(**{"shop/bulk.py": UNKNOWN})
    assert "ArticleSerializer.update" in _runs(rule, files, "BulkView.put")


HAND_BUILT = '''
from rest_framework.views import APIView
from shop.serializers import {serializer}
from shop.tasks import notify


class RenameView(APIView):
    def put(self, request, pk):
        serializer = {serializer}(self.get_object(), data=request.data)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        notify.delay(pk)
        return serializer.data
'''


@pytest.mark.parametrize(("serializer", "runs"), [("EventSerializer", False), ("ArticleSerializer", True)])
def test_a_hand_built_serializer_saves_through_its_own_update(rule: Rule, serializer: str, runs: bool):
    files = _files(**{"shop/rename.py": HAND_BUILT.format(serializer=serializer)})
    assert ("ArticleSerializer.update" in _runs(rule, files, "RenameView.put")) is runs


def test_a_getter_returning_more_than_class_names_keeps_the_fan_out(rule: Rule):
    # get_serializer_class looks its class up in a dict: serializer_class is not all it may
    # return, so the save carries no class and may run ArticleSerializer's update.
    views = VIEWS.replace(
        "    serializer_class = EventSerializer\n",
        "    serializer_class = EventSerializer\n"
        "    per_action = {\"partial_update\": ArticleSerializer}\n\n"
        "    def get_serializer_class(self):\n"
        "        return self.per_action.get(self.action, self.serializer_class)\n",
    )
    assert "ArticleSerializer.update" in _runs(rule, _files(views), "EventViewSet.update")


BOUND_TWICE = '''
from rest_framework.views import APIView
from shop.serializers import ArticleSerializer, EventSerializer
from shop.tasks import notify


class RenameView(APIView):
    def put(self, request, pk):
        if request.data.get("kind") == "article":
            serializer = ArticleSerializer(self.get_object(), data=request.data)
        else:
            serializer = EventSerializer(self.get_object(), data=request.data)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        notify.delay(pk)
        return serializer.data
'''


def test_a_serializer_bound_in_both_branches_saves_through_either(rule: Rule):
    files = _files(**{"shop/rename.py": BOUND_TWICE})
    assert "ArticleSerializer.update" in _runs(rule, files, "RenameView.put")


def test_a_serializer_rebound_from_a_call_keeps_the_fan_out(rule: Rule):
    rebound = BOUND_TWICE.replace("serializer = ArticleSerializer(", "serializer = self.pick(request)(").replace(
        "serializer = EventSerializer(", "serializer = EventSerializer("
    )
    files = _files(**{"shop/rename.py": rebound})
    assert "ArticleSerializer.update" in _runs(rule, files, "RenameView.put")
