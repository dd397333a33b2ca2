"""A project's own viewset mixins, named like DRF's (contentcuration's viewsets/base.py
shape): a ``CreateModelMixin(object)`` with ``perform_create`` but no ``create(request)``,
a ``RESTCreateModelMixin`` that adds one, and a base viewset whose
``get_serializer_class`` returns ``self.serializer_class``.

- DRF's router maps POST on a list route to ``create`` only when the viewset has that
  attribute (rest_framework/routers.py, ``SimpleRouter.get_method_map``); DRF's own
  ``create`` lives in rest_framework/mixins.py ``CreateModelMixin``. A project class that
  merely shares the name provides no action: no entry point ``TagViewSet.create``.
- Each view's ``self.get_serializer()`` builds its own ``get_serializer_class()``
  (rest_framework/generics.py, ``GenericAPIView.get_serializer``; DRF's
  ``get_serializer_class`` returns ``self.serializer_class``): a hook shared by several
  views saves, on a chain through one of them, through that view's serializer only.
"""

from __future__ import annotations

import pytest

from auditor.analysis.transactions import TxOptions
from auditor.analysis.transactions.analysis import Analysis
from auditor.callgraph.graph import CallGraph
from auditor.index.extract import index_source
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

BASE = """
from rest_framework import mixins
from rest_framework.serializers import ModelSerializer, Serializer
from rest_framework.viewsets import GenericViewSet


class BulkSerializer(ModelSerializer):
    def save(self, **kwargs):
        return super().save(**kwargs)


class CreateModelMixin(object):
    def perform_create(self, serializer, change=None):
        serializer.save()

    def create_from_changes(self, changes):
        for change in changes:
            serializer = self.get_serializer(data=change)
            self.perform_create(serializer, change=change)


class RESTCreateModelMixin(CreateModelMixin):
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        self.perform_create(serializer)


class BaseViewset(GenericViewSet):
    def get_serializer_class(self):
        if self.serializer_class is not None:
            return self.serializer_class
        return Serializer


class ValuesViewset(BaseViewset, CreateModelMixin):
    pass


class DRFCreateViewset(mixins.CreateModelMixin, BaseViewset):
    pass
"""

SERIALIZERS = """
from django.db import transaction
from app.base import BulkSerializer
from app.models import Change, Note, Tag


class TagSerializer(BulkSerializer):
    def create(self, validated_data):
        with transaction.atomic():
            tag = Tag.objects.create(**validated_data)
            Change.objects.create(tag=tag)
        return tag


class NoteSerializer(BulkSerializer):
    def create(self, validated_data):
        note = Note.objects.create(**validated_data)
        Change.objects.create(note=note)
        return note
"""


def _views(rest_serializer: str, drf_view: str = "") -> str:
    return f"""
from app.base import DRFCreateViewset, RESTCreateModelMixin, ValuesViewset
from app.serializers import NoteSerializer, TagSerializer


class TagViewSet(ValuesViewset):
    serializer_class = TagSerializer


class NoteViewSet(ValuesViewset):
    serializer_class = NoteSerializer


class ListViewSet(RESTCreateModelMixin, ValuesViewset):
    serializer_class = {rest_serializer}
{drf_view}
"""


DRF_VIEW = """

class PlainViewSet(DRFCreateViewset):
    serializer_class = NoteSerializer
"""


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _files(views: str) -> dict[str, str]:
    return {"app/base.py": BASE, "app/serializers.py": SERIALIZERS, "app/views.py": views}


def _entries(files: dict[str, str], rule: Rule) -> set[str]:
    import textwrap

    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    analysis = Analysis(indexes, texts, rule, CallGraph.build(indexes), TxOptions())
    return {entry.ref.qualname for entry in analysis.entries()}


def test_a_project_mixin_named_like_drf_s_gives_no_create_action(rule: Rule):
    # TagViewSet and NoteViewSet have perform_create (the project's CreateModelMixin) but no
    # create: no POST reaches them; only the REST mixin's own create is an entry point
    entries = _entries(_files(_views("TagSerializer")), rule)
    assert "RESTCreateModelMixin.create" in entries
    assert not {"TagViewSet.create", "NoteViewSet.create", "ListViewSet.create"} & entries


def test_drf_s_own_mixin_under_a_project_base_still_gives_the_action(rule: Rule):
    # PlainViewSet derives (through DRFCreateViewset) from rest_framework.mixins.CreateModelMixin
    files = _files(_views("TagSerializer", DRF_VIEW))
    assert "PlainViewSet.create" in _entries(files, rule)
    found = reported(analyze_source(files, rule))[("app/serializers.py", "NoteSerializer.create")]
    assert [step.function for step in found.chain] == [
        "PlainViewSet.create", "PlainViewSet.perform_create", "BulkSerializer.save", "NoteSerializer.create",
    ]  # fmt: skip


def test_a_shared_hook_saves_through_the_serializer_of_the_view_it_runs_for(rule: Rule):
    # RESTCreateModelMixin.create runs only for ListViewSet, whose TagSerializer writes in
    # atomic: NoteSerializer (NoteViewSet's, which has no create action) is not on its path
    assert ("app/serializers.py", "NoteSerializer.create") not in reported(analyze_source(_files(_views("TagSerializer")), rule))


def test_the_shared_hook_of_a_view_whose_serializer_writes_twice_is_reported(rule: Rule):
    found = reported(analyze_source(_files(_views("NoteSerializer")), rule))[("app/serializers.py", "NoteSerializer.create")]
    assert [step.function for step in found.chain] == [
        "RESTCreateModelMixin.create", "CreateModelMixin.perform_create", "BulkSerializer.save", "NoteSerializer.create",
    ]  # fmt: skip
    assert found.severity in {"critical", "high"}


def test_a_getter_returning_an_unknown_class_keeps_every_serializer(rule: Rule):
    # a get_serializer_class that returns a lookup may return any class: the shared save
    # then reaches every subclass's create, NoteSerializer's too
    files = _files(_views("TagSerializer"))
    files["app/base.py"] = BASE.replace("            return self.serializer_class\n", "            return SERIALIZERS[self.action]\n")
    assert ("app/serializers.py", "NoteSerializer.create") in reported(analyze_source(files, rule))


ALIASED = """
from rest_framework.mixins import CreateModelMixin as BaseCreateModelMixin
from rest_framework.serializers import ModelSerializer
from rest_framework.viewsets import GenericViewSet


class BulkSerializer(ModelSerializer):
    def save(self, **kwargs):
        return super().save(**kwargs)


class CreateModelMixin(BaseCreateModelMixin):
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        self.perform_create(serializer)


class ValuesViewset(GenericViewSet, CreateModelMixin):
    pass
"""

ALIASED_VIEWS = """
from app.base import ValuesViewset
from app.serializers import NoteSerializer


class NoteViewSet(ValuesViewset):
    serializer_class = NoteSerializer
"""


def test_drf_s_mixin_imported_under_an_alias_still_runs_its_hook(rule: Rule):
    # kolibri's shape: the project's CreateModelMixin derives from DRF's, imported as
    # BaseCreateModelMixin; DRF's perform_create (the view defines none) saves the serializer
    files = {"app/base.py": ALIASED, "app/serializers.py": SERIALIZERS, "app/views.py": ALIASED_VIEWS}
    found = reported(analyze_source(files, rule))[("app/serializers.py", "NoteSerializer.create")]
    assert [step.function for step in found.chain] == [
        "CreateModelMixin.create", "NoteViewSet.perform_create", "BulkSerializer.save", "NoteSerializer.create",
    ]  # fmt: skip
