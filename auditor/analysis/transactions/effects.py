"""What one call does to transaction state: the first framework model's verdict
(:data:`MODELS`, asked in order), refined into the effect the analysis counts.

Inputs: a :class:`~auditor.index.model.CallSite` and the :class:`~.base.CallContext` of its
file. Output: an :class:`~.base.Effect` (or None) with the model's reason; verdicts are kept
by call text within one file (:func:`classify`), so a file's verdicts depend on that file alone.
"""

from __future__ import annotations

import re
from dataclasses import replace

from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions import django, sqlalchemy
from auditor.analysis.transactions.base import CallContext, Classification, Effect, TransactionModel
from auditor.analysis.transactions.generic import GenericModel
from auditor.analysis.transactions.go_sql import GoSqlModel
from auditor.analysis.transactions.grading import idempotent
from auditor.analysis.transactions.languages import traits
from auditor.analysis.transactions.side_effects import SideEffectModel
from auditor.analysis.transactions.spring import SpringModel
from auditor.analysis.transactions.sqlalchemy import SqlAlchemyModel
from auditor.index.model import CallSite

MODELS: tuple[TransactionModel, ...] = (
    SideEffectModel(), SqlAlchemyModel(), django.DjangoModel(), SpringModel(), GoSqlModel(), GenericModel()
)  # fmt: skip
"""The transaction models, in the order they are asked about a call."""

MODEL_NAMES = frozenset().union(*(model.names for model in MODELS))
"""Every last name of a call some model may claim beyond the rule's sinks."""
EXECUTE_NAMES = frozenset({"execute", "executemany", "executescript", "exec_driver_sql", "query", "raw", "run", "exec", "Query", "QueryContext", "QueryRow", "QueryRowContext"})
"""Last names of calls that run SQL text (checked against the rule's ``sql_write``)."""

Verdicts = dict[tuple[object, ...], Classification | None]
"""Verdicts kept by call text within one file (see :func:`classify`)."""

# Names shared with sets, dicts and lists: a call that is not a rule sink only matters when
# its receiver is a related manager (``order.tags.add``) or a variable (``qs.update``).
_CONTAINER_NAMES = frozenset({"add", "set", "remove", "clear", "update", "create"})
_READS_ASSIGNMENT = frozenset({"update", "delete", "Exec", "ExecContext"})
_BOOKKEEPING_WRITE = re.compile(r"(?:^|\.)(?:\w*Event|\w*Log|\w*History|events|\w*Bucket|\w*RateLimit\w*|\w*Throttle\w*)\.")
_DELETES = frozenset({"delete", "delete_node"})


def worth_classifying(call: CallSite, related_managers: frozenset[str]) -> bool:
    """Whether a call that matches no rule sink may still interest a model."""
    if call.name not in MODEL_NAMES:
        return False
    if call.name not in _CONTAINER_NAMES:
        return True
    receiver = call.callee[: -len(call.name) - 1] if call.callee.endswith("." + call.name) else ""
    if not receiver:
        return False
    attribute = receiver.rsplit(".", 1)[-1]
    return "." not in receiver or attribute in related_managers or attribute.endswith("_set")


def counted_effect(call: CallSite, classification: Classification) -> Effect | None:
    """The effect the analysis counts for a classified call: a write to bookkeeping rows is
    bookkeeping, a delete a delete, an upsert or constant update idempotent, a rewrite of
    existing rows an update."""
    effect = classification.effect
    if effect is Effect.WRITE and _BOOKKEEPING_WRITE.search(strip_arguments(call.callee)):
        return Effect.AUDIT
    if effect is Effect.WRITE and call.name in _DELETES:
        return Effect.DELETE
    if effect is Effect.WRITE:
        return idempotent(call, classification.orm) or (Effect.UPDATE if classification.rewrite else effect)
    return effect


def classify(call: CallSite, context: CallContext, memo: Verdicts) -> Classification | None:
    """The first model's verdict on a call. Verdicts are kept by call text (``memo``)
    except for those that read earlier lines or their own (a queryset or query variable's
    ``update``/``delete``, a Go statement variable's ``Exec``, an argument-less
    ``delete()``/``update()`` that may build an SQLAlchemy Core statement); a ``self.`` call's verdict is
    kept per class (a manager's ``self.create`` writes). A kept Django ``save`` verdict is
    told anew whether the save rewrites an existing row: that reads the lines above it."""
    key: tuple[object, ...] | None = None
    reads_line = call.name in sqlalchemy.STATEMENT_NAMES and not call.arguments.strip()
    if not (call.name in _READS_ASSIGNMENT and call.callee.count(".") == 1) and not reads_line:
        owner = None
        if call.enclosing and call.name in django.MANAGER_SELF_WRITES and call.callee.startswith("self."):
            owner = (context.path, call.enclosing.rsplit(".", 1)[0])
        if owner is None and traits(context.index.language).verdicts_read_file:
            owner = context.path  # imports and field declarations are read from the file
        key = (context.index.language, context.is_rule_sink, call.callee, call.name, call.arguments, owner)
        if key in memo:
            kept = memo[key]
            if call.name == "save" and kept is not None and kept.orm == "rows":
                return replace(kept, rewrite=django.saves_existing(call, context))
            return kept
    found = _first_verdict(call, context)
    if key is not None:
        memo[key] = found
    return found


def _first_verdict(call: CallSite, context: CallContext) -> Classification | None:
    for model in MODELS:
        classification = model.classify(call, context)
        if classification is not None:
            return classification
    return None
