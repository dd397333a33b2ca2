"""Read-only session scopes: a ``with scope() as session:`` block whose context manager
commits the session on exit, around a body that never changes the session.

SQLAlchemy's ``Session.commit()`` flushes the pending changes (new, dirty and deleted
objects) and commits the connection's transaction (sqlalchemy/orm/session.py
``Session.commit`` -> ``SessionTransaction.commit``, which runs ``_prepare_impl`` -> ``flush``);
with nothing added, changed or executed, it writes nothing. A ``@contextmanager`` function
that yields a session and commits after the ``yield`` (dispatch's ``get_session``) commits
what the ``with`` body did: when the body only reads, that commit is no effect.

The body is read-only when none of its lines changes the session or an object it holds:
no ``session.add/delete/merge/flush/execute/...`` on the ``as`` name, no attribute
assignment (``org.name = x`` dirties a loaded row), no ``commit``, and every call that is
handed the session resolves to a repository function that (through its own resolved
calls, a few levels down) does none of these either. A call handed the session that does
not resolve (a plugin's method) may write: the body is not read-only.

Inputs: the call graph and the per-file facts. Output: :meth:`SessionScopes.idle`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.transactions.facts import FileFacts

_WITH = re.compile(r"^(\s*)(?:async\s+)?with\s+(?:[\w.]+\.)?(\w+)\s*\(.*\bas\s+([A-Za-z_]\w*)\s*:\s*(?:#.*)?$")
_CONTEXT_MANAGER = re.compile(r"(?:^|\.)(?:async)?contextmanager$")
# What changes a session: its own write calls, or an attribute set on a row it holds.
_SESSION_WORK = ("add", "add_all", "merge", "delete", "flush", "execute", "commit", "bulk_save_objects",
                 "bulk_insert_mappings", "bulk_update_mappings", "update", "insert")  # fmt: skip
_ATTRIBUTE_SET = re.compile(r"^\s*[A-Za-z_]\w*(?:\.\w+)+\s*(?:[-+*/|]?=)(?!=)")
# ``self.name = ...``: the object's own state, no row it holds (``self.row.name = ...`` is one).
_OWN_ATTRIBUTE = re.compile(r"^\s*(?:self|cls)\.\w+\s*(?:[-+*/|]?=)(?!=)")
_SESSION_ARGUMENT = re.compile(r"(?i)session")
# A session handed to a call: ``f(session)``, ``f(x, db_session=session)``.
_PASSED_SESSION = re.compile(r"(?i)[(,]\s*(?:\w+\s*=\s*)?\w*session\b")
_DEPTH = 4


class SessionScopes:
    """Which ``with scope() as session:`` calls commit a block that changed nothing."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts]) -> None:
        self.graph = graph
        self.facts = facts
        self._idle: dict[Edge, bool] = {}
        self._work: dict[FunctionRef, bool] = {}
        self._work_calls = re.compile(rf"\.(?:{'|'.join(_SESSION_WORK)})\s*\(")

    def idle(self, edge: Edge) -> bool:
        """Whether ``edge`` is a ``with`` statement's call into a ``@contextmanager``
        function, with an ``as`` name, whose body is read-only: the callee's commit on exit
        commits nothing."""
        found = self._idle.get(edge)
        if found is None:
            found = self._idle[edge] = self._compute_idle(edge)
        return found

    def _compute_idle(self, edge: Edge) -> bool:
        facts = self.facts.get(edge.caller.path)
        definition = self.graph.definition(edge.callee)
        if facts is None or definition is None or not any(_CONTEXT_MANAGER.search(d.split("(", 1)[0]) for d in definition.decorators):
            return False
        opening = _WITH.match(facts.line_text(edge.line))
        if opening is None or opening.group(2) != edge.callee.qualname.rsplit(".", 1)[-1]:
            return False
        indent, name = len(opening.group(1)), opening.group(3)
        body = _block(facts, edge.line, indent)
        if not body:
            return False
        uses = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        passed = re.compile(rf"[(,]\s*(?:\w+\s*=\s*)?{re.escape(name)}\b")
        callees = {(callee.line, callee.callee) for callee in self.graph.callees(edge.caller)}
        resolved = {line for line, _ in callees}
        for line in body:
            text = facts.line_text(line)
            if _ATTRIBUTE_SET.match(text) or (uses.search(text) and self._work_calls.search(text) and f"{name}." in text):
                return False
            if passed.search(text):
                if line not in resolved:
                    return False  # the session handed to code the graph cannot see
                if any(self._does_work(callee, 0) for at, callee in callees if at == line):
                    return False
        return True

    def _does_work(self, ref: FunctionRef, depth: int) -> bool:
        """Whether a function changes a session it is handed: a session write call, an
        attribute set, or a call passing a session on that does not resolve or does so."""
        known = self._work.get(ref)
        if known is not None:
            return known
        if depth > _DEPTH:
            return True
        self._work[ref] = False  # a recursive call adds nothing new
        definition = self.graph.definition(ref)
        facts = self.facts.get(ref.path)
        if definition is None or facts is None:
            self._work[ref] = True
            return True
        callees: dict[int, list[FunctionRef]] = {}
        for edge in self.graph.callees(ref):
            callees.setdefault(edge.line, []).append(edge.callee)
        work = False
        for line in range(definition.body_start_line, definition.end_line + 1):
            text = facts.line_text(line)
            work = (
                (_ATTRIBUTE_SET.match(text) is not None and _OWN_ATTRIBUTE.match(text) is None)
                or (_SESSION_ARGUMENT.search(text) is not None and self._work_calls.search(text) is not None)
                or (_PASSED_SESSION.search(text) is not None and line not in callees)
                or any(self._does_work(callee, depth + 1) for callee in callees.get(line, ()))
            )
            if work:
                break
        self._work[ref] = work
        return work


def _block(facts: FileFacts, line: int, indent: int) -> list[int]:
    """The lines of the block a statement at ``line`` (indented ``indent``) opens."""
    found: list[int] = []
    number = line + 1
    while number <= len(facts.lines):
        text = facts.line_text(number)
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        if text.strip():
            found.append(number)
        number += 1
    return found
