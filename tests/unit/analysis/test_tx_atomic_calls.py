"""Calls that are one atomic effect, and calls that are no write at all.

* ``QuerySet.update_or_create`` runs its lookup and the save inside
  ``transaction.atomic`` (django/db/models/query.py ``QuerySet.update_or_create``), and
  ``get_or_create``'s create path too (``QuerySet.get_or_create``): a model ``save``
  override run by them is inside that block, so the call is one effect, never the
  override's writes one by one.
* ``create`` runs the save outside any transaction of its own (``QuerySet.create``): the
  override's writes stay separate.
* Reading a ``@property`` runs its getter; the ``@x.setter`` that saves shares its
  qualified name but runs only on assignment (privacyidea's container ``get_as_dict``).
* A search index's ``delete()`` (elasticsearch-dsl ``Search``, a ``filter("term", ...)``
  no Django queryset takes) is no ORM write (readthedocs's ``remove_indexed_files``).
"""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.framework_facts import builtin_facts
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported

MEMBERSHIP = {
    "club/models.py": """
        from django.db import models

        class Member(models.Model):
            def save(self, *args, **kwargs):
                Member.objects.filter(user=self.user).exclude(pk=self.pk).update(active=False)
                super().save(*args, **kwargs)
                Badge.objects.create(member=self)

        class Badge(models.Model):
            pass
        """,
    "club/tasks.py": """
        from celery import shared_task
        from .models import Member

        @shared_task
        def enrol(user, club):
            Member.objects.update_or_create(user=user, defaults={"club": club})

        @shared_task
        def join(user, club):
            Member.objects.get_or_create(user=user, defaults={"club": club})

        @shared_task
        def admit(user, club):
            Member.objects.create(user=user, club=club)
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def test_update_or_create_and_get_or_create_run_the_save_override_in_their_own_atomic(rule: Rule):
    found = reported(analyze_source(MEMBERSHIP, rule))
    for function in ("enrol", "join"):  # one upsert: a single write (low), not the override's three
        single = found[("club/tasks.py", function)]
        assert single.severity == "low" and [site.line for site in single.sequence] == [single.line]
    # create saves outside any block of its own: the override's writes are reached from it
    admitted = found[("club/models.py", "Member.save")]
    assert [step.function for step in admitted.chain] == ["admit", "Member.save"]


def test_the_atomic_manager_rows_name_their_proof():
    rows = {fact.method: fact for fact in builtin_facts().facts if fact.through == "manager" and fact.atomic}
    assert {"get_or_create", "update_or_create"} <= set(rows)
    assert rows["update_or_create"].proof is not None and rows["update_or_create"].proof.function == "QuerySet.update_or_create"


# ----------------------------------------------------------------- not a write


def test_reading_a_property_runs_its_getter_not_the_setter_that_saves(rule: Rule):
    # The getter and its @x.setter share one qualified name; the read runs the getter only.
    files = {
        "vault/box.py": """
            class Box:
                def __init__(self, row):
                    self._row = row

                @property
                def label(self):
                    return self._row.label

                @label.setter
                def label(self, value):
                    self._row.label = value
                    self._row.save()

                @property
                def owner(self):
                    return self._row.owner

                @owner.setter
                def owner(self, value):
                    self._row.owner = value
                    self._row.save()

                def as_dict(self):
                    found = {"label": self.label}
                    found["owner"] = self.owner
                    return found
            """,
        "vault/cli.py": """
            import click
            from .box import Box

            @click.command()
            def show(row):
                box = Box(row)
                print(box.as_dict())
            """,
    }
    assert not reported(analyze_source(files, rule))  # no read reaches the setters' saves


def test_a_getter_that_writes_is_still_followed(rule: Rule):
    files = {
        "vault/box.py": """
            from .models import Token

            class Box:
                @property
                def token(self):
                    Token.objects.create(box=1)
                    return 1

                def issue(self):
                    first = self.token
                    Token.objects.create(box=2)
                    return first
            """,
        "vault/models.py": "class Token:\n    pass\n",
        "vault/cli.py": """
            import click
            from .box import Box

            @click.command()
            def issue():
                Box().issue()
            """,
    }
    assert reported(analyze_source(files, rule))[("vault/box.py", "Box.issue")].severity in SHOWN


def test_a_search_index_delete_is_no_database_write(rule: Rule):
    files = {
        "docs/search.py": """
            from .documents import PageDocument
            from .models import Project

            def unindex(project):
                Project.objects.filter(pk=project.pk).update(indexed=False)
                pages = PageDocument().search().filter("term", project=project.slug)
                pages = pages.exclude("term", version="latest")
                pages.delete()
                stale = Project.objects.filter(parent=project)
                stale.delete()
            """,
        "docs/models.py": "class Project:\n    pass\n",
        "docs/documents.py": "class PageDocument:\n    pass\n",
        "docs/tasks.py": """
            from celery import shared_task
            from .search import unindex

            @shared_task
            def unindex_all(project):
                unindex(project)
            """,
    }
    found = reported(analyze_source(files, rule))[("docs/search.py", "unindex")]
    # the update and the queryset delete; the index's delete at line 7 is not one
    assert [site.line for site in found.sequence] == [5, 10]


# ----------------------------------------------------------------- one unit


def test_a_core_delete_statement_then_its_commit_is_one_unit(rule: Rule):
    # Table.delete() builds a Delete construct (sqlalchemy/sql/selectable.py
    # TableClause.delete); session.execute runs it inside the session's transaction and the
    # commit ends it: one commit, not a delete and then a commit.
    files = {
        "audit/rows.py": """
            def purge(session, table, condition):
                result = session.execute(table.delete().where(condition))
                session.commit()
                return result.rowcount

            def purge_twice(session, table, first, second):
                session.execute(table.delete().where(first))
                session.commit()
                session.execute(table.update().values(kept=True).where(second))
                session.commit()
            """,
        "audit/cli.py": """
            import click
            from .rows import purge, purge_twice

            @click.command()
            def rotate(session, table, condition):
                purge(session, table, condition)

            @click.command()
            def rotate_twice(session, table, first, second):
                purge_twice(session, table, first, second)
            """,
    }
    found = reported(analyze_source(files, rule))
    assert ("audit/rows.py", "purge") not in found  # one commit is no sequence
    # two statements, each committed: two commits, still on one path
    assert [site.effect for site in found[("audit/rows.py", "purge_twice")].sequence] == ["commit", "commit"]


SCOPES = {
    "ops/database.py": """
        from contextlib import contextmanager

        @contextmanager
        def get_session():
            session = SessionLocal()
            try:
                yield session
                session.commit()
            except Exception:
                session.rollback()
                raise
            finally:
                session.close()
        """,
    "ops/service.py": """
        def get_all(*, db_session):
            return db_session.query(Team)

        def rename(*, db_session, team):
            team.name = team.name.strip()
            db_session.add(team)
        """,
    "ops/cli.py": """
        import click
        from .database import get_session
        from .service import get_all, rename

        @click.command()
        def nightly():
            with get_session() as session:
                teams = get_all(db_session=session)
            for team in teams:
                with get_session() as session:
                    rename(db_session=session, team=team)

        @click.command()
        def report():
            with get_session() as session:
                teams = get_all(db_session=session)
            with get_session() as session:
                again = get_all(db_session=session)
            return teams, again

        @click.command()
        def consume(plugins):
            with get_session() as session:
                teams = get_all(db_session=session)
            with get_session() as session:
                for plugin in plugins:
                    plugin.instance.consume(db_session=session)
            with get_session() as session:
                for plugin in plugins:
                    plugin.instance.consume(db_session=session)
        """,
}


def test_a_session_scope_that_only_read_commits_nothing(rule: Rule):
    # Session.commit flushes pending changes and commits (sqlalchemy/orm/session.py
    # Session.commit): after a block that only read, it writes nothing.
    found = reported(analyze_source(SCOPES, rule))
    assert ("ops/cli.py", "report") not in found  # two read-only scopes: no effect at all
    assert ("ops/cli.py", "nightly") not in found  # the renames' scope commits; the read's does not
    # a session handed to code the graph cannot see may be written: those two scopes count
    consume = found[("ops/cli.py", "consume")]
    assert [site.effect for site in consume.sequence] == ["commit", "commit"]
