"""Spring: ``@Transactional`` on a method, or on its class, opens a transaction when the
method is entered **through the Spring proxy**; a call from another method of the same
object (``this.m()`` or bare ``m()``) bypasses the proxy and opens none (the analysis
ignores the annotation on such self-invocations).

Spring Data repository methods (``save``, ``saveAll``, ``delete…``) are transactional on
their own: one repository call commits by itself and is not a finding; several in a
method no transaction covers are (a failure after the first leaves it committed). JPA
``EntityManager.persist/merge/remove`` and ``JdbcTemplate.update`` outside a transaction
are autocommit-style writes.
"""

from __future__ import annotations

from auditor.analysis.callgraph import strip_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite

_REPOSITORY_METHODS = ("save", "delete", "insert", "update", "remove")
_ENTITY_MANAGER_METHODS = frozenset({"persist", "merge", "remove"})


class SpringModel:
    """Repository calls are their own transactions; EntityManager/JDBC writes are not."""

    name = "spring"
    names = frozenset({"persist", "merge", "remove", "update", "batchUpdate"})

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if context.index.language != "java":
            return None
        stripped = strip_arguments(call.callee)
        receiver = stripped.rsplit(".", 1)[0].rsplit(".", 1)[-1].lower() if "." in stripped else ""
        if call.name in _ENTITY_MANAGER_METHODS and ("entitymanager" in receiver or receiver in ("em", "manager")):
            return Classification(Effect.WRITE, "JPA write outside a transaction")
        if "jdbctemplate" in receiver and call.name in ("update", "batchUpdate"):
            return Classification(Effect.WRITE, "JDBC autocommit write")
        if call.name.startswith(_REPOSITORY_METHODS) and (context.is_rule_sink or receiver.endswith(("repository", "repo", "dao"))):
            return Classification(Effect.REPOSITORY, "Spring Data repository call (its own transaction)")
        return None
