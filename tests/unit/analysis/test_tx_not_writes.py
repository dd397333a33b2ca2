"""Calls that look like writes but are not one of their own: what a SQLAlchemy session
holds until one commit is one unit, a call resolved to a project function adds that
function's writes (none when it writes nothing), and one call is one effect.

* ``Query.delete(synchronize_session=...)`` runs through the session's ``execute``
  (sqlalchemy/orm/query.py ``Query.delete``/``Query.update``): inside its transaction.
* A form built by a helper whose every branch returns a form class: its ``save`` is that
  class's method, not an ORM write.
* ``s = serializer(...); s.save()`` with ``serializer`` a parameter: the class each caller
  passes runs (DRF ``BaseSerializer.save`` is overridden there).
* ``self.save()`` that dispatches to a subclass's ``save`` override counts once.
* ``session.add(x)`` of the object a committing call handed back stages nothing.
"""

from __future__ import annotations

import textwrap

import pytest

from auditor.analysis.transactions import TxOptions, analyze_tx_outside_transaction
from auditor.analysis.transactions.explain import AnalysisInputs, explain
from auditor.findings.model import Finding
from auditor.index.extract import index_source
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

DB = {"app/db.py": "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n"}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _effects(found: dict[tuple[str, str], Finding], path: str, function: str) -> int:
    """How many effects the finding for ``function`` sequences (0 when none is reported)."""
    finding = found.get((path, function))
    return len(finding.sequence) if finding is not None else 0


# ------------------------------------------------------------ SQLAlchemy: one unit per commit

FORMS = """
    from .db import db
    from .models import Team

    class TeamForm:
        def save(self):
            return Team(name=self.name)

    class CheckedTeamForm(TeamForm):
        captcha = True

    class CommittingForm:
        def save(self):
            team = Team(name=self.name)
            db.session.add(team)
            db.session.commit()
            return team
"""

ROUTES = """
    from flask import Blueprint

    from .db import db
    from .forms import CheckedTeamForm, CommittingForm, TeamForm
    from .models import Member

    bp = Blueprint("teams", __name__)

    def team_form(checked):
        if checked:
            return CheckedTeamForm()
        return TeamForm()

    def committing_form():
        return CommittingForm()

    @bp.route("/teams", methods=["POST"])
    def create_team():
        form = team_form(True)
        team = form.save()
        db.session.add(team)
        db.session.commit()

    @bp.route("/teams/committed", methods=["POST"])
    def create_committed_team():
        form = committing_form()
        team = form.save()
        db.session.add(Member(team=team))
        db.session.commit()
"""


def test_a_form_save_that_only_builds_an_object_is_no_write(rule: Rule):
    files = {"app/forms.py": FORMS, "app/routes.py": ROUTES, "app/models.py": "class Team:\n    pass\n\nclass Member:\n    pass\n", **DB}
    found = reported(analyze_source(files, rule))
    assert ("app/routes.py", "create_team") not in found  # the add and the commit: one unit


def test_a_form_save_that_commits_before_a_second_commit_is_reported(rule: Rule):
    files = {"app/forms.py": FORMS, "app/routes.py": ROUTES, "app/models.py": "class Team:\n    pass\n\nclass Member:\n    pass\n", **DB}
    found = reported(analyze_source(files, rule))
    assert found[("app/routes.py", "create_committed_team")].title.startswith("2 commits on one path")


HISTORY = {
    "app/history.py": """
        from .models import Change, Version

        def history_queries(project):
            return [Change.query.filter_by(project=project), Version.query.filter_by(project=project)]

        def purge(project):
            for query in history_queries(project):
                query.delete(synchronize_session="fetch")
        """,
    "app/routes.py": """
        from flask import Blueprint

        from .db import db
        from .history import purge

        bp = Blueprint("history", __name__)

        @bp.route("/erase", methods=["POST"])
        def erase(project):
            purge(project)
            db.session.commit()

        @bp.route("/erase-twice", methods=["POST"])
        def erase_twice(project, other):
            purge(project)
            db.session.commit()
            purge(other)
            db.session.commit()
        """,
    "app/models.py": "class Change:\n    pass\n\nclass Version:\n    pass\n",
    **DB,
}


def test_a_query_delete_told_how_to_synchronize_the_session_is_inside_its_transaction(rule: Rule):
    found = reported(analyze_source(HISTORY, rule))
    assert ("app/routes.py", "erase") not in found


def test_two_commits_each_with_a_query_delete_pending_are_reported(rule: Rule):
    found = reported(analyze_source(HISTORY, rule))
    assert found[("app/routes.py", "erase_twice")].title.startswith("2 commits on one path")


EDIT = """
    from flask import Blueprint, g

    from .db import db
    from .models import Entry

    bp = Blueprint("projects", __name__)

    class Project:
        def switch(self, currency):
            self.currency = currency
            db.session.add(self)
            db.session.commit()

    class EditForm:
        def update(self, project):
            project.name = self.name
            project.switch(self.currency)
            return project

        def rebuild(self, project):
            project.switch(self.currency)
            return Entry(project=project)

    @bp.route("/edit", methods=["POST"])
    def edit():
        project = EditForm().update(g.project)
        db.session.add(project)
        db.session.commit()

    @bp.route("/edit-and-log", methods=["POST"])
    def edit_and_log():
        project = EditForm().update(g.project)
        db.session.add(Entry(project=project))
        db.session.commit()

    @bp.route("/rebuild", methods=["POST"])
    def rebuild():
        entry = EditForm().rebuild(g.project)
        db.session.add(entry)
        db.session.commit()
"""


def test_adding_back_the_object_a_committing_call_returned_leaves_nothing_pending(rule: Rule):
    found = reported(analyze_source({"app/routes.py": EDIT, "app/models.py": "class Entry:\n    pass\n", **DB}, rule))
    assert ("app/routes.py", "edit") not in found


def test_a_new_object_added_after_a_committing_call_is_a_second_commit(rule: Rule):
    found = reported(analyze_source({"app/routes.py": EDIT, "app/models.py": "class Entry:\n    pass\n", **DB}, rule))
    assert found[("app/routes.py", "edit_and_log")].title.startswith("2 commits on one path")
    assert found[("app/routes.py", "rebuild")].title.startswith("2 commits on one path")  # returns a new object


# ------------------------------------------------- DRF: a nested serializer's save is its own

NESTED = """
    from rest_framework import serializers
    from .models import Result, Score

    def save_related(serializer, data, context, fields):
        s = serializer(data=data, context=context)
        s.save(**fields)

    class ResultSerializer(serializers.Serializer):
        class SheetSerializer(serializers.Serializer):
            def save(self, **kwargs):
                kwargs["result"].set_score(self.validated_data["score"])
                return kwargs["result"]

        class ScoreSerializer(serializers.Serializer):
            def save(self, **kwargs):
                return Score.objects.create(result=kwargs["result"], value=self.validated_data["value"])

        def create(self, validated_data):
            result = Result(validated_data["ballot"])
            for sheet in validated_data["sheets"]:
                save_related(self.SheetSerializer, sheet, self.context, {"result": result})
            result.save()
            return result

    class ScoredResultSerializer(ResultSerializer):
        def create(self, validated_data):
            result = Result(validated_data["ballot"])
            result.save()
            for score in validated_data["scores"]:
                save_related(self.ScoreSerializer, score, self.context, {"result": result})
            return result
"""


def test_a_nested_serializer_whose_save_writes_nothing_adds_no_write(rule: Rule):
    found = reported(analyze_source({"app/serializers.py": NESTED}, rule))
    assert _effects(found, "app/serializers.py", "ResultSerializer.create") <= 1  # result.save() only


def test_a_nested_serializer_whose_save_writes_is_still_reported(rule: Rule):
    found = reported(analyze_source({"app/serializers.py": NESTED}, rule))
    finding = found[("app/serializers.py", "ScoredResultSerializer.create")]
    assert finding.title.startswith("2 database writes")


def test_a_nested_model_serializer_without_its_own_save_still_writes(rule: Rule):
    source = NESTED.replace(
        "class ScoreSerializer(serializers.Serializer):\n            def save(self, **kwargs):\n"
        "                return Score.objects.create(result=kwargs[\"result\"], value=self.validated_data[\"value\"])",
        "class ScoreSerializer(serializers.ModelSerializer):\n            class Meta:\n                model = Score",
    )
    assert "def save(self, **kwargs):\n                return Score" not in source
    found = reported(analyze_source({"app/serializers.py": source}, rule))
    assert found[("app/serializers.py", "ScoredResultSerializer.create")].title.startswith("2 database writes")
    assert _effects(found, "app/serializers.py", "ResultSerializer.create") <= 1


# ------------------------------------------------------------- one call, one effect

GEOCODED = {
    "app/models.py": """
        from django.db import models

        class Geocoded(models.Model):
            class Meta:
                abstract = True

            def locate(self, save=True):
                self.latitude = 1.0
                if save:
                    self.save()

        class Site(Geocoded):
            def save(self, *args, **kwargs):
                if self.name is None:
                    self.name = ""
                super().save(*args, **kwargs)

        class TaggedSite(Geocoded):
            def save(self, *args, **kwargs):
                super().save(*args, **kwargs)
                SiteTag.objects.create(site=self)

        class SiteTag(models.Model):
            pass
        """,
    "app/views.py": """
        from django.http import JsonResponse

        from .models import Site, TaggedSite

        def locate_site(request, pk):
            site = Site.objects.get(pk=pk)
            site.locate()
            return JsonResponse({})

        def locate_tagged_site(request, pk):
            site = TaggedSite.objects.get(pk=pk)
            site.locate()
            return JsonResponse({})
        """,
    "app/urls.py": """
        from django.urls import path

        from . import views

        urlpatterns = [path("site/<int:pk>", views.locate_site), path("tagged/<int:pk>", views.locate_tagged_site)]
        """,
}


def test_a_self_save_dispatched_to_an_override_is_one_write(rule: Rule):
    found = reported(analyze_source(GEOCODED, rule))
    assert _effects(found, "app/views.py", "locate_site") <= 1
    assert _effects(found, "app/models.py", "Geocoded.locate") <= 1


def test_an_override_that_writes_twice_is_still_two_writes(rule: Rule):
    found = reported(analyze_source(GEOCODED, rule))
    assert found[("app/models.py", "TaggedSite.save")].title.startswith("2 database writes")  # super().save(), then the tag


# ------------------------------------------------------------ a queue message's acknowledgement

# Round 9's EvalAI FALSE: a worker acknowledges each SQS message with ``message.delete()``
# (boto3 ``sqs.Message`` resource, ``DeleteMessage``), read as an ORM delete.
WORKER = """
    from celery import shared_task

    from .models import Submission


    @shared_task
    def drain(queue):
        for message in queue.receive_messages(WaitTimeSeconds=20):
            Submission.objects.create(body=message.body)
            message.delete()


    @shared_task
    def drain_rows(queue, rows):
        for message in queue.receive_messages(WaitTimeSeconds=20):
            message = rows.get(message.body)
            Submission.objects.create(body=message.body)
            message.delete()
"""


def test_a_queue_message_acknowledged_is_no_database_delete(rule: Rule):
    # It is an irreversible call outside the database: a side effect, never an ORM delete.
    found = reported(analyze_source({"app/worker.py": WORKER}, rule))
    finding = found.get(("app/worker.py", "drain"))
    assert finding is None or "delete" not in {site.effect for site in finding.sequence}


def test_a_loop_variable_rebound_to_a_row_keeps_its_delete(rule: Rule):
    found = reported(analyze_source({"app/worker.py": WORKER}, rule))
    assert "delete" in {site.effect for site in found[("app/worker.py", "drain_rows")].sequence}


# ------------------------------------------------------------ an HTTP POST to a search endpoint

# Round 9's timesketch FALSE: MISP's attribute search is a POST to ``/attributes/restSearch``
# read as an irreversible side effect.
LOOKUPS = """
    import requests
    from celery import shared_task

    from .models import Mark


    @shared_task
    def tag_matches(base, value):
        found = requests.post(f"{base}/attributes/restSearch/", json={"value": value})
        Mark.objects.create(value=value, hits=len(found.json()))


    @shared_task
    def tag_and_report(base, value):
        Mark.objects.create(value=value)
        requests.post(f"{base}/events/add/", json={"value": value})


    @shared_task
    def tag_and_index(value):
        Mark.objects.create(value=value)
        requests.post("http://elasticsearch:9200/marks/_doc", json={"value": value})


    @shared_task
    def tag_and_save_search(value):
        Mark.objects.create(value=value)
        requests.post("https://search.example.com/api/saved_search", json={"value": value})
"""


def test_a_post_to_a_search_endpoint_is_a_read(rule: Rule):
    found = reported(analyze_source({"app/lookups.py": LOOKUPS}, rule))
    assert _effects(found, "app/lookups.py", "tag_matches") <= 1


@pytest.mark.parametrize("function", ["tag_and_report", "tag_and_index", "tag_and_save_search"])
def test_a_post_that_adds_after_a_write_is_still_a_side_effect(rule: Rule, function: str):
    # Not a search: a host named ``elasticsearch`` or ``search``, a ``saved_search`` resource.
    found = reported(analyze_source({"app/lookups.py": LOOKUPS}, rule))
    assert _effects(found, "app/lookups.py", function) == 2


# ------------------------------------------------------------ get_or_create hands back a held row

# Round 9's timesketch FALSE: ``Group.get_or_create(...)`` returns a row it read through a
# query or added and committed; the command's ``db_session.add(group); db_session.commit()``
# after it writes nothing.
GROUPS = """
    import click

    from .db import db


    class BaseModel:
        @classmethod
        def get_or_create(cls, **kwargs):
            instance = cls.query.filter_by(**kwargs).first()
            if not instance:
                instance = cls(**kwargs)
                db.session.add(instance)
                db.session.commit()
            return instance

        @classmethod
        def build_and_commit(cls, **kwargs):
            db.session.add(Audit(**kwargs))
            db.session.commit()
            instance = cls(**kwargs)
            return instance


    class Group(BaseModel):
        pass


    class Audit(BaseModel):
        pass


    @click.command(name="create-group")
    @click.argument("name")
    def create_group(name):
        group = Group.get_or_create(name=name)
        db.session.add(group)
        db.session.commit()


    @click.command(name="build-group")
    @click.argument("name")
    def build_group(name):
        group = Group.build_and_commit(name=name)
        db.session.add(group)
        db.session.commit()
"""


def test_adding_back_a_row_get_or_create_returned_leaves_nothing_pending(rule: Rule):
    found = reported(analyze_source({"app/cli.py": GROUPS, **DB}, rule))
    assert ("app/cli.py", "create_group") not in found


def test_adding_a_new_object_a_committing_call_built_is_a_second_commit(rule: Rule):
    found = reported(analyze_source({"app/cli.py": GROUPS, **DB}, rule))
    assert found[("app/cli.py", "build_group")].title.startswith("2 commits on one path")


# ------------------------------------------------------------ a guard that raises between two commits

# Round 11's mwdb-core FALSE: ``is_new = obj.add_attribute(...)`` commits, then
# ``if is_new is None: raise NotFound(...)``, then ``db.session.commit()`` with nothing staged:
# the raising arm is on no path to the second commit. Counter-test: an arm that stages
# something and carries on keeps the second commit.
GUARDED = """
    from flask import Blueprint

    from .db import db

    bp = Blueprint("attributes", __name__)


    class Obj(db.Model):
        def add_attribute(self, key, value, commit=True):
            db.session.add(Attribute(key=key, value=value))
            if commit:
                db.session.commit()
            return True


    @bp.route("/objects/<int:pk>/attributes", methods=["POST"])
    def post_attribute(pk, key, value):
        obj = Obj.query.get(pk)
        is_new = obj.add_attribute(key, value)
        if is_new is None:
            raise NotFound(
                f"Attribute '{key}' is not defined"
            )
        db.session.commit()


    @bp.route("/objects/<int:pk>/attributes/caught", methods=["POST"])
    def post_caught_attribute(pk, key, value):
        obj = Obj.query.get(pk)
        is_new = obj.add_attribute(key, value)
        try:
            if is_new:
                db.session.add(Log(key=key))
                raise Duplicate(key)
        except Duplicate:
            pass
        db.session.commit()


    @bp.route("/objects/<int:pk>/attributes/logged", methods=["POST"])
    def post_logged_attribute(pk, key, value):
        obj = Obj.query.get(pk)
        is_new = obj.add_attribute(key, value)
        if is_new:
            db.session.add(Log(key=key))
        db.session.commit()
"""


def test_a_raising_guard_between_a_committing_call_and_a_commit_stages_nothing(rule: Rule):
    found = reported(analyze_source({"app/views.py": GUARDED, **DB}, rule))
    assert ("app/views.py", "post_attribute") not in found


@pytest.mark.parametrize("function", ["post_logged_attribute", "post_caught_attribute"])
def test_an_arm_that_stages_and_carries_on_keeps_the_second_commit(rule: Rule, function: str):
    # ``post_caught_attribute``: the arm raises, but the ``except`` carries on to the commit.
    found = reported(analyze_source({"app/views.py": GUARDED, **DB}, rule))
    assert found[("app/views.py", function)].title.startswith("2 commits on one path")


# ------------------------------------------------------------ tree operations need Django

GRAPH = """
    class Node:
        def __init__(self, name):
            self.name = name
            self.children = []

        def add_child(self, node):
            self.children.append(node)
"""


def test_tree_named_methods_of_a_project_without_django_are_no_writes(rule: Rule) -> None:
    # django-treebeard's and django-mptt's add_child/move_to are writes of Django models; a
    # FastAPI project's own graph node with an add_child only fills a list (fides's traversal).
    files = {
        "app/graph.py": GRAPH,
        "app/routes.py": """
            from fastapi import APIRouter
            from .graph import Node

            router = APIRouter()

            @router.get("/preview")
            def preview(nodes):
                root = lookup(nodes)
                for node in nodes:
                    root.add_child(node)
                    root.add_child(Node(node.name + "-copy"))
                return root
            """,
    }
    assert ("app/routes.py", "preview") not in reported(analyze_source(files, rule))
    # ``explain`` and the sink counts agree: no effect is listed for them either.
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {path: index_source(path, text, "python") for path, text in texts.items()}
    found = explain(AnalysisInputs(indexes, texts, rule), "app/routes.py", "preview", TxOptions(min_severity="low"))
    assert found.effects == ()
    assert analyze_tx_outside_transaction(indexes, texts, rule).sinks == 0


def test_treebeard_tree_operations_stay_writes_in_a_django_project(rule: Rule) -> None:
    files = {
        "shop/models.py": """
            from django.db import models
            from treebeard.mp_tree import MP_Node

            class Category(MP_Node):
                name = models.CharField(max_length=30)
            """,
        "shop/views.py": """
            from .models import Category

            def add_categories(request):
                root = Category.objects.get(pk=request.POST["root"])
                root.add_child(name=request.POST["first"])
                root.add_child(name=request.POST["second"])
            """,
    }
    assert _effects(reported(analyze_source(files, rule)), "shop/views.py", "add_categories") == 2
