"""Commits after reads only: a function whose body, before its ``session.commit()``, does
nothing but read rows through the session (``obj = Session.query(M).filter_by(...).first()``,
``row = session.get(M, key)``) commits only what its callers left staged.

SQLAlchemy's ``Session.commit()`` flushes the pending changes and commits the connection's
transaction (sqlalchemy/orm/session.py ``SessionTransaction.commit`` -> ``_prepare_impl``,
which flushes only when the session is dirty: ``Session.flush`` returns at once when
``self._is_clean()``); a query emits a SELECT and stages nothing (``Query.first`` ->
``Query.__iter__``; its autoflush writes what was already pending). So when a call into
such a function follows a commit on the path with nothing between (:func:`flushes_through`
and the caller's own check of the lines between), there is nothing to commit: it is no
second commit. The first such call on a path still counts (it may commit what the caller
staged before it).

Inputs: a function's lines. Output: :func:`reads_only_before`, :func:`flushes_through`.
"""

from __future__ import annotations

import re

from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import Step
from auditor.analysis.transactions.scanning import python_code

# ``name = <session>.query(...)...<row method>()`` or ``name = <session>.get(M, ...)``, one line.
_READ = re.compile(
    r"^\s*[A-Za-z_]\w*\s*=\s*[\w.]*(?:\.query\(.*\)\.(?:first|one|one_or_none|all|count|scalar)\(\s*\)"
    r"|[sS]ession\.get\([^()]*\))\s*$"
)
_TRY = re.compile(r"^\s*try\s*:\s*$")
_DOCSTRING = ('"""', "'''")


def reads_only_before(lines: list[str], body_start: int, line: int) -> bool:
    """Whether the statements of a function body from ``body_start`` up to (not including)
    ``line`` (both 1-based lines of ``lines``) are only session reads, ``try:`` lines, a
    docstring, comments and blank lines."""
    in_docstring = False
    for number in range(body_start, line):
        text = lines[number - 1] if 0 < number <= len(lines) else ""
        stripped = text.strip()
        if in_docstring:
            in_docstring = not stripped.endswith(_DOCSTRING)
            continue
        if stripped.startswith(_DOCSTRING):
            in_docstring = not (len(stripped) >= 6 and stripped.endswith(stripped[:3]))
            continue
        code = python_code(text).strip()
        if not code or _TRY.match(code) or _READ.match(code):
            continue
        return False
    return True


def flushes_through(step: Step) -> bool:
    """Whether every effect of ``step`` is a commit after reads only (a direct one marked
    ``reads_before``, or a call whose path holds only such commits)."""
    if not step.effects or any(effect is not Effect.COMMIT for effect in step.effects):
        return False
    if step.callee is None:
        return step.reads_before
    return bool(step.inner) and all(flushes_through(inner) for inner in step.inner)
