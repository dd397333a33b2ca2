"""SQLAlchemy: a ``Session`` autobegins one transaction at its first use; ``add``,
``add_all``, ``merge``, ``delete``, ``flush`` and ``execute`` run inside it and ``commit()``
ends it (``rollback()`` throws it away). ``session.begin()``, ``begin_nested()`` and
``engine.begin()`` open explicit boundaries (the rule's boundary patterns). Bulk
``Query.delete()``/``Query.update()`` (``session.query(M).filter(...).delete()``,
Flask-SQLAlchemy's ``M.query.filter_by(...).update(...)``, or a variable assigned such a
query) run inside the session's transaction too: they are not Django autocommit writes.
So does any ``delete(...)``/``update(...)`` given ``synchronize_session=``, whatever its
receiver is named (``for query in queries: query.delete(synchronize_session="fetch")``):
only ``Query.delete``/``Query.update`` take that keyword, and both run their statement
through ``self.session.execute`` (sqlalchemy/orm/query.py ``Query.delete``, ``Query.update``).
A Core statement built from a table (``table.delete().where(...)``, ``table.update().values(...)``,
or one handed straight to ``execute(...)``) writes nothing by itself: ``TableClause.delete``/
``update``/``insert`` return a ``Delete``/``Update``/``Insert`` construct
(sqlalchemy/sql/selectable.py, sqlalchemy/sql/dml.py), and the session's ``execute`` runs it
inside its transaction, so the commit after it ends one unit.
In a module that writes through a session and imports nothing from Django, a
``delete()``/``update()`` with no arguments whose receiver is not known is one of these (a
lazy relationship's ``AppenderQuery``, a query held in a variable) or a model's own method:
it is no Django autocommit write, and the commit the module runs decides when it lands
(:func:`session_module`), unless the project has a method of that name that commits
(:func:`.staged_deletes.drop_staged`). One given arguments stays a write: ``aggregator.delete(entity_id=...)``
is followthemoney-store's ``Dataset.delete``, which commits on its own engine connection.

So a session write is not a finding by itself. The risk is a path that **commits more
than once** (a failure after the first commit leaves it in place), a write through a
connection configured ``isolation_level="AUTOCOMMIT"``, or a commit followed by an
irreversible side effect that can fail.
"""

from __future__ import annotations

import re
from functools import lru_cache

from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite, FileIndex

_IN_TRANSACTION = frozenset(
    {"add", "add_all", "merge", "delete", "flush", "execute", "bulk_save_objects", "bulk_insert_mappings",
     "bulk_update_mappings", "refresh", "expunge"}
)  # fmt: skip


_QUERY_METHODS = frozenset({"delete", "update"})
QUERY_METHODS = _QUERY_METHODS
STATEMENT_NAMES = _QUERY_METHODS
"""The Core statement builders a table offers that look like ORM writes (their verdict
reads the call's line)."""
# Flask-SQLAlchemy's ``Model.query`` or a session's ``query(...)``; a variable merely named
# ``query`` (a Django queryset, say) is no SQLAlchemy query.
# The keyword only SQLAlchemy's ``Query.delete``/``Query.update`` take.
_SYNCHRONIZE = re.compile(r"\bsynchronize_session\s*=(?!=)")
_QUERY_SOURCE = re.compile(r"(?:^|\.)[A-Z]\w*\.query\b|^[A-Z]\w*\.query\b|\bsession\.query\(")


def _session_receiver(receiver: str) -> bool:
    last = receiver.rsplit(".", 1)[-1]
    return last.endswith("session") or last.endswith("Session")


class SqlAlchemyModel:
    """Session writes happen inside the autobegun transaction; ``commit`` ends it."""

    name = "sqlalchemy"
    names = _IN_TRANSACTION | _QUERY_METHODS | {"commit"}

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if call.name not in self.names or context.index.language != "python":
            return None
        if call.name in STATEMENT_NAMES and builds_statement(call, context.line_text(call.line)):
            return Classification(None, "an SQL statement built (SQLAlchemy Core): the session's execute runs it")
        if call.name in _QUERY_METHODS and _SYNCHRONIZE.search(call.arguments):
            return Classification(None, "a Query's bulk delete/update (synchronize_session=): inside the session's transaction")
        stripped = strip_arguments(call.callee)
        if call.name in _QUERY_METHODS and _query_receiver(stripped, call, context):
            return Classification(None, "a session query's bulk delete/update: inside the session's transaction")
        if call.name in _QUERY_METHODS and not call.arguments.strip() and context.is_rule_sink and session_module(context.index):
            # Kept as a write here: ``staged_deletes.drop_staged`` sets it aside once the whole project
            # is known to define no method of that name that commits.
            return Classification(Effect.WRITE, STAGED_REASON, orm=STAGED)
        if "ession." not in call.callee:
            return None
        if "." not in stripped:
            return None
        receiver = stripped.rsplit(".", 1)[0]
        if not _session_receiver(receiver) or receiver.endswith("request.session"):
            return None
        if call.name == "commit":
            return Classification(Effect.COMMIT, "session commit")
        if call.name in _IN_TRANSACTION:
            return Classification(None, "inside the session's transaction")
        return None


# A Django ``SessionBase`` has ``flush``/``delete``/``save`` too, never these.
_SESSION_CALLS = frozenset({"commit", "add", "add_all", "rollback"})
STAGED = "session-staged"
"""The ``orm`` of a delete/update a session module stages (:func:`.staged_deletes.drop_staged`)."""
STAGED_REASON = "an argument-less delete/update in a module that writes through a SQLAlchemy session and imports no Django: staged until the session's commit"
_SESSION_MODULES: dict[tuple[str, str], bool] = {}


def session_module(index: FileIndex) -> bool:
    """Whether a Python file writes through an SQLAlchemy-style session (a call such as
    ``db.session.commit()`` or ``session.add(x)`` on a receiver named ``*session``, never
    ``request.session``) and imports nothing from Django or DRF. Kept per file content."""
    key = (index.path, index.content_hash)
    found = _SESSION_MODULES.get(key)
    if found is None:
        found = not any(
            item.module.split(".", 1)[0] in ("django", "rest_framework") for item in index.imports
        ) and any(_session_call(call) for call in index.calls)
        if len(_SESSION_MODULES) > 65536:
            _SESSION_MODULES.clear()
        _SESSION_MODULES[key] = found
    return found


def _session_call(call: CallSite) -> bool:
    if call.name not in _SESSION_CALLS:
        return False
    stripped = strip_arguments(call.callee)
    receiver = stripped.rsplit(".", 1)[0] if "." in stripped else ""
    return bool(receiver) and _session_receiver(receiver) and not receiver.endswith("request.session")


def builds_statement(call: CallSite, line: str) -> bool:
    """Whether a ``delete()``/``update()`` call with no arguments builds a Core
    statement on its line: chained into ``.where(``/``.values(``/``.returning(``, or written
    straight inside an ``execute(`` call."""
    return _statement_pattern(strip_arguments(call.callee)).search(line) is not None


@lru_cache(maxsize=8192)
def _statement_pattern(callee: str) -> re.Pattern[str]:
    """:func:`builds_statement`'s pattern for one callee, compiled once (up to 8,192 kept; the
    callees are too many for ``re``'s own cache of 512)."""
    stripped = re.escape(callee)
    return re.compile(rf"{stripped}\(\s*\)\s*\.(?:where|values|returning|filter_by|execution_options)\(|\bexecute\(\s*{stripped}\(")


def _query_receiver(stripped: str, call: CallSite, context: CallContext) -> bool:
    """Whether the call's receiver is an SQLAlchemy ``Query``: a chain through ``.query``
    (``M.query.filter``, ``db.session.query(M)``), or a variable last assigned one earlier
    in the function."""
    parts = stripped.split(".")[:-1]
    if "query" in parts[1:]:
        return True
    if len(parts) != 1:
        return False
    value = context.assigned_before(parts[0], call)
    return value is not None and _QUERY_SOURCE.search(value) is not None
