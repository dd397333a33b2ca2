"""Go ``database/sql``: ``db.Exec``/``ExecContext`` on the pool (``*sql.DB``) is an
autocommit statement; on a ``tx`` from ``db.Begin``/``BeginTx`` it runs inside that
transaction (the analysis tracks the variable the boundary call assigns), and so does a
statement the function bound to a transaction (``stmt = tx.Stmt(prepared)``: only
``*sql.Tx`` has ``Stmt``/``StmtContext``). ``QueryRow``/``Query`` of write SQL
(``INSERT ... RETURNING``) is a write like ``Exec``; a call on an imported package
(``syscall.Exec``) and an ``Exec`` of a literal ``VACUUM``/``SET`` are none (a ``SELECT`` may call a
function that writes).
"""

from __future__ import annotations

import re

from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite

# ``db.Exec("VACUUM ANALYZE")``, ``db.Exec("SET search_path TO app")``: the SQL
# literal (after a context argument, for ``ExecContext``) changes no row.
_MAINTENANCE = re.compile(r"""^\s*(?:\w+\s*,\s*)?[`"]\s*(?:VACUUM|ANALYZE|SHOW|EXPLAIN|SET)\b""", re.IGNORECASE)


class GoSqlModel:
    """Pool-level ``Exec`` calls are autocommit writes."""

    name = "go-database-sql"
    names = frozenset({"Exec", "ExecContext"})

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if context.index.language != "go" or not context.is_rule_sink:
            return None
        receiver = strip_arguments(call.callee).rsplit(".", 1)[0]
        if _MAINTENANCE.match(call.arguments):
            return Classification(None, "a maintenance statement (VACUUM, SET), no row written")
        if receiver in _package_names(context):
            return Classification(None, "a package's function (syscall.Exec), not a statement on a database handle")
        if "." not in receiver and _bound_to_tx(receiver, call, context):
            return Classification(None, "a statement bound to a transaction (tx.Stmt)")
        return Classification(Effect.WRITE, "autocommit statement on the pool")


def _package_names(context: CallContext) -> frozenset[str]:
    """The names the file's imports bind (``syscall``, ``sqlx``, an alias): a call on one
    of these is a package function, never a method of a ``*sql.DB`` or ``*sql.Tx`` value."""
    return frozenset(record.alias or record.module.rstrip("/").rsplit("/", 1)[-1] for record in context.index.imports)


def _bound_to_tx(variable: str, call: CallSite, context: CallContext) -> bool:
    """Whether ``variable`` is assigned ``X.Stmt(...)``/``X.StmtContext(...)`` earlier in
    the call's function (any such assignment: Go code often picks one of two prepared
    statements in branches)."""
    scope = context.index.enclosing_definition(call.line)
    if scope is None:
        return False
    assignment = re.compile(rf"^\s*{re.escape(variable)}\s*(?:,\s*\w+\s*)?:?=\s*\w+(?:\.\w+)*\.Stmt(?:Context)?\(")
    return any(assignment.match(context.line_text(number)) for number in range(scope.start_line, call.line))
