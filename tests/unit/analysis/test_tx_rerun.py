"""Re-runnable Django sequences (fixtures/django_rerun): every write sets rows that exist to
the values it is given, so a re-run with the same input converges, and the sequence is
graded medium. Beside each, the sequence that stays critical because one write creates a
row, is relative, or may insert."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions import StaticResult
from auditor.analysis.transactions.base import Effect
from auditor.findings.model import Finding
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_app, analyze_source, reported

VIEWS = "teams/views.py"
RERUN_REASON = "every write updates or deletes existing rows to values a re-run with the same input writes again"


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


@pytest.fixture(scope="module")
def result(rule: Rule) -> StaticResult:
    return analyze_app("django_rerun", rule)


def finding(result: StaticResult, function: str) -> Finding:
    return reported(result)[(VIEWS, function)]


@pytest.mark.parametrize(
    "function",
    [
        "rename_team",  # a save of a fetched object, then a queryset update to a request value
        "archive_team",  # a save, then a queryset delete
        "rename_team_through_helper",  # the update sits in a helper: the kind survives nesting
    ],
)
def test_updates_and_deletes_of_existing_rows_are_graded_medium(result: StaticResult, function: str):
    found = finding(result, function)
    assert found.severity == "medium"
    assert f"Graded medium: {RERUN_REASON}; " in found.explanation


def test_an_update_is_named_as_such_in_the_sequence(result: StaticResult):
    found = finding(result, "rename_team")
    assert [site.effect for site in found.sequence] == [Effect.UPDATE.value, Effect.UPDATE.value]
    assert "team.save(...) (update)" in found.explanation


@pytest.mark.parametrize(
    "function",
    [
        "rename_and_open_task",  # objects.create: a new row
        "rename_and_open_task_through_helper",  # the create sits in a helper
        "found_team",  # x = Model(...); x.save(): a new row
        "transfer",  # update(balance=F("balance") - amount): relative
        "award_points",  # member.points += 5 before member.save()
        "spend_points",  # member.points = member.points - n before member.save()
        "add_task_and_rename",  # a related manager's create
        "save_form_and_rename",  # a ModelForm's save may insert
        "copy_team",  # x.pk = None; x.save(): a copy, a new row
        "save_unsaved_form_result",  # form.save(commit=False) then save(): may insert
        "save_fetched_result",  # get_team(1).save(): a call's result, not a named object
        "replace_tasks",  # objects.create reaches Task.save, whose super().save() inserts
    ],
)
def test_a_new_row_or_a_relative_write_keeps_the_sequence_critical(result: StaticResult, function: str):
    found = finding(result, function)
    assert found.severity in SHOWN, found.explanation
    assert RERUN_REASON not in found.explanation


def test_the_same_save_text_is_judged_in_each_function(rule: Rule):
    # ``team.save()`` rewrites a fetched team in one view and inserts a built one in the
    # other: the verdict on the call text is not shared between them.
    files = {
        "app/views.py": """
            from django.shortcuts import get_object_or_404
            from django.views.decorators.http import require_POST

            from .models import Member, Team

            @require_POST
            def built(request):
                team = Team(name="new")
                team.save()
                Member.objects.filter(pk=1).update(team_name="new")

            @require_POST
            def fetched(request, team_id):
                team = get_object_or_404(Team, pk=team_id)
                team.save()
                Member.objects.filter(pk=1).update(team_name="new")
            """,
        "app/models.py": "class Team:\n    pass\n\nclass Member:\n    pass\n",
    }
    found = reported(analyze_source(files, rule))
    assert found[("app/views.py", "built")].severity in SHOWN
    assert found[("app/views.py", "fetched")].severity == "medium"


def test_a_derived_data_function_keeps_its_own_reason(rule: Rule):
    files = {
        "app/tasks.py": """
            from celery import shared_task

            from .models import Line, Order

            @shared_task
            def recalculate_totals(order_id, total):
                Order.objects.filter(pk=order_id).update(total=total)
                Line.objects.filter(order_id=order_id).update(stale=total)
            """,
        "app/models.py": "class Order:\n    pass\n\nclass Line:\n    pass\n",
    }
    found = reported(analyze_source(files, rule))[("app/tasks.py", "recalculate_totals")]
    assert found.severity == "medium"
    assert "rebuilds derived data" in found.explanation and RERUN_REASON not in found.explanation


def test_non_django_writes_are_not_updates(rule: Rule):
    files = {
        "inventory/stock.go": """
            package inventory

            import (
                "database/sql"
                "net/http"
            )

            func Rename(db *sql.DB) http.HandlerFunc {
                return func(w http.ResponseWriter, r *http.Request) {
                    db.Exec("UPDATE items SET name = $1 WHERE id = $2", r.FormValue("name"), 1)
                    db.Exec("UPDATE stock SET label = $1 WHERE item = $2", r.FormValue("name"), 1)
                }
            }
            """,
    }
    result = analyze_source(files, rule)
    assert len(result.findings) == 1 and result.findings[0].severity in SHOWN
    assert all(site.effect == Effect.WRITE.value for found in result.findings for site in found.sequence)


def test_only_objects_known_to_be_rows_read_from_the_database_are_rewrites(rule: Rule):
    files = {
        "teams/models.py": "from django.db import models\n\nclass Team(models.Model):\n    pass\n\nclass Tag(models.Model):\n    pass\n",
        "teams/views.py": """
            from django.shortcuts import get_object_or_404

            from .models import Tag, Team

            def store(team, member):
                team.save()
                member.save()

            def create_team(request):
                store(Team(name=request.POST["name"]), Team(name="member"))

            def tag_team(request, pk):
                team = get_object_or_404(Team, pk=pk)
                tags = [Tag(name=name) for name in request.POST.getlist("tags")]
                team.save()
                for tag in tags:
                    tag.save()

            def relabel_tags(request, pk):
                team = get_object_or_404(Team, pk=pk)
                team.save()
                for tag in Tag.objects.filter(team=team):
                    tag.label = request.POST.get("label", "")
                    tag.save()
            """,
        "teams/urls.py": """
            from django.urls import path

            from . import views

            urlpatterns = [path("a", views.create_team), path("b/<int:pk>", views.tag_team), path("c/<int:pk>", views.relabel_tags)]
            """,
    }
    found = reported(analyze_source(files, rule))
    # Parameters: the caller may pass new objects (here it does), so the saves may insert.
    assert found[("teams/views.py", "store")].severity in SHOWN
    # A loop over objects built in the function inserts them.
    assert found[("teams/views.py", "tag_team")].severity in SHOWN
    # A loop over a queryset's rows rewrites them.
    relabel = found[("teams/views.py", "relabel_tags")]
    assert relabel.severity == "medium"
    assert RERUN_REASON in relabel.explanation


def test_a_hyphen_or_slash_inside_a_string_is_not_arithmetic():
    from auditor.analysis.transactions.grading import relative_value

    assert not relative_value('status="in-progress", day="2020-01-01", path="a/b"')
    assert relative_value('used=F("used") - 1') and relative_value("total=subtotal + fee")
