"""Lazy initializers (round 12's FALSE findings): a getter that writes one row only when the
value it returns is missing (``if not self.secret: ...; self.save()``, a settings row made
when none exists) writes nothing on every later call, so a call into it is set aside from a
caller's sequence and named in the explanation. A getter that writes more, writes in an
``else`` arm, under another test, in a loop, or returns nothing stays counted."""

from __future__ import annotations

import textwrap

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


MODELS = """
    from django.db import models
    from django.utils.crypto import get_random_string

    class Request(models.Model):
        secret = models.CharField(max_length=25, blank=True)
        title = models.CharField(max_length=80)

        def get_secret(self):
            if not self.secret:
                self.secret = get_random_string(25)
                self.save()
            return self.secret

    class Audit(models.Model):
        request = models.ForeignKey(Request, on_delete=models.CASCADE)
"""

VIEW = """
    from django.shortcuts import get_object_or_404
    from .models import Audit, Request

    def check_code(request_obj, code):
        return request_obj.get_secret() == code

    def may_read(request_obj, user):
        return user.is_staff or request_obj.get_secret() == user.code

    def auth(request, pk, code):
        request_obj = get_object_or_404(Request, pk=pk)
        if check_code(request_obj, code) and may_read(request_obj, request.user):
            return "ok"
        return "denied"

    def rename(request, pk):
        request_obj = get_object_or_404(Request, pk=pk)
        secret = request_obj.get_secret()
        request_obj.title = request.POST["title"] + secret
        request_obj.save()
        Audit.objects.create(request=request_obj)
"""


def _found(models: str, view: str, rule: Rule) -> dict:
    return reported(analyze_source({"app/models.py": models, "app/views.py": view}, rule))


def test_a_secret_made_once_when_missing_is_no_write_of_its_callers(rule: Rule) -> None:
    found = _found(MODELS, VIEW, rule)
    assert ("app/views.py", "auth") not in found  # froide's ``auth``: the same lazy secret twice
    renamed = found[("app/views.py", "rename")]
    assert renamed.title == "2 database writes outside a transaction in rename"
    assert "lazy initializer" in renamed.explanation and "calls Request.get_secret" in renamed.explanation


@pytest.mark.parametrize(
    "getter",
    [
        # two rows made when missing: a failure between them is partial state
        """
        def get_secret(self):
            if not self.secret:
                self.secret = get_random_string(25)
                self.save()
                Audit.objects.create(request=self)
            return self.secret
        """,
        # the write is in the arm for a value that is there: it runs on every call
        """
        def get_secret(self):
            if not self.secret:
                return ""
            else:
                self.title = self.secret
                self.save()
            return self.secret
        """,
        # a test of something else
        """
        def get_secret(self):
            if self.title.startswith("x"):
                self.secret = get_random_string(25)
                self.save()
            return self.secret
        """,
        # nothing returned: no getter
        """
        def get_secret(self):
            if not self.secret:
                self.secret = get_random_string(25)
                self.save()
        """,
        # a write per item
        """
        def get_secret(self):
            for other in Request.objects.all():
                if not other.secret:
                    other.secret = get_random_string(25)
                    other.save()
            return self.secret
        """,
        # a write on another arm runs on every call
        """
        def get_secret(self):
            if not self.secret:
                self.secret = get_random_string(25)
                self.save()
            if self.title:
                self.title = self.title.strip()
                self.save()
            return self.secret
        """,
        # the object's own row, not a value it holds
        """
        def get_secret(self):
            if not self.pk:
                self.save()
            return self.secret
        """,
        # a flag set to a literal: a state change, not a value made
        """
        def get_secret(self):
            if not self.secret:
                self.secret = "closed"
                self.save()
            return self.secret
        """,
        # a delete is no initialization
        """
        def get_secret(self):
            if not self.secret:
                self.delete()
            return self.secret
        """,
        # rows made per item in a comprehension
        """
        def get_secret(self):
            if not self.secret:
                self.secret = [Audit.objects.create(request=self) for _ in range(2)]
            return self.secret
        """,
        # the write under an ``else`` nested in the guard
        """
        def get_secret(self):
            if not self.secret:
                if self.title:
                    self.secret = get_random_string(25)
                else:
                    self.title = get_random_string(25)
                    self.save()
            return self.secret
        """,
    ],
    ids=["two-writes", "else-arm", "other-test", "no-return", "loop", "other-arm", "own-pk", "literal-flag", "delete",
         "comprehension", "nested-else"],
)
def test_getters_that_write_otherwise_stay_counted(getter: str, rule: Rule) -> None:
    models = MODELS.replace(
        '''        def get_secret(self):
            if not self.secret:
                self.secret = get_random_string(25)
                self.save()
            return self.secret
''',
        "\n".join("        " + line if line.strip() else "" for line in textwrap.dedent(getter).strip("\n").splitlines()) + "\n",
    )
    assert models != MODELS
    found = _found(models, VIEW, rule)
    renamed = found[("app/views.py", "rename")]
    assert "lazy initializer" not in renamed.explanation
    assert renamed.title.startswith(("3 database writes", "4 database writes", "5 database writes"))


SETTINGS = {
    "app/db.py": "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n",
    "app/models.py": """
        from .db import db

        class Setting(db.Model):
            id = db.Column(db.Integer, primary_key=True)
            env = db.Column(db.String)

        class Event(db.Model):
            id = db.Column(db.Integer, primary_key=True)
            logo = db.Column(db.String)
        """,
    "app/settings.py": """
        from flask import current_app
        from .db import db
        from .models import Setting

        def save_to_db(item):
            db.session.add(item)
            db.session.commit()

        def set_settings(**values):
            save_to_db(Setting(**values))

        def get_settings():
            if "settings" in current_app.config:
                return current_app.config["settings"]
            env = current_app.config.get("ENV", "production")
            found = Setting.query.filter(Setting.env == env).first()
            if found is None:
                set_settings(env=env)
            else:
                current_app.config["settings"] = {"env": found.env}
            return current_app.config.get("settings", {})
        """,
    "app/tasks.py": """
        from celery import shared_task
        from .models import Event
        from .settings import get_settings, save_to_db

        def upload(name):
            bucket = get_settings()["bucket"]
            region = get_settings()["region"]
            return f"{bucket}/{region}/{name}"

        @shared_task
        def export_logo(event_id):
            event = Event.query.get(event_id)
            event.logo = upload(f"{event_id}.png")
            save_to_db(event)
        """,
}


def test_a_settings_row_made_when_none_exists_is_no_commit_of_its_readers(rule: Rule) -> None:
    # open-event-server's ``get_settings``: every reader of a setting counted a commit.
    assert ("app/tasks.py", "export_logo") not in reported(analyze_source(SETTINGS, rule))


CONFIG = {
    "app/db.py": "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n",
    "app/models.py": """
        from sqlalchemy.exc import IntegrityError
        from sqlalchemy.orm.exc import NoResultFound
        from .db import db

        _default = None

        class Config(db.Model):
            id = db.Column(db.Integer, primary_key=True)
            name = db.Column(db.String)

            @classmethod
            def get_default(cls, refresh=False):
                global _default
                if (_default is None) or (refresh is True):
                    _default = cls.get_current()
                return _default

            @classmethod
            def get_current(cls):
                try:
                    return cls.query.filter(cls.id == 1).one()
                except NoResultFound:
                    try:
                        current = cls()
                        db.session.add(current)
                        db.session.commit()
                        return current
                    except IntegrityError:
                        return cls.query.filter(cls.id == 1).one()

        class Event(db.Model):
            id = db.Column(db.Integer, primary_key=True)
            name = db.Column(db.String)
        """,
    "app/views.py": """
        from flask import Blueprint, request
        from .db import db
        from .models import Config, Event

        bp = Blueprint("main", __name__)

        @bp.route("/config")
        def show_config():
            name = Config.get_default().name
            Event.query.filter(Event.id == 1).update({"name": name})
            db.session.commit()
            return Config.get_default().name

        @bp.route("/rename", methods=["POST"])
        def rename():
            old = Config.get_current()
            old.name = request.form["name"]
            db.session.commit()
        """,
}


def test_a_row_made_when_its_lookup_finds_none_is_no_commit_of_its_readers(rule: Rule) -> None:
    # Round 13's securedrop ``InstanceConfig.get_current`` (``try: return q.one() except
    # NoResultFound:`` then a race-safe insert) and ``get_default`` (a module global filled
    # when None, unless ``refresh=True`` is passed): five FALSE "commits" of views that read it.
    found = reported(analyze_source(CONFIG, rule))
    assert ("app/views.py", "show_config") not in found
    assert ("app/views.py", "rename") not in found


_ANY_FAILURE = ("except NoResultFound:", "except Exception:")


def test_a_memo_filled_when_none_unless_asked_to_refresh_is_no_commit_of_its_readers(rule: Rule) -> None:
    # get_current now commits on any failure; get_default still calls it only while its
    # global is None (``refresh`` is False at its default, and a lazy call passes none).
    models = CONFIG["app/models.py"].replace(*_ANY_FAILURE)
    found = reported(analyze_source({**CONFIG, "app/models.py": models}, rule))
    assert ("app/views.py", "show_config") not in found
    assert ("app/views.py", "rename") in found


@pytest.mark.parametrize(
    ("replacements", "function"),
    [
        ([_ANY_FAILURE], "rename"),  # any failure, not a missed lookup
        ([("return cls.query.filter(cls.id == 1).one()\n                except NoResultFound",
           "found = cls.query.filter(cls.id == 1).one()\n                    db.session.add(found)\n"
           "                    db.session.commit()\n                    return found\n                except NoResultFound")],
         "rename"),  # the lookup's own arm writes too
        ([_ANY_FAILURE, ("def get_default(cls, refresh=False)", "def get_default(cls, refresh=True)")], "show_config"),
        ([_ANY_FAILURE, ("or (refresh is True)", "or (cls.stale is True)")], "show_config"),  # no parameter
        ([_ANY_FAILURE, ("global _default\n", "global _default\n                refresh = True\n")], "show_config"),  # bound again
        ([("except NoResultFound:", "except FileNotFoundError:")], "rename"),  # no ORM lookup
        ([("                        return current\n", "                        return None\n")], "rename"),  # makes nothing it returns
        ([("                        return current\n", "                        return cls(name='default')\n")], "rename"),
        ([("db.session.add(current)", "db.session.add(Audit())")], "rename"),  # adds another row, returns an unsaved one
    ],
)
def test_lookups_and_memos_that_may_write_on_any_call_stay_counted(replacements: list, function: str, rule: Rule) -> None:
    models = CONFIG["app/models.py"]
    for old, new in replacements:
        assert old in models
        models = models.replace(old, new)
    found = reported(analyze_source({**CONFIG, "app/models.py": models}, rule))
    assert ("app/views.py", function) in found
