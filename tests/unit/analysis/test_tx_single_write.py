"""Paths that really write once, though two write or commit calls sit on them.

* A ``with scope() as session:`` block that commits its session itself, with nothing after
  that commit that may change the session, leaves the scope's commit at exit nothing to
  write (sqlalchemy/orm/session.py ``Session.commit`` flushes what is pending, and
  ``Session.merge`` leaves its argument "un-associated with the Session"). Only calls that
  resolve to code reaching no effect and making no session call may follow that commit; an
  unresolved call (kolibri's ``Storage.schedule`` runs its plugins' hooks) may stage a write.
* A Django ``x.save()`` right after ``x = M.objects.create(...)`` or a save of ``x``, with
  nothing done to ``x`` in between, writes the same row with the same values again
  (django/db/models/base.py ``Model.save`` -> ``_save_table``; django/db/models/query.py
  ``QuerySet.create`` saves with ``force_insert=True``): librephotos's
  ``create_download_job`` and ``Photo._generate_captions_im2txt``.
* A helper with no parameters that get-or-creates a constant row and sets one field to a
  constant behind a guard on that field writes nothing on its second call
  (django/db/models/query.py ``QuerySet.get_or_create`` reads the row each call):
  librephotos's ``get_deleted_user`` called twice by ``get_server_stats``.
"""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

SCOPE_COMMITS = {
    "jobs/storage.py": """
        import logging
        from contextlib import contextmanager
        from sqlalchemy.orm import sessionmaker

        logger = logging.getLogger(__name__)

        class Hook:
            def schedule(self, job, row):
                pass

        class Storage:
            def __init__(self, engine):
                self.sessionmaker = sessionmaker(bind=engine)
                self._hooks = []

            @contextmanager
            def session_scope(self):
                session = self.sessionmaker()
                try:
                    yield session
                    session.commit()
                except Exception:
                    session.rollback()
                    raise
                finally:
                    session.close()

            def schedule(self, job):
                with self.session_scope() as session:
                    row = session.get(Row, job.id)
                    if row and row.running:
                        raise Running()
                    row = Row(id=job.id, state=job.state)
                    session.merge(row)
                    try:
                        session.commit()
                    except Exception as e:
                        logger.error("commit failed: {}".format(e))
                    self._run_hooks(row)
                    return job.id

            def schedule_quiet(self, job):
                with self.session_scope() as session:
                    row = Row(id=job.id, state=job.state)
                    session.merge(row)
                    session.commit()
                    self._count_done(job.id)
                    return job.id

            def _count_done(self, job_id):
                self.last = job_id
                self.done = self.done + 1

            def notify(self, job_id):
                with self.session_scope() as session:
                    row = session.get(Row, job_id)
                    row.notified = True
                    session.commit()
                    self._touch(
                        row,
                    )

            def _touch(self, row):
                row.seen = True

            def _run_hooks(self, row):
                for hook in self._hooks:
                    hook.schedule(row.id, row)

            def mark(self, job_id, state):
                with self.session_scope() as session:
                    row = session.get(Row, job_id)
                    row.state = state
                    session.add(row)
                    session.commit()
                    row.finished = True
        """,
    "jobs/cli.py": """
        import click
        from .storage import Storage

        @click.command()
        def enqueue(job):
            Storage(engine).schedule(job)

        @click.command()
        def enqueue_quiet(job):
            Storage(engine).schedule_quiet(job)

        @click.command()
        def ping(job_id):
            Storage(engine).notify(job_id)

        @click.command()
        def finish(job_id):
            Storage(engine).mark(job_id, "done")
        """,
}

SAVES = {
    "photos/models.py": """
        from django.db import models

        class Job(models.Model):
            state = models.CharField(max_length=10)
            token = models.CharField(max_length=10)

            def reset_token(self):
                self.token = make_token()
                self.save(update_fields=["token"])

        class Photo(models.Model):
            caption = models.TextField()
            search = models.TextField()

            def save(self, *args, **kwargs):
                self.write_sidecar()
                return super().save(*args, **kwargs)

            def write_sidecar(self):
                pass

            def _recreate_search(self):
                self.search = self.caption.lower()
                self.save()

            def _recreate_and_touch(self):
                self.save()
                self.search = "x"

            def generate(self, commit):
                self.caption = make_caption(self)
                self._recreate_search()
                if commit:
                    self.save()

            def generate_changed(self, commit):
                self.caption = make_caption(self)
                self._recreate_search()
                self.caption = self.caption.strip()
                self.save()

            def generate_touched(self):
                self._recreate_and_touch()
                self.save()
        """,
    "photos/tasks.py": """
        from celery import shared_task
        from .models import Entry, Job, Photo

        @shared_task
        def create_job(user, kind):
            job = Job.objects.create(state="queued", kind=kind)
            if kind == "zip":
                enqueue(user=user, kind=kind)
            job.save()
            return job.id

        @shared_task
        def create_job_changed(user, kind):
            job = Job.objects.create(state="queued", kind=kind)
            job.state = "running"
            job.save()

        @shared_task
        def create_job_passed(user, kind):
            job = Job.objects.create(state="queued", kind=kind)
            start(job)
            job.save()

        @shared_task
        def create_job_aliased(user, kind):
            job = Job.objects.create(state="queued", kind=kind)
            other = job
            other.state = "running"
            job.save()

        @shared_task
        def add_to_playlist(playlist, media):
            entry, created = Entry.objects.get_or_create(playlist=playlist, media=media)
            entry.save()
            return created

        @shared_task
        def add_to_playlist_changed(playlist, media):
            entry, created = Entry.objects.get_or_create(playlist=playlist, media=media)
            entry.ordering = 1
            entry.save()

        @shared_task
        def revoke(job_id):
            job = Job.objects.get(id=job_id)
            job.state = "revoked"
            job.reset_token()
            job.save()

        @shared_task
        def caption(photo_id):
            photo = Photo.objects.get(id=photo_id)
            photo.generate(True)
            photo.generate_changed(True)
            photo.generate_touched()
        """,
}

# A ``scoped_session`` registry shared by the object: ``self.db()`` is the scope's session
# (sqlalchemy/orm/scoping.py ``scoped_session.__call__`` returns the registry's one session
# for the thread, and its proxied ``add`` stages into that same session), so what ``_audit``
# adds after the explicit commit is committed by the scope's commit at exit: a second commit.
SCOPED_REGISTRY = {
    "jobs/storage.py": """
        from contextlib import contextmanager
        from sqlalchemy.orm import scoped_session, sessionmaker

        from .models import Audit, Row

        class Storage:
            def __init__(self, engine):
                self.db = scoped_session(sessionmaker(bind=engine))

            @contextmanager
            def session_scope(self):
                session = self.db()
                try:
                    yield session
                    session.commit()
                except Exception:
                    session.rollback()
                    raise
                finally:
                    session.close()

            def record(self, job):
                with self.session_scope() as session:
                    session.add(Row(id=job.id))
                    session.commit()
                    self._audit()

            def _audit(self):
                self.db.add(Audit(job=0))
        """,
    "jobs/models.py": """
        from sqlalchemy import Column, Integer
        from sqlalchemy.orm import declarative_base

        Base = declarative_base()

        class Row(Base):
            __tablename__ = "row"
            id = Column(Integer, primary_key=True)

        class Audit(Base):
            __tablename__ = "audit"
            id = Column(Integer, primary_key=True)
            job = Column(Integer)
        """,
    "jobs/cli.py": """
        import click
        from .storage import Storage

        @click.command()
        def enqueue(job):
            Storage(None).record(job)
        """,
}

ENSURED = {
    "accounts/models.py": """
        from django.db import models

        class User(models.Model):
            username = models.CharField(max_length=10)
            is_active = models.BooleanField(default=True)

        def get_deleted_user():
            deleted: User = User.objects.get_or_create(username="deleted")[0]
            if deleted.is_active is not False:
                deleted.is_active = False
                deleted.save()
            return deleted

        def get_archive_user():
            archive = User.objects.get_or_create(username="archive")[0]
            archive.is_active = False
            archive.save()
            return archive

        def get_named_user(name):
            user = User.objects.get_or_create(username=name)[0]
            if user.is_active:
                user.is_active = False
                user.save()
            return user
        """,
    "accounts/views.py": """
        from rest_framework.views import APIView
        from .models import User, get_deleted_user, get_archive_user, get_named_user

        class Stats(APIView):
            def get(self, request):
                count = User.objects.exclude(id=get_deleted_user().id).count()
                rows = []
                for user in User.objects.exclude(id=get_deleted_user().id):
                    rows.append(user.username)
                return rows

        class Reactivate(APIView):
            def post(self, request):
                get_deleted_user()
                User.objects.filter(username="deleted").update(is_active=True)
                get_deleted_user()

        class Archive(APIView):
            def get(self, request):
                first = get_archive_user()
                second = get_archive_user()
                return first, second

        class Named(APIView):
            def get(self, request):
                return get_named_user(request.GET["a"]), get_named_user(request.GET["b"])
        """,
}

# The ensuring shape with a call in another arm: ``note()`` writes an Audit row on every call
# that finds the row already in its state (the second call of the two, at least).
ENSURED_ELSE = {
    "shop/models.py": """
        from django.db import models

        class User(models.Model):
            username = models.CharField(max_length=10)
            is_active = models.BooleanField(default=True)

        class Audit(models.Model):
            msg = models.CharField(max_length=10)
        """,
    "shop/views.py": """
        from django.http import JsonResponse
        from shop.models import Audit, User

        def note():
            Audit.objects.create(msg="deleted user touched")

        def get_deleted_user():
            deleted_user = User.objects.get_or_create(username="deleted")[0]
            if deleted_user.is_active is not False:
                deleted_user.is_active = False
                deleted_user.save()
            else:
                note()
            return deleted_user

        def get_elif_user():
            user = User.objects.get_or_create(username="elif")[0]
            if user.is_active is not False:
                user.is_active = False
                user.save()
            elif user.username:
                note()
            return user

        def stats(request):
            a = get_deleted_user()
            b = get_deleted_user()
            return JsonResponse({"a": a.pk, "b": b.pk})

        def elif_stats(request):
            a = get_elif_user()
            b = get_elif_user()
            return JsonResponse({"a": a.pk, "b": b.pk})
        """,
    "shop/urls.py": """
        from django.urls import path
        from shop import views

        urlpatterns = [path("s/", views.stats), path("e/", views.elif_stats)]
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def effects(found, key):
    return [site.effect for site in found[key].sequence]


def test_a_scope_whose_block_commits_last_commits_nothing_more(rule: Rule):
    found = reported(analyze_source(SCOPE_COMMITS, rule))
    # merge, an explicit commit, then only a call into code that reaches no effect, makes no
    # session call and no unresolved call: the scope's commit at exit commits nothing more
    assert ("jobs/storage.py", "Storage.schedule_quiet") not in found
    # a call after the explicit commit that does not resolve (``hook.schedule`` below
    # ``_run_hooks``, handed the row) may stage something: the exit commit is a second
    assert effects(found, ("jobs/storage.py", "Storage.schedule")) == ["commit", "commit"]
    assert found[("jobs/storage.py", "Storage.schedule")].severity == "high"
    # an attribute set on the loaded row after the explicit commit: the scope's commit writes it
    assert effects(found, ("jobs/storage.py", "Storage.mark")) == ["commit", "commit"]
    # the loaded row handed (on a continuation line) to a method that sets a field on it
    assert effects(found, ("jobs/storage.py", "Storage.notify")) == ["commit", "commit"]


def test_a_save_of_an_unchanged_object_is_not_a_second_write(rule: Rule):
    found = reported(analyze_source(SAVES, rule))
    assert effects(found, ("photos/tasks.py", "create_job")) == ["write"]  # create, then an unchanged save
    assert found[("photos/tasks.py", "create_job")].severity == "low"
    # a field set, or the object handed to a call, between the two: a second write
    assert effects(found, ("photos/tasks.py", "create_job_changed")) == ["write", "write"]
    assert effects(found, ("photos/tasks.py", "create_job_passed")) == ["write", "write"]
    # a change through another name bound to the object
    assert effects(found, ("photos/tasks.py", "create_job_aliased")) == ["write", "write"]
    # get_or_create leaves its object as the row holds it (QuerySet.get_or_create returns
    # get() or create()): saving it unchanged writes nothing new; a field set in between does
    assert effects(found, ("photos/tasks.py", "add_to_playlist")) == ["upsert or link"]
    assert effects(found, ("photos/tasks.py", "add_to_playlist_changed")) == ["upsert or link", "write"]
    # a save narrowed by update_fields leaves the state set before it for the next save
    assert len(effects(found, ("photos/tasks.py", "revoke"))) == 2
    # generate's second save is dropped; generate_changed (caption set again) and
    # generate_touched (the helper sets a field after its save) keep both
    assert effects(found, ("photos/tasks.py", "caption")) == ["write"] * 5


def test_an_ensuring_helper_writes_only_on_its_first_call(rule: Rule):
    found = reported(analyze_source(ENSURED, rule))
    assert ("accounts/views.py", "Stats.get") not in found
    # a write between the two calls may undo the first: the second may write again
    assert effects(found, ("accounts/views.py", "Reactivate.post")) == ["write", "idempotent write", "write"]
    # no guard: every call writes
    assert effects(found, ("accounts/views.py", "Archive.get")) == ["write", "write"]


def test_an_ensuring_helper_whose_other_arm_calls_a_writer_writes_every_call(rule: Rule):
    """``else: note()`` (or ``elif ...: note()``) writes an Audit row when the row is already
    in its state: the second call writes, so both calls' writes are two writes."""
    found = reported(analyze_source(ENSURED_ELSE, rule))
    for function in ("stats", "elif_stats"):
        assert found[("shop/views.py", function)].severity == "high"
        assert len(found[("shop/views.py", function)].sequence) >= 2


def test_a_call_after_the_explicit_commit_that_stages_through_a_shared_registry_is_a_second_commit(rule: Rule):
    """``self._audit()`` after ``session.commit()`` adds to the ``scoped_session`` the scope
    yielded (no "session" text on its line): the scope's commit at exit writes it."""
    found = reported(analyze_source(SCOPED_REGISTRY, rule))
    assert effects(found, ("jobs/storage.py", "Storage.record")) == ["commit", "commit"]
    assert found[("jobs/storage.py", "Storage.record")].severity == "high"
