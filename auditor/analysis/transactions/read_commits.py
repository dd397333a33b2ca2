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
from collections.abc import Callable

from auditor.callgraph.graph import FunctionRef
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import Step
from auditor.analysis.transactions.scanning import python_code

# ``name = <session>.query(...)...<row method>()`` or ``name = <session>.get(M, ...)``, one line.
_READ = re.compile(
    r"^\s*[A-Za-z_]\w*\s*=\s*[\w.]*(?:\.query\(.*\)\.(?:first|one|one_or_none|all|count|scalar)\(\s*\)"
    r"|[sS]ession\.get\([^()]*\))\s*$"
)
_TRY = re.compile(r"^\s*try\s*:\s*$")
NOTHING = re.compile(r"(?!)")
"""Allows no statement (for :func:`reads_only_before`: only blank lines, comments, ``try:``)."""
_DOCSTRING = ('"""', "'''")


def reads_only_before(lines: list[str], body_start: int, line: int, allowed: re.Pattern[str] | None = None) -> bool:
    """Whether the statements of a function body from ``body_start`` up to (not including)
    ``line`` (both 1-based lines of ``lines``) are only session reads (or what ``allowed``
    matches instead), ``try:`` lines, a docstring, comments and blank lines."""
    allowed = allowed or _READ
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
        if not code or _TRY.match(code) or allowed.match(code):
            continue
        return False
    return True


def flushes_through(step: Step, quiet_before: Callable[[FunctionRef, int], bool]) -> bool:
    """Whether ``step`` is one commit after reads only: a direct commit marked
    ``reads_before``, a call whose path is one such commit, or a call whose path is one such
    call that its callee makes with nothing before it that may stage work
    (``quiet_before(callee, line)``: no statement above that line of the callee's body)."""
    if step.effects != (Effect.COMMIT,):
        return False
    if step.callee is None:
        return step.reads_before
    if len(step.inner) != 1:
        return False
    inner = step.inner[0]
    if inner.callee is None:
        return inner.reads_before  # the callee's own commit, after reads only
    return quiet_before(step.callee, inner.line) and flushes_through(inner, quiet_before)
