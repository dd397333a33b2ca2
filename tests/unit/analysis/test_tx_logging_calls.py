"""A standard ``logging`` call after a ``with scope() as session:`` block's own commit
stages nothing for the scope's commit at exit: ``Logger.error`` & co. build a record from
their arguments and hand it to the handlers (CPython Lib/logging/__init__.py
``Logger._log`` -> ``Logger.handle`` -> ``Logger.callHandlers``), with no ORM session of
the caller's. Kolibri's ``Storage`` logs a failed commit so
(kolibri/core/tasks/storage.py); SQLAlchemy's ``Session.commit`` with nothing pending
writes nothing (sqlalchemy/orm/session.py ``Session.commit``).

Counter-tests: a write staged after the explicit commit, a logger call handed a row the
session holds, and a name bound locally over the module's logger still make the scope's
exit commit a second one."""

from __future__ import annotations

import pytest

from auditor.analysis.transactions.logging_calls import is_logging_call, is_string_literal_call, logging_names
from auditor.index.model import Import
from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

STORAGE = """
    import logging
    from contextlib import contextmanager
    from sqlalchemy.orm import sessionmaker

    logger = logging.getLogger(__name__)

    class Storage:
        def __init__(self, engine):
            self.sessionmaker = sessionmaker(bind=engine)

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
                row = Row(id=job.id, state=job.state)
                session.merge(row)
                try:
                    session.commit()
                except Exception as e:
                    logger.error("commit failed: {}".format(e))
                logging.info("scheduled %s", job.id)
                return job.id
{extra}
"""

EXTRA = {
    "staged-after": """
        def schedule_and_log(self, job):
            with self.session_scope() as session:
                row = Row(id=job.id, state=job.state)
                session.merge(row)
                session.commit()
                logger.info("scheduled %s", job.id)
                session.add(Event(job=job.id))
""",
    "held-row-logged": """
        def schedule_and_log(self, job):
            with self.session_scope() as session:
                row = session.get(Row, job.id)
                row.state = job.state
                session.commit()
                logger.info("scheduled %s", row)
""",
    "logger-rebound": """
        def schedule_and_log(self, job):
            logger = self.audit_log
            with self.session_scope() as session:
                row = Row(id=job.id, state=job.state)
                session.merge(row)
                session.commit()
                logger.info("scheduled %s", job.id)
""",
}

CLI = """
    import click
    from .storage import Storage

    @click.command()
    def enqueue(job):
        Storage(engine).schedule(job)

    @click.command()
    def enqueue_and_log(job):
        Storage(engine).schedule_and_log(job)
"""


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _found(rule: Rule, extra: str):
    files = {"jobs/storage.py": STORAGE.replace("{extra}", extra), "jobs/cli.py": CLI}
    return reported(analyze_source(files, rule))


def test_a_log_call_after_the_explicit_commit_leaves_the_exit_commit_nothing(rule: Rule):
    assert ("jobs/storage.py", "Storage.schedule") not in _found(rule, "")


@pytest.mark.parametrize("case", sorted(EXTRA))
def test_what_may_stage_after_the_explicit_commit_is_still_a_second_commit(rule: Rule, case: str):
    found = _found(rule, EXTRA[case])
    finding = found[("jobs/storage.py", "Storage.schedule_and_log")]
    assert [site.effect for site in finding.sequence] == ["commit", "commit"]
    assert finding.severity == "high"


def test_logging_names_are_the_module_and_its_loggers_bound_once():
    imports = [Import("logging", None, None, 1), Import("logging", "getLogger", "get_log", 2)]
    lines = [
        "import logging",
        "from logging import getLogger as get_log",
        "logger = logging.getLogger(__name__)",
        "audit = get_log('audit')",
        "log = logging.getLogger('x')",
        "log = make_log()",
        "other = structlog.get_logger()",
        "    inner = logging.getLogger('y')",
    ]
    assert logging_names(lines, imports) == frozenset({"logging", "logger", "audit"})
    assert is_logging_call("logger.exception", frozenset({"logger"}))
    assert not is_logging_call("logger.handlers.clear", frozenset({"logger"}))
    assert not is_logging_call("logger.addHandler", frozenset({"logger"}))
    assert is_string_literal_call('"failed: {}".format')
    assert is_string_literal_call("f'x'.upper")
    assert not is_string_literal_call("message.format")
