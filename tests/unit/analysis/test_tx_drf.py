"""Coverage by callers (fixtures/django_drf): DRF's dispatch as framework facts
(models/drf.yaml) and a project signal's senders.

``CreateModelMixin.create`` calls ``perform_create``, which calls ``serializer.save()``,
which (no instance) calls the serializer's ``create`` (rest_framework/mixins.py,
rest_framework/serializers.py ``BaseSerializer.save``); ``UpdateModelMixin`` the same with
``perform_update`` and ``update``. A serializer's ``create``/``update`` and a signal
receiver are entry points only where no real entry point is seen to reach them: otherwise
they are covered when every path from one runs through a boundary, and reported from the
entry point of one that does not."""

from __future__ import annotations

import textwrap

import pytest

from auditor.analysis.transactions import StaticResult, TxOptions
from auditor.analysis.transactions.analysis import Analysis
from auditor.analysis.transactions.explain import UNREACHABLE, AnalysisInputs, explain
from auditor.analysis.transactions.framework_facts import Kind, ModelsFileError, builtin_facts, parse_facts
from auditor.callgraph.graph import CallGraph
from auditor.index.extract import index_source
from auditor.rules.loader import Rule, load_rule
from tests.support import FIXTURES, analyze_app, analyze_source, load_app, reported

SERIALIZERS = "store/serializers.py"
SIGNALS = "store/signals.py"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def result(rule: Rule) -> StaticResult:
    return analyze_app("django_drf", rule)


def _chain(result: StaticResult, path: str, function: str) -> list[str]:
    return [step.function for step in reported(result)[(path, function)].chain]


# ----------------------------------------------------------------- DRF views and serializers


def test_a_base_class_with_an_atomic_perform_create_covers_the_serializer(result: StaticResult):
    # OrderViewSet inherits AtomicModelViewSet.perform_create: serializer.save() in atomic
    assert (SERIALIZERS, "OrderSerializer.create") not in reported(result)


def test_an_atomic_perform_update_calling_super_covers_get_serializer_class(result: StaticResult):
    # StockViewSet.get_serializer_class returns StockSerializer; perform_update runs
    # super().perform_update(serializer) (DRF's: serializer.save()) inside atomic
    assert (SERIALIZERS, "StockSerializer.update") not in reported(result)


def test_a_plain_model_viewset_reports_the_serializer_from_the_view(result: StaticResult):
    found = reported(result)[(SERIALIZERS, "InvoiceSerializer.create")]
    assert found.severity == "critical"
    assert _chain(result, SERIALIZERS, "InvoiceSerializer.create") == [
        "InvoiceViewSet.create", "InvoiceViewSet.perform_create", "InvoiceSerializer.create",
    ]  # fmt: skip
    assert found.chain[0].note.startswith("entry point: drf ModelViewSet.create of InvoiceViewSet")
    assert "entry point InvoiceViewSet.create (drf ModelViewSet.create of InvoiceViewSet)" in found.explanation


def test_view_actions_are_entry_points_where_they_lead_to_the_project(rule: Rule):
    # create and update lead to a perform_* override or a serializer's own method; Invoice's
    # update and every destroy lead nowhere in the project. The serializers and receivers a
    # real entry point reaches, and the perform_* hooks the actions run, are no entry points
    # of their own (a receiver of post_save too stays one).
    indexes, texts = load_app(FIXTURES / "django_drf")
    analysis = Analysis(indexes, texts, rule, CallGraph.build(indexes), TxOptions())
    assert {entry.ref.qualname for entry in analysis.entries()} == {
        "OrderViewSet.create", "OrderViewSet.update", "StockViewSet.create", "StockViewSet.update",
        "InvoiceViewSet.create", "pay_invoice", "count_stock", "recount", "mirror_invoice",
    }  # fmt: skip


def _fixture_files() -> dict[str, str]:
    root = FIXTURES / "django_drf"
    return {file.relative_to(root).as_posix(): file.read_text(encoding="utf-8") for file in sorted(root.rglob("*.py"))}


def test_atomic_requests_covers_the_view_and_so_the_serializer(rule: Rule):
    files = {**_fixture_files(), "config/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n'}
    assert (SERIALIZERS, "InvoiceSerializer.create") not in reported(analyze_source(files, rule))


def test_a_serializer_no_view_saves_stays_an_entry_point(rule: Rule):
    found = reported(analyze_source({"app/serializers.py": SERIALIZER_ALONE}, rule))
    assert found[("app/serializers.py", "TagSerializer.create")].chain[0].note == "entry point: drf serializer save()"


SERIALIZER_ALONE = """
    from rest_framework import serializers
    from .models import Tag, TagLog

    class TagSerializer(serializers.ModelSerializer):
        def create(self, validated_data):
            tag = Tag.objects.create(**validated_data)
            TagLog.objects.create(tag=tag)
            return tag
"""


def test_a_serializer_save_override_is_on_the_path(rule: Rule):
    files = {
        "app/serializers.py": SERIALIZER_ALONE + "\n        def save(self, **kwargs):\n            return super().save(**kwargs)\n",
        "app/views.py": """
            from rest_framework import generics
            from .serializers import TagSerializer

            class TagCreate(generics.CreateAPIView):
                serializer_class = TagSerializer
        """,
    }
    # super().save() is the path into create, not a write of its own
    found = reported(analyze_source(files, rule))[("app/serializers.py", "TagSerializer.create")]
    assert [step.function for step in found.chain] == ["TagCreate.create", "TagCreate.perform_create", "TagSerializer.save", "TagSerializer.create"]
    assert {site.function for site in found.sequence} == {"TagSerializer.create"}


# ------------------------------------------------------------------------ signal senders


def test_a_receiver_whose_only_sender_is_inside_atomic_is_covered(result: StaticResult):
    assert (SIGNALS, "book_payment") not in reported(result)


def test_a_receiver_with_one_sender_outside_a_transaction_is_reported_from_it(result: StaticResult):
    assert _chain(result, SIGNALS, "reset_reservations") == ["recount", "reset_reservations"]


# ------------------------------------------------------------------------- facts as data


def test_every_drf_row_names_the_drf_function_that_proves_it():
    rows = builtin_facts().invocations("drf-view") + builtin_facts().invocations("drf-serializer")
    assert {(row.method, row.calls) for row in rows} == {
        ("create", "perform_create"), ("update", "perform_update"), ("destroy", "perform_destroy"),
        ("perform_create", "serializer.create"), ("perform_update", "serializer.update"),
        ("save", "create"), ("save", "update"),
    }  # fmt: skip
    for row in rows:
        assert row.kind is Kind.INVOKES and row.framework == "drf" and row.bases
        assert row.proof is not None and row.proof.file.startswith("rest_framework/")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{call: atomic, kind: opens, calls: x}", "field 'calls' goes with 'invokes' rows only"),
        ("{method: save, through: model, kind: invokes, calls: create, bases: [A]}", "an 'invokes' row is through"),
        ("{method: save, through: drf-serializer, kind: invokes, bases: [A]}", "field 'calls' must name"),
        ("{method: save, through: drf-serializer, kind: invokes, calls: create}", "field 'bases' must list"),
    ],
)
def test_a_bad_invokes_row_is_refused(row: str, message: str):
    text = f"framework: drf\nsource: test\nfacts:\n  - {row}\n"
    with pytest.raises(ModelsFileError, match=message):
        parse_facts(text, "drf.yaml", builtin=True)


def test_serializer_save_in_a_perform_create_override_is_the_path_not_a_write(rule: Rule):
    files = {
        "app/serializers.py": SERIALIZER_ALONE,
        "app/views.py": """
            from rest_framework import viewsets
            from .serializers import TagSerializer

            class TagViewSet(viewsets.ModelViewSet):
                serializer_class = TagSerializer

                def perform_create(self, serializer):
                    serializer.save(owner=self.request.user)
        """,
    }
    found = reported(analyze_source(files, rule))[("app/serializers.py", "TagSerializer.create")]
    assert [step.function for step in found.chain] == ["TagViewSet.create", "TagViewSet.perform_create", "TagSerializer.create"]
    assert [site.line for site in found.sequence] == [6, 7]


HAND_BUILT = {
    "app/serializers.py": SERIALIZER_ALONE,
    "app/views.py": """
        from django.db import transaction
        from rest_framework import viewsets
        from rest_framework.views import APIView
        from .serializers import TagSerializer

        class TagViewSet(viewsets.ModelViewSet):
            serializer_class = TagSerializer

            def perform_create(self, serializer):
                with transaction.atomic():
                    serializer.save()

        class TagImportView(APIView):
            def post(self, request):
                serializer = TagSerializer(data=request.data)
                serializer.is_valid(raise_exception=True)
                serializer.save()
    """,
}


def test_a_hand_built_serializer_saved_outside_a_transaction_is_reported_from_its_view(rule: Rule):
    # the viewset's path is covered; the hand-written view's is not
    found = reported(analyze_source(HAND_BUILT, rule))[("app/serializers.py", "TagSerializer.create")]
    assert [step.function for step in found.chain] == ["TagImportView.post", "TagSerializer.create"]


def test_a_hand_built_serializer_saved_inside_atomic_is_covered(rule: Rule):
    views = HAND_BUILT["app/views.py"].replace(
        "                serializer.save()\n    ", "                with transaction.atomic():\n                    serializer.save()\n    "
    )
    assert views != HAND_BUILT["app/views.py"]
    assert ("app/serializers.py", "TagSerializer.create") not in reported(analyze_source({**HAND_BUILT, "app/views.py": views}, rule))


GET_SERIALIZER = {
    "app/serializers.py": SERIALIZER_ALONE.replace("def create(self, validated_data)", "def update(self, instance, validated_data)"),
    "app/views.py": """
        from django.db import transaction
        from rest_framework import viewsets
        from . import serializers


        def writable(method):
            def inner(*args, **kwargs):
                with transaction.atomic():
                    return method(*args, **kwargs)
            return inner


        class TagViewSet(viewsets.ModelViewSet):
            serializer_class = serializers.TagSerializer

            def update(self, request, *args, **kwargs):
                return self.update_tag(request.data)

            @writable
            def update_tag(self, data):
                serializer = self.get_serializer(self.get_object(), data=data)
                serializer.is_valid(raise_exception=True)
                return serializer.save()
    """,
}


def test_a_view_method_saving_its_get_serializer_reaches_the_serializer_through_its_boundary(rule: Rule):
    # Round 13's course-discovery ``CourseViewSet.update_course``: the view's own update
    # saves ``self.get_serializer(instance, data=...)`` under a project decorator that opens
    # ``transaction.atomic``; DRF's ``get_serializer`` builds ``serializer_class``.
    assert ("app/serializers.py", "TagSerializer.update") not in reported(analyze_source(GET_SERIALIZER, rule))


def test_a_view_method_saving_its_get_serializer_outside_a_transaction_is_reported_from_the_view(rule: Rule):
    views = GET_SERIALIZER["app/views.py"].replace("            @writable\n", "")
    assert views != GET_SERIALIZER["app/views.py"]
    found = reported(analyze_source({**GET_SERIALIZER, "app/views.py": views}, rule))[("app/serializers.py", "TagSerializer.update")]
    assert [step.function for step in found.chain] == ["TagViewSet.update", "TagViewSet.update_tag", "TagSerializer.update"]


DEAD_HOOK = {
    "app/serializers.py": SERIALIZER_ALONE,
    "app/views.py": """
        from rest_framework import viewsets
        from .models import Tag, TagLog
        from .serializers import TagSerializer

        class TagViewSet(viewsets.ModelViewSet):
            serializer_class = TagSerializer

            def update(self, request, *args, **kwargs):
                serializer = self.get_serializer(self.get_object(), data=request.data)
                serializer.is_valid(raise_exception=True)
                return serializer.save()

            def perform_update(self, serializer):
                Tag.objects.filter(pk=serializer.instance.pk).update(seen=True)
                TagLog.objects.create(tag=serializer.instance)
    """,
}


def test_a_hook_the_view_s_own_action_never_calls_is_no_entry_point(rule: Rule):
    # Round 13's galaxy_ng ``UserViewSet``: its ``update`` saves the serializer itself, so
    # DRF's ``perform_update`` never runs.
    assert ("app/views.py", "TagViewSet.perform_update") not in reported(analyze_source(DEAD_HOOK, rule))
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in DEAD_HOOK.items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    found = explain(AnalysisInputs(indexes, texts, rule), "app/views.py", "TagViewSet.perform_update", TxOptions(min_severity="low"))
    assert (found.outcome, found.summary) == (
        UNREACHABLE, "DRF never runs it: TagViewSet.update overrides the action and makes no call that may run perform_update"
    )


def test_a_hook_a_subclass_may_run_stays_reported(rule: Rule):
    # ``class Editable(mixins.UpdateModelMixin, TagViewSet)``: DRF's update is first in its MRO.
    views = DEAD_HOOK["app/views.py"] + """
        from rest_framework import mixins

        class Editable(mixins.UpdateModelMixin, TagViewSet):
            pass
    """
    found = reported(analyze_source({**DEAD_HOOK, "app/views.py": views}, rule))
    assert ("app/views.py", "TagViewSet.perform_update") in found


@pytest.mark.parametrize(
    "update",
    [
        "return super().update(request, *args, **kwargs)",
        "self.perform_update(self.get_serializer(self.get_object(), data=request.data))",
        "return viewsets.ModelViewSet.update(self, request, *args, **kwargs)",  # the base named, not super()
        "return self._update(request)\n\n            def _update(self, request):\n                return super().update(request)",
        "return run_locked(partial(super().update, request))",  # a reference, not a call
        "def go():\n                    return super(TagViewSet, self).update(request)\n                return run_locked(go)",
        "return bulk_update(self, request)",  # a library helper handed the view
    ],
)
def test_a_hook_the_view_s_action_runs_stays_reported(rule: Rule, update: str):
    views = DEAD_HOOK["app/views.py"].replace(
        "serializer = self.get_serializer(self.get_object(), data=request.data)\n"
        "                serializer.is_valid(raise_exception=True)\n"
        "                return serializer.save()",
        update,
    )
    assert views != DEAD_HOOK["app/views.py"]
    found = reported(analyze_source({**DEAD_HOOK, "app/views.py": views}, rule))
    assert [step.function for step in found[("app/views.py", "TagViewSet.perform_update")].chain][-1] == "TagViewSet.perform_update"


def test_a_receiver_of_a_django_signal_too_stays_an_entry_point(result: StaticResult):
    # pay_invoice sends invoice_paid inside atomic, but Django sends post_save on any save
    assert _chain(result, SIGNALS, "mirror_invoice") == ["mirror_invoice"]


REBOUND = {
    "app/serializers.py": """
        from rest_framework import serializers
        from .models import Link

        class LinkSerializer(serializers.ModelSerializer):
            def create(self, validated_data):
                return Link.objects.create(**validated_data)

            def update(self, instance, validated_data):
                Link.objects.filter(url=instance.url).exclude(pk=instance.pk).delete()
                return super().update(instance, validated_data)
    """,
    "app/views.py": """
        from rest_framework import viewsets
        from .models import Link, Issue
        from .serializers import LinkSerializer

        class LinkViewSet(viewsets.ViewSet):
            def create(self, request):
                serializer = LinkSerializer(data=request.data)
                serializer.save()
                Issue.objects.filter(pk=1).update(links=1)
                serializer = LinkSerializer(Link.objects.get(pk=serializer.data["id"]))
                return serializer.data

            def partial_update(self, request, pk):
                serializer = LinkSerializer(Link.objects.get(pk=pk), data=request.data, partial=True)
                serializer.save()
                Issue.objects.filter(pk=1).update(links=1)
    """,
}


def test_a_save_runs_the_serializer_its_variable_holds_at_that_line(rule: Rule):
    # rebound to an instance only after the save: the save ran create
    found = reported(analyze_source(REBOUND, rule))[("app/views.py", "LinkViewSet.create")]
    assert [(site.function, site.line) for site in found.sequence][0] == ("LinkSerializer.create", 6)


def test_a_serializer_method_calling_super_keeps_drf_s_write_at_the_save(rule: Rule):
    # update deletes, then super().update saves the instance (DRF's ModelSerializer.update)
    found = reported(analyze_source(REBOUND, rule))[("app/views.py", "LinkViewSet.partial_update")]
    assert [(site.function, site.line) for site in found.sequence] == [
        ("LinkViewSet.partial_update", 15), ("LinkSerializer.update", 9), ("LinkViewSet.partial_update", 16),
    ]  # fmt: skip


def test_only_the_hook_s_serializer_save_is_the_framework_s_call(rule: Rule):
    files = {
        "app/serializers.py": SERIALIZER_ALONE,
        "app/views.py": """
            from rest_framework import viewsets
            from .models import Audit
            from .serializers import TagSerializer

            class TagViewSet(viewsets.ModelViewSet):
                serializer_class = TagSerializer

                def perform_create(self, tag_serializer):
                    audit = Audit(action="create")
                    audit.save()
                    tag_serializer.save()
        """,
    }
    found = reported(analyze_source(files, rule))[("app/views.py", "TagViewSet.perform_create")]
    # audit.save() is a write of its own; tag_serializer.save() runs TagSerializer.create
    assert [(site.function, site.line) for site in found.sequence] == [
        ("TagViewSet.perform_create", 10), ("TagSerializer.create", 6), ("TagSerializer.create", 7),
    ]  # fmt: skip
    assert [step.function for step in found.chain] == ["TagViewSet.create", "TagViewSet.perform_create"]
