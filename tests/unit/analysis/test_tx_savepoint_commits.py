"""SQLAlchemy before 2.0: ``session.commit()`` after ``session.begin_nested()`` releases the
SAVEPOINT and leaves the outer transaction open (1.4's ``Session.commit`` commits the current
subtransaction in non-future mode; 2.0's commits the outermost). Round 11's mwdb-core FALSE
(``sqlalchemy==1.4.54``): ``add_parent``/``add_tag``/``assign_analysis`` each run a nested
block ending in ``commit()`` inside the caller's one transaction. Counter-tests: on 2.x (or
undeclared, or ``future=True``) the same code commits twice, and a commit outside the nested
block (after it was left) still commits."""

from __future__ import annotations

import textwrap

import pytest

from auditor.analysis.transactions import analyze_tx_outside_transaction
from auditor.analysis.transactions.sqlalchemy_series import nested_commit_releases
from auditor.index.extract import index_source
from auditor.languages import language_for_path
from auditor.rules.loader import load_rule
from tests.support import reported

VIEWS = """
    from flask import Blueprint
    from sqlalchemy.exc import IntegrityError

    from .db import db

    bp = Blueprint("objects", __name__)


    def add_parent(obj, parent):
        db.session.begin_nested()
        try:
            db.session.execute(relation_insert(obj, parent))
            db.session.flush()
            db.session.commit()
        except IntegrityError:
            db.session.rollback()
            return False
        db.session.add(Permission(obj=obj))
        return True


    def tag_then_commit(obj, tag):
        if tag:
            db.session.begin_nested()
            db.session.add(Tag(obj=obj, name=tag))
        db.session.commit()


    @bp.route("/objects/<int:pk>/block", methods=["PUT"])
    def with_block(pk):
        with db.session.begin_nested():
            db.session.add(Tag(pk=pk))
        db.session.commit()
        db.session.add(Audit(pk=pk))
        db.session.commit()


    @bp.route("/objects/<int:pk>/handle", methods=["PUT"])
    def handle(pk):
        savepoint = db.session.begin_nested()
        db.session.add(Tag(pk=pk))
        savepoint.commit()
        db.session.commit()
        db.session.add(Audit(pk=pk))
        db.session.commit()


    @bp.route("/objects/loop", methods=["PUT"])
    def loop(pks):
        db.session.begin_nested()
        for pk in pks:
            db.session.add(Tag(pk=pk))
            db.session.commit()
        db.session.add(Audit(pks=pks))
        db.session.commit()


    @bp.route("/objects/<int:pk>/parents", methods=["PUT"])
    def put_parent(pk, parent):
        obj = Object.query.get(pk)
        add_parent(obj, parent)
        db.session.commit()


    @bp.route("/objects/<int:pk>/tags", methods=["PUT"])
    def put_tag(pk, tag):
        obj = Object.query.get(pk)
        tag_then_commit(obj, tag)
        obj.touched = True
        db.session.commit()
"""

DB = "from flask_sqlalchemy import SQLAlchemy\ndb = SQLAlchemy()\n"


def _found(declarations: dict[str, str], db: str = DB) -> dict:
    code = {"app/views.py": textwrap.dedent(VIEWS).lstrip("\n"), "app/db.py": db}
    indexes = {path: index_source(path, text, language_for_path(path) or "") for path, text in code.items()}
    return reported(analyze_tx_outside_transaction(indexes, {**code, **declarations}, load_rule("tx-outside-transaction")))


PINNED = {"pyproject.toml": '[project]\ndependencies = [\n    "flask-sqlalchemy==3.0.5",\n    "sqlalchemy==1.4.54",\n]\n'}


def test_a_commit_after_begin_nested_on_sqlalchemy_1_releases_the_savepoint():
    assert ("app/views.py", "put_parent") not in _found(PINNED)


@pytest.mark.parametrize("function", ["put_tag", "with_block", "handle", "loop"])
def test_a_commit_the_savepoint_does_not_end_still_commits(function: str):
    # ``begin_nested()`` inside an ``if``, a ``with`` block that released it on exit, a handle
    # released on its own, a loop whose second iteration commits the outer transaction.
    assert _found(PINNED)[("app/views.py", function)].title.startswith("2 commits on one path")


@pytest.mark.parametrize(
    ("declarations", "db"),
    [
        ({}, DB),
        ({"requirements.txt": "SQLAlchemy>=2.0\nFlask-SQLAlchemy\n"}, DB),
        (PINNED, "from sqlalchemy import create_engine\nengine = create_engine('sqlite://', future=True)\n" + DB),
    ],
    ids=["undeclared", "sqlalchemy-2", "future-mode"],
)
def test_on_sqlalchemy_2_semantics_the_nested_commit_commits(declarations: dict[str, str], db: str):
    assert _found(declarations, db)[("app/views.py", "put_parent")].title.startswith("2 commits on one path")


@pytest.mark.parametrize(
    ("text", "declared"),
    [
        ('dependencies = ["sqlalchemy==1.4.54"]', True),
        ('install_requires=["SQLAlchemy>=1.3,<1.5"]', True),
        ("SQLAlchemy~=1.4\n", True),
        ("sqlalchemy<2.0\n", True),
        ("sqlalchemy<2.1\n", False),
        ("SQLAlchemy>=1.4\n", False),
        ("sqlalchemy-utils==0.38\nflask-sqlalchemy==2.5\n", False),
        ("SQLAlchemy==2.0.30\n# was: sqlalchemy==1.4.54\n", False),
    ],
)
def test_the_series_is_read_from_the_declared_bound(text: str, declared: bool):
    name = "setup.py" if "install_requires" in text else "pyproject.toml" if "dependencies" in text else "requirements.txt"
    assert bool(nested_commit_releases({name: text})) is declared


def test_a_declaration_that_admits_2_or_one_outside_the_root_leaves_2_0_semantics():
    assert nested_commit_releases({"pyproject.toml": 'dependencies = ["sqlalchemy>=2.0"]', "requirements.txt": "sqlalchemy<2\n"}) == ""
    assert nested_commit_releases({"examples/legacy/requirements.txt": "sqlalchemy<2\n"}) == ""
    assert nested_commit_releases({"requirements/base.txt": "sqlalchemy<2\n"}) == "requirements/base.txt: sqlalchemy<2"
    assert nested_commit_releases({"requirements.txt": "sqlalchemy<2\n", "app/db.py": 'db = SQLAlchemy(session_options={"future": True})'}) == ""
