"""SQLAlchemy: a ``Session`` autobegins one transaction at its first use; ``add``,
``add_all``, ``merge``, ``delete``, ``flush`` and ``execute`` run inside it and ``commit()``
ends it (``rollback()`` throws it away). ``session.begin()``, ``begin_nested()`` and
``engine.begin()`` open explicit boundaries (the rule's boundary patterns).

So a session write is not a finding by itself. The risk is a path that **commits more
than once** (a failure after the first commit leaves it in place), a write through a
connection configured ``isolation_level="AUTOCOMMIT"``, or a commit followed by an
irreversible side effect that can fail.
"""

from __future__ import annotations

from auditor.analysis.callgraph import strip_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite

_IN_TRANSACTION = frozenset(
    {"add", "add_all", "merge", "delete", "flush", "execute", "bulk_save_objects", "bulk_insert_mappings",
     "bulk_update_mappings", "refresh", "expunge"}
)  # fmt: skip


def _session_receiver(receiver: str) -> bool:
    last = receiver.rsplit(".", 1)[-1]
    return last.endswith("session") or last.endswith("Session")


class SqlAlchemyModel:
    """Session writes happen inside the autobegun transaction; ``commit`` ends it."""

    name = "sqlalchemy"
    names = _IN_TRANSACTION | {"commit"}

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if call.name not in self.names or "ession." not in call.callee or context.index.language != "python":
            return None
        stripped = strip_arguments(call.callee)
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
