"""Django's admin runs a ModelAdmin's hooks inside the transaction its views open around a
POST (django/contrib/admin/options.py ``ModelAdmin.changeform_view``, ``delete_view``,
``changelist_view``; rows ``kind: runs-inside`` in models/django_admin.yaml): an override
of ``save_model``, ``save_related``, ``delete_model`` or a ``response_*`` hook is covered.
``delete_queryset`` runs from the "delete selected" action, which opens none: it stays an
entry point, as does a hook of a class that is no ModelAdmin, and a hook the project calls
itself (a custom admin view's ``self.delete_model(...)``)."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.framework_facts import Kind, ModelsFileError, builtin_facts, parse_facts
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


MODELS = """
    from django.db import models

    class Shelf(models.Model):
        name = models.CharField(max_length=20)

    class Book(models.Model):
        title = models.CharField(max_length=20)
        shelf = models.ForeignKey(Shelf, on_delete=models.CASCADE)

    class Note(models.Model):
        text = models.CharField(max_length=20)
    """

ADMIN = """
    from django.contrib import admin

    from .models import Book, Note, Shelf

    class AuditedAdmin(admin.ModelAdmin):
        def save_model(self, request, obj, form, change):
            obj.save()
            Note.objects.create(text="saved")

    @admin.register(Shelf)
    class ShelfAdmin(AuditedAdmin):
        def save_related(self, request, form, formsets, change):
            super().save_related(request, form, formsets, change)
            Book.objects.create(title="first", shelf=form.instance)
            Note.objects.create(text="related")

        def delete_model(self, request, obj):
            Book.objects.filter(shelf=obj).delete()
            Note.objects.create(text="deleted")

        def response_add(self, request, obj, post_url_continue=None):
            Note.objects.create(text="added")
            Book.objects.create(title="welcome", shelf=obj)
            return super().response_add(request, obj, post_url_continue)

        def delete_queryset(self, request, queryset):
            Book.objects.filter(shelf__in=queryset).delete()
            Note.objects.create(text="bulk")

    class BookInline(admin.TabularInline):
        model = Book

        def save_model(self, request, obj, form, change):
            obj.save()
            Note.objects.create(text="inline")
    """


def _found(rule: Rule) -> dict:
    return reported(analyze_source({"library/models.py": MODELS, "library/admin.py": ADMIN}, rule))


@pytest.mark.parametrize(
    "hook", ["AuditedAdmin.save_model", "ShelfAdmin.save_related", "ShelfAdmin.delete_model"]
)
def test_a_hook_the_admin_runs_in_its_transaction_is_covered(hook: str, rule: Rule):
    assert ("library/admin.py", hook) not in _found(rule)


def test_delete_queryset_runs_from_an_action_outside_any_transaction(rule: Rule):
    finding = _found(rule)[("library/admin.py", "ShelfAdmin.delete_queryset")]
    assert finding.severity in ("critical", "high")


def test_a_class_that_is_no_model_admin_keeps_its_hook(rule: Rule):
    # An inline admin's save_model is no hook the change form runs: no claim is made for it.
    assert ("library/admin.py", "BookInline.save_model") in _found(rule)


def test_a_project_view_calling_a_hook_outside_a_transaction_is_still_reported(rule: Rule):
    views = """
        from .admin import ShelfAdmin
        from .models import Shelf

        def quick_add(request):
            ShelfAdmin(Shelf, None).response_add(request, Shelf.objects.get(pk=1))
            return None
        """
    found = reported(analyze_source({"library/models.py": MODELS, "library/admin.py": ADMIN, "library/views.py": views}, rule))
    assert ("library/admin.py", "ShelfAdmin.response_add") in found or ("library/views.py", "quick_add") in found


CALLED_HOOKS_ADMIN = """
    from django.contrib import admin
    from django.shortcuts import redirect
    from django.urls import path

    from .models import Book, Note, Shelf

    @admin.register(Shelf)
    class ShelfAdmin(admin.ModelAdmin):
        actions = ["copy"]

        def save_model(self, request, obj, form, change):
            obj.save()
            Note.objects.create(text="stored")

        def delete_model(self, request, obj):
            Note.objects.create(text=f"emptied {obj.name}")
            obj.delete()

        def response_delete(self, request, obj_display, obj_id):
            Note.objects.create(text="gone")
            Book.objects.filter(shelf_id=obj_id).delete()
            return super().response_delete(request, obj_display, obj_id)

        @admin.action(description="Copy")
        def copy(self, request, queryset):
            for shelf in queryset:
                shelf.pk = None
                self.save_model(request, shelf, None, False)

        def get_urls(self):
            return [path("<int:pk>/empty/", self.admin_site.admin_view(self.empty))] + super().get_urls()

        def empty(self, request, pk):
            self.delete_model(request, Shelf.objects.get(pk=pk))
            return redirect("..")
    """


def test_a_hook_the_project_calls_itself_is_not_covered_by_the_admin(rule: Rule):
    """A custom admin view (``get_urls``) and an action run the hook outside the admin's
    transaction: a hook with a caller in the project is judged as if no row named it."""
    found = reported(analyze_source({"library/models.py": MODELS, "library/admin.py": CALLED_HOOKS_ADMIN}, rule))
    for hook in ("ShelfAdmin.delete_model", "ShelfAdmin.save_model"):
        finding = found[("library/admin.py", hook)]
        assert finding.severity in ("critical", "high")
        assert finding.title == f"2 database writes outside a transaction in {hook}"
    assert ("library/admin.py", "ShelfAdmin.response_delete") not in found  # no project caller: covered


def test_every_admin_row_names_the_django_function_that_proves_it():
    rows = builtin_facts().run_inside("django-admin")
    assert {row.method for row in rows} == {
        "save_form", "save_model", "save_related", "save_formset", "log_addition", "response_add", "response_change",
        "delete_model", "response_delete",
    }  # fmt: skip
    for row in rows:
        assert row.kind is Kind.RUNS_INSIDE and row.bases == (
            "ModelAdmin", "django.contrib.auth.admin.UserAdmin", "django.contrib.auth.admin.GroupAdmin",
            "django.contrib.gis.admin.GISModelAdmin", "polymorphic.admin.PolymorphicChildModelAdmin",
            "polymorphic.admin.PolymorphicParentModelAdmin",
        )
        assert row.proof is not None and row.proof.file == "django/contrib/admin/options.py"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{method: save_model, through: drf-view, kind: runs-inside, bases: [ModelAdmin]}", "a 'runs-inside' row is through"),
        ("{method: save_model, through: django-admin, kind: runs-inside}", "field 'bases' must list"),
        ("{method: save_model, through: django-admin, kind: runs-inside, calls: x, bases: [A]}", "field 'calls' goes with 'invokes' rows only"),
        ("{call: atomic, kind: opens, bases: [A]}", "field 'bases' goes with 'invokes', 'runs-inside' and 'runs-in-request' rows only"),
    ],
)
def test_a_bad_runs_inside_row_is_refused(row: str, message: str):
    text = f"framework: django-admin\nsource: test\nfacts:\n  - {row}\n"
    with pytest.raises(ModelsFileError, match=message):
        parse_facts(text, "django_admin.yaml", builtin=True)


# Round 11's FALSE (openwisp-users ``UserAdmin.save_formset``, bluebottle
# ``PersonAdmin.save_formset``): the admin derived from a library admin that is a ModelAdmin,
# Django's own ``UserAdmin`` imported as ``BaseUserAdmin``, django-polymorphic's
# ``PolymorphicChildModelAdmin`` (a class that is no ModelAdmin keeps its hook: above).
LIBRARY_ADMINS = """
    from django.contrib import admin
    from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
    from polymorphic.admin import PolymorphicChildModelAdmin

    from .models import Book, Note

    @admin.register(Book)
    class MemberAdmin(BaseUserAdmin):
        def save_formset(self, request, form, formset, change):
            formset.save()
            Note.objects.create(text="members")

        def delete_queryset(self, request, queryset):
            queryset.delete()
            Note.objects.create(text="members gone")


    class UserAdmin:
        def save_formset(self, request, form, formset, change):
            formset.save()
            Note.objects.create(text="flask-admin style")


    class StaffAdmin(UserAdmin):
        def save_formset(self, request, form, formset, change):
            formset.save()
            Note.objects.create(text="staff")

    class PersonAdmin(PolymorphicChildModelAdmin):
        def save_formset(self, request, form, formset, change):
            formset.save()
            Note.objects.create(text="people")

    """


@pytest.mark.parametrize("hook", ["MemberAdmin.save_formset", "PersonAdmin.save_formset"])
def test_a_hook_of_a_library_model_admin_subclass_is_covered(hook: str, rule: Rule):
    found = reported(analyze_source({"library/models.py": MODELS, "library/people.py": LIBRARY_ADMINS}, rule))
    assert ("library/people.py", hook) not in found



def test_a_library_admin_subclass_runs_inside_and_a_namesake_does_not(rule: Rule):
    # The hooks the admin runs inside its transaction, read from the framework rows:
    # MemberAdmin derives from Django's UserAdmin (imported as BaseUserAdmin); StaffAdmin
    # from a project class that is only named ``UserAdmin``.
    import textwrap

    from auditor.analysis.transactions.analysis import Analysis, TxOptions
    from auditor.callgraph.graph import CallGraph, FunctionRef
    from auditor.index.extract import index_source

    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in {"library/models.py": MODELS, "library/people.py": LIBRARY_ADMINS}.items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    analysis = Analysis(indexes, texts, rule, CallGraph.build(indexes), TxOptions())
    inside = analysis.framework_calls.run_inside
    assert FunctionRef("library/people.py", "MemberAdmin.save_formset") in inside
    assert FunctionRef("library/people.py", "PersonAdmin.save_formset") in inside
    assert FunctionRef("library/people.py", "StaffAdmin.save_formset") not in inside
    assert FunctionRef("library/people.py", "UserAdmin.save_formset") not in inside
