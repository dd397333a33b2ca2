"""Coverage by callers through view classes a factory builds with ``type(name, bases,
{"serializer_class": ...})`` (:mod:`auditor.analysis.transactions.dynamic_views`).

DRF dispatches a built class as a written one: the router runs its ``create`` action
(rest_framework/mixins.py ``CreateModelMixin.create`` -> ``perform_create`` ->
``serializer.save()``; rest_framework/serializers.py ``BaseSerializer.save`` -> ``create``
without an instance, ``update`` with one). So the serializer is reached through the bases'
actions: covered when the project's base opens ``transaction.atomic`` around them, reported
from the base's action when it does not, and from any other caller that leaves it bare."""

from __future__ import annotations

import textwrap

import pytest

from auditor.analysis.transactions import TxOptions
from auditor.analysis.transactions.analysis import Analysis
from auditor.analysis.transactions.dynamic_views import dynamic_views
from auditor.callgraph.graph import CallGraph
from auditor.index.extract import index_source
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

SERIALIZERS = "api/serializers.py"

SERIALIZER_FILE = """
    from rest_framework import serializers
    from .models import Net, NetLog

    class NetSerializer(serializers.ModelSerializer):
        def create(self, validated_data):
            net = Net.objects.create(**validated_data)
            NetLog.objects.create(net=net)
            return net

        def update(self, instance, validated_data):
            instance.name = validated_data["name"]
            instance.save()
            NetLog.objects.create(net=instance)
            return instance
"""

REST_FILE = """
    import importlib
    from django.db import transaction
    from rest_framework import viewsets

    serializers_module = importlib.import_module("api.serializers")


    class BaseViewSet(viewsets.ModelViewSet):
        @transaction.atomic
        def create(self, request, *args, **kwargs):
            return super().create(request, *args, **kwargs)

        @transaction.atomic
        def update(self, request, *args, **kwargs):
            return super().update(request, *args, **kwargs)


    class FilterMixin:
        def get_queryset(self):
            return super().get_queryset()


    def model_view_set(model, mixins=None):
        scls = getattr(serializers_module, model + "Serializer")
        clsdict = {
            "serializer_class": scls,
        }
        if not mixins:
            return type(model + "ViewSet", (BaseViewSet,), clsdict)
        return type(model + "ViewSet", mixins + (BaseViewSet,), clsdict)


    NetViewSet = model_view_set("Net", mixins=(FilterMixin,))
"""


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _files(rest: str = REST_FILE, **extra: str) -> dict[str, str]:
    return {SERIALIZERS: SERIALIZER_FILE, "api/rest.py": rest, **extra}


def test_a_built_viewset_whose_base_action_is_atomic_covers_its_serializer(rule: Rule):
    found = reported(analyze_source(_files(), rule))
    assert (SERIALIZERS, "NetSerializer.create") not in found
    assert (SERIALIZERS, "NetSerializer.update") not in found


def test_a_built_viewset_on_a_base_without_atomic_is_reported_from_the_base_action(rule: Rule):
    rest = REST_FILE.replace("        @transaction.atomic\n", "")
    assert rest != REST_FILE
    found = reported(analyze_source(_files(rest), rule))[(SERIALIZERS, "NetSerializer.create")]
    assert [step.function for step in found.chain] == ["BaseViewSet.create", "BaseViewSet.perform_create", "NetSerializer.create"]


def test_an_uncovered_second_caller_keeps_the_finding(rule: Rule):
    task = """
        from celery import shared_task
        from .serializers import NetSerializer

        @shared_task
        def import_net(data):
            serializer = NetSerializer(data=data)
            serializer.is_valid(raise_exception=True)
            serializer.save()
    """
    found = reported(analyze_source(_files(**{"api/tasks.py": task}), rule))[(SERIALIZERS, "NetSerializer.create")]
    assert [step.function for step in found.chain] == ["import_net", "NetSerializer.create"]


def test_a_mixin_that_overrides_an_action_leaves_the_serializer_an_entry_point(rule: Rule):
    # the mixin's own create runs first: its dispatch is not read, so nothing is covered
    rest = REST_FILE.replace(
        "    class FilterMixin:\n",
        "    class FilterMixin:\n        def create(self, request, *args, **kwargs):\n            return super().create(request, *args, **kwargs)\n\n",
    )
    assert rest != REST_FILE
    found = reported(analyze_source(_files(rest), rule))[(SERIALIZERS, "NetSerializer.create")]
    assert found.chain[0].note.startswith("entry point: drf serializer save()")


def test_a_call_site_passing_a_name_not_written_out_builds_nothing(rule: Rule):
    rest = REST_FILE + "\n\ndef register(name):\n    return model_view_set(name)\n"
    found = reported(analyze_source(_files(rest), rule))
    assert found[(SERIALIZERS, "NetSerializer.create")].chain[0].note.startswith("entry point: drf serializer save()")


def test_the_views_read_name_their_bases_and_serializer(rule: Rule):
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in _files().items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    analysis = Analysis(indexes, texts, rule, CallGraph.build(indexes), TxOptions())
    views = dynamic_views(analysis.graph, analysis.facts)
    # one class per type() call the call site's factory makes (which one runs is not read)
    assert [[base.qualname for base in view.bases] for view in views] == [["BaseViewSet"], ["FilterMixin", "BaseViewSet"]]
    assert {serializer.qualname for view in views for serializer in view.serializers} == {"NetSerializer"}
    assert {view.call for view in views} == {("api/rest.py", 33)}
