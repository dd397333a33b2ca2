"""A call its callee's signature cannot bind raises ``TypeError`` before the body runs
(language reference, "Calls"): round 9's zeeguu FALSE, ``get_notification_for_user`` calling
the parameterless view ``get_bookmarks_recommended_for_practice(1)``. Counter-tests: a call
that binds, a callee with ``*args``, a decorator that may change the call (``click.command``, a project's
``@cache`` taking a keyword of its own, a wrapper that pops a keyword before forwarding), a
name its module binds twice (the later ``def``, or ``slow = retrying(slow)``) and arguments
that hold a comment or a ``lambda`` still count the callee."""

from __future__ import annotations

import pytest

from auditor.rules.loader import load_rule
from tests.support import analyze_source, reported

WRAPPERS = """
    import functools


    def requires_session(view):
        @functools.wraps(view)
        def wrapped_view(*args, **kwargs):
            return view(*args, **kwargs)

        return wrapped_view
"""

HELPERS = """
    import click
    from flask import Blueprint

    from .db import db
    from .wrappers import requires_session

    api = Blueprint("api", __name__)


    @api.route("/recommended", methods=["GET"])
    @requires_session
    def recommended():
        db.session.add(Mark())
        db.session.commit()
        return []


    def takes_one(limit):
        db.session.add(Mark())
        db.session.commit()
        return []


    def takes_any(*args):
        db.session.add(Mark())
        db.session.commit()
        return []


    @click.command()
    def command():
        db.session.add(Mark())
        db.session.commit()


    def retrying(func):
        def wrapper(*args, **kwargs):
            attempts = kwargs.pop("attempts", 3)
            return func(*args, **kwargs)
        return wrapper


    def cache(func):
        def wrapper(*args, refresh=False, **kwargs):
            return func(*args, **kwargs)
        return wrapper


    @retrying
    def sync(batch):
        db.session.add(Mark())
        db.session.commit()


    @cache
    def account(pk):
        db.session.add(Mark())
        db.session.commit()


    def slow(limit):
        db.session.add(Mark())
        db.session.commit()


    slow = retrying(slow)


    def twice():
        return []


    def twice(limit):
        db.session.add(Mark())
        db.session.commit()
        return []
"""

VIEWS = """
    from flask import Blueprint

    from .db import db
    from .helpers import account, command, recommended, slow, sync, takes_any, takes_one, twice
    from .wrappers import requires_session

    views = Blueprint("views", __name__)


    @views.route("/notify/extra")
    @requires_session
    def notify_extra_argument():
        recommended(1)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/keyword")
    def notify_unknown_keyword():
        takes_one(limit=1, order="new")
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/binds")
    def notify_binds():
        takes_one(1)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/star")
    def notify_star_args():
        takes_any(1, 2)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/click")
    def notify_click():
        command(["--x"])
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/commented")
    def notify_commented():
        takes_one(
            10,  # the limit
        )
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/lambda")
    def notify_lambda():
        takes_one(lambda a, b: a + b)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/popped")
    def notify_popped():
        sync(1, attempts=5)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/cached")
    def notify_cached():
        account(1, refresh=True)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/rebound")
    def notify_rebound():
        slow(1, attempts=2)
        db.session.add(Notice())
        db.session.commit()


    @views.route("/notify/twice")
    def notify_twice():
        twice(1)
        db.session.add(Notice())
        db.session.commit()
"""

DB = {"app/db.py": "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n"}


@pytest.fixture(scope="module")
def found() -> dict:
    files = {"app/wrappers.py": WRAPPERS, "app/helpers.py": HELPERS, "app/views.py": VIEWS, **DB}
    return reported(analyze_source(files, load_rule("tx-outside-transaction")))


@pytest.mark.parametrize("function", ["notify_extra_argument", "notify_unknown_keyword"])
def test_a_call_its_callee_cannot_bind_runs_none_of_the_callee(found, function):
    assert ("app/views.py", function) not in found


@pytest.mark.parametrize(
    "function",
    ["notify_binds", "notify_star_args", "notify_click", "notify_twice", "notify_commented", "notify_lambda",
     "notify_popped", "notify_cached", "notify_rebound"],
)  # fmt: skip
def test_a_call_that_may_bind_still_counts_the_callee(found, function):
    assert found[("app/views.py", function)].title.startswith("2 commits on one path")
