"""Go ``database/sql``: ``db.Exec``/``ExecContext`` on the pool (``*sql.DB``) is an
autocommit statement; on a ``tx`` from ``db.Begin``/``BeginTx`` it runs inside that
transaction (the analysis tracks the variable the boundary call assigns).
"""

from __future__ import annotations

from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite


class GoSqlModel:
    """Pool-level ``Exec`` calls are autocommit writes."""

    name = "go-database-sql"
    names = frozenset({"Exec", "ExecContext"})

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if context.index.language != "go" or not context.is_rule_sink:
            return None
        return Classification(Effect.WRITE, "autocommit statement on the pool")
