"""The interface every framework's transaction model implements, and what it classifies.

A model looks at one call site (with its file's context) and says what the call does to
the database's transaction state: an autocommit ``WRITE`` (the row is committed on its
own), an ``UPDATE`` (a Django autocommit write that sets rows that already exist to the
values it is given, creating no row and computing from no value read before: a re-run
with the same input writes the same; marked from a classification's ``rewrite``), a
``COMMIT`` that ends an open transaction (SQLAlchemy's ``session.commit()``), a
``REPOSITORY`` call that runs in a transaction of its own (Spring Data), an irreversible
``SIDE_EFFECT`` outside the database (mail, HTTP, enqueueing, deleting a stored file), an
``UPLOAD`` (a file written to storage: a side effect a row saved before it may point
to), a ``DELETE`` (an autocommit write
that removes rows: a sequence of deletes alone is a cleanup a retry finishes), an
``IDEMPOTENT`` write (an autocommit write a re-run repeats without harm: a queryset update
to constant values) or ``UPSERT`` (``get_or_create``/``update_or_create``, a many-to-many
or related-manager link change: a re-run finds what the first run left), both marked by
the analysis, an ``AUDIT``
write of bookkeeping that can be rebuilt or is only a record (event rows, search
vectors, "dirty" flags; the analysis marks these from the model or function name), or nothing
(``None``: a write inside an already open transaction such as ``session.add``, or a call
that only looks like a write). Models are consulted in order; the first that claims a
call decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from auditor.index.model import CallSite, FileIndex


class Effect(str, Enum):
    """What a call does to transaction state."""

    WRITE = "write"
    UPDATE = "update"
    DELETE = "delete"
    IDEMPOTENT = "idempotent write"
    UPSERT = "upsert or link"
    AUDIT = "bookkeeping write"
    COMMIT = "commit"
    REPOSITORY = "repository"
    SIDE_EFFECT = "side effect"
    UPLOAD = "stored file"


@dataclass(frozen=True)
class Classification:
    """A model's verdict on a call: its effect (None: no effect) and why, in a few words;
    for a Django ORM write, ``orm`` says what it writes through: ``"rows"`` (a model, a
    manager or a queryset) or ``"link"`` (a related or many-to-many manager); ``rewrite``:
    the write only sets existing rows to the values it is given (no new row, no ``F()``,
    no arithmetic on a value read before), so a re-run with the same input converges."""

    effect: Effect | None
    reason: str
    orm: str = ""
    rewrite: bool = False


# A dotted name (``x``, ``self.order``, ``transaction.atomic``): no call, subscript or literal.
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
SELF_RECEIVERS = frozenset({"self", "cls", "this"})
"""The names a method's own object goes by (Python's ``self``/``cls``, Java's ``this``)."""
# ``for x in rows:`` on one line: the loop variable and what it iterates.
FOR_LOOP = re.compile(r"^\s*(?:async\s+)?for\s+([A-Za-z_]\w*)\s+in\s+(.*?):?\s*$")
# ``name = value`` or ``name: T = value`` (``name`` may be dotted): one pattern for every
# variable, so no pattern is compiled per name.
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]+)?=(?!=)\s*(.*)")


@dataclass(frozen=True)
class CallContext:
    """What a model may consult about a call beyond the call itself."""

    path: str
    index: FileIndex
    lines: Sequence[str]
    is_rule_sink: bool
    related_managers: frozenset[str]

    def line_text(self, line: int) -> str:
        """The source text of a 1-based line ("" outside the file)."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def assigned_before(self, variable: str, call: CallSite) -> str | None:
        """The value ``variable`` was last assigned (``x = ...`` or ``x: T = ...``) above
        the call in the call's function, as text; None when it was not."""
        scope = self.index.enclosing_definition(call.line)
        if scope is None:
            return None
        for number in range(call.line - 1, scope.start_line - 1, -1):
            match = _ASSIGNMENT.match(self.line_text(number))
            if match and match.group(1) == variable:
                return match.group(2)
        return None


class TransactionModel(Protocol):
    """One framework's transaction semantics."""

    name: str
    names: frozenset[str]
    """Last names of the calls this model may claim beyond the rule's sinks (a pre-check)."""

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        """The call's effect under this framework, or None when the call is not this
        framework's to judge."""
        ...
