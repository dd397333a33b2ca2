"""Everything else the rule names as a sink (DB-API ``cursor.execute`` of write SQL,
Mongo ``insertOne``…, JavaScript ORMs): an autocommit write, committed on its own."""

from __future__ import annotations

from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite


class GenericModel:
    """A rule sink no framework claimed is an autocommit write."""

    name = "generic"
    names: frozenset[str] = frozenset()

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        return Classification(Effect.WRITE, "autocommit write") if context.is_rule_sink else None
