"""A write whose failure the function catches and carries on past: the retry-based medium
grades (only deletes, idempotent writes, upserts then a write, one object) do not apply,
because nobody retries. Planted app: fixtures/django_caught."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import Step, caught, grade
from auditor.callgraph.graph import FunctionRef
from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, FIXTURES, analyze_app, analyze_source, reported

VIEWS = "library/views.py"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def found(rule: Rule) -> dict[tuple[str, str], Finding]:
    return reported(analyze_app("django_caught", rule))


def test_the_planted_app_is_a_fixture_dir():
    assert (FIXTURES / "django_caught" / VIEWS).is_file()


@pytest.mark.parametrize("function", ["retire_shelf", "clear_shelf_quietly"])
def test_deletes_before_a_caught_delete_are_critical(found: dict[tuple[str, str], Finding], function: str):
    finding = found[(VIEWS, function)]
    assert finding.severity in SHOWN
    assert "only deletes" not in finding.explanation
    assert "a later write's failure is caught and the function carries on" in finding.explanation


@pytest.mark.parametrize(
    "function",
    [
        "delete_shelf_or_fail",  # the handler re-raises
        "delete_shelf_or_refuse",  # the handler returns an error response
        "delete_shelf_first",  # the caught write is the first: nothing before it is left
        "prune_shelf",  # only a lookup's DoesNotExist is caught, not a write's failure
    ],
)
def test_a_failure_that_ends_the_function_or_comes_first_stays_medium(
    found: dict[tuple[str, str], Finding], function: str
):
    finding = found[(VIEWS, function)]
    assert finding.severity == "medium"
    assert "only deletes: a retry finishes the cleanup" in finding.explanation


def test_a_helper_that_carries_on_past_a_caught_failure_makes_its_caller_critical(found: dict[tuple[str, str], Finding]):
    finding = found[(VIEWS, "close_shelves")]
    assert finding.severity in SHOWN
    assert "a later write's failure is caught" in finding.explanation
    assert (VIEWS, "_drop_shelf") not in found  # folded into the caller that sequences it


def test_a_try_around_the_only_write_stays_low(found: dict[tuple[str, str], Finding]):
    assert found[(VIEWS, "rename_shelf")].severity == "low"


def test_an_else_clause_is_not_protected_by_the_handler(rule: Rule):
    source = {
        "app/views.py": """
            from django.db.models import ProtectedError
            from django.shortcuts import redirect
            from django.views.decorators.http import require_POST

            @require_POST
            def archive(request, shelf):
                shelf.labels.all().delete()
                try:
                    shelf.check_loans()
                except ProtectedError:
                    pass
                else:
                    shelf.delete()
                return redirect("shelves")
        """
    }
    finding = reported(analyze_source(source, rule))[("app/views.py", "archive")]
    assert finding.severity == "medium"


def test_a_java_catch_that_only_logs_carries_on(rule: Rule):
    source = {
        "src/main/java/shop/ShelfController.java": """
            package shop;

            @RestController
            public class ShelfController {
                private final LabelMapper labelMapper;
                private final ShelfMapper shelfMapper;

                @DeleteMapping("/shelves/{id}")
                public void remove(@PathVariable Long id) {
                    labelMapper.delete(id);
                    try {
                        shelfMapper.delete(id);
                    } catch (DataIntegrityViolationException e) {
                        log.warn("shelf {} kept", id);
                    }
                }

                @DeleteMapping("/shelves/{id}/strict")
                public void removeStrict(@PathVariable Long id) {
                    labelMapper.delete(id);
                    try {
                        shelfMapper.delete(id);
                    } catch (DataIntegrityViolationException e) {
                        throw new IllegalStateException(e);
                    }
                }
            }
        """
    }
    found = reported(analyze_source(source, rule))
    path = "src/main/java/shop/ShelfController.java"
    assert found[(path, "ShelfController.remove")].severity in SHOWN
    assert found[(path, "ShelfController.removeStrict")].severity == "medium"


def _delete(line: int, name: str) -> Step:
    return Step(line, f"{name}.delete()", (Effect.DELETE,), subject=name)


def test_grading_ignores_a_caught_step_before_any_write():
    ref = FunctionRef("app/views.py", "audit")
    log = Step(1, "calls audit", (Effect.AUDIT,), ref)
    assert grade((caught(log), _delete(2, "a"), _delete(3, "b")))[0] == "medium"
    assert grade((_delete(2, "a"), caught(_delete(3, "b"))))[0] == "critical"
    assert grade((_delete(2, "a"), _delete(3, "b"))) == ("medium", "only deletes: a retry finishes the cleanup")


def test_a_catch_all_or_a_tuple_with_a_database_error_carries_on(rule: Rule):
    source = {
        "app/views.py": """
            from django.db import IntegrityError
            from django.shortcuts import redirect
            from django.views.decorators.http import require_POST

            @require_POST
            def merge_everything(request, shelf, other):
                other.labels.all().delete()
                try:
                    other.delete()
                except Exception:
                    shelf.note = "merge incomplete"
                return redirect("shelves")

            @require_POST
            def merge_tuple(request, shelf, other):
                other.labels.all().delete()
                try:
                    other.delete()
                except (ValueError, IntegrityError) as error:
                    shelf.note = str(error)
                return redirect("shelves")

            @require_POST
            def merge_lookup(request, shelf, other):
                other.labels.all().delete()
                try:
                    other.delete()
                except (KeyError, LookupError):
                    shelf.note = "gone"
                return redirect("shelves")
        """
    }
    found = reported(analyze_source(source, rule))
    assert found[("app/views.py", "merge_everything")].severity in SHOWN
    assert found[("app/views.py", "merge_tuple")].severity in SHOWN
    assert found[("app/views.py", "merge_lookup")].severity == "medium"


def test_updates_of_existing_rows_before_a_caught_write_are_not_rerunnable(rule: Rule):
    files = {
        "library/views.py": """
            from django.db import IntegrityError

            from .models import Shelf

            def rename_shelf(request, pk):
                shelf = Shelf.objects.get(pk=pk)
                shelf.name = request.POST["name"]
                shelf.save()
                Shelf.objects.filter(parent=pk).update(label=shelf.name)

            def rename_shelf_quietly(request, pk):
                shelf = Shelf.objects.get(pk=pk)
                shelf.name = request.POST["name"]
                shelf.save()
                try:
                    Shelf.objects.filter(parent=pk).update(label=request.POST["name"])
                except IntegrityError:
                    pass
            """,
        "library/urls.py": """
            from django.urls import path

            from . import views

            urlpatterns = [path("rename/<int:pk>", views.rename_shelf), path("quiet/<int:pk>", views.rename_shelf_quietly)]
            """,
        "library/models.py": "from django.db import models\n\nclass Shelf(models.Model):\n    pass\n",
    }
    found = reported(analyze_source(files, rule))
    rename = found[("library/views.py", "rename_shelf")]
    assert rename.severity == "medium"  # a re-run writes the same values
    assert "a re-run with the same input writes again" in rename.explanation
    quiet = found[("library/views.py", "rename_shelf_quietly")]
    assert quiet.severity in SHOWN
    assert "a later write's failure is caught and the function carries on" in quiet.explanation


def test_a_caught_call_holding_two_writes_is_not_retried_either(rule: Rule):
    files = {
        "library/views.py": """
            from django.db import IntegrityError

            def clear(first, second):
                first.delete()
                second.delete()

            def prune(request, first, second, third):
                try:
                    clear(first, second)
                except IntegrityError:
                    pass
                third.delete()
            """,
        "library/urls.py": """
            from django.urls import path

            from . import views

            urlpatterns = [path("prune", views.prune)]
            """,
    }
    finding = reported(analyze_source(files, rule))[("library/views.py", "prune")]
    # clear() fails after its first delete, prune goes on: nobody retries the cleanup.
    assert finding.severity in SHOWN
    assert "a later write's failure is caught and the function carries on" in finding.explanation
