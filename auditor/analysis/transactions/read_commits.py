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

The commit just before such a call must end what its step did: a call whose callee, after
its own last commit, assigns an attribute, stages a row or calls anything
(``safe_commit(); order.number = ...``) leaves work pending that the next commit flushes,
so that next commit counts (:func:`done_after_commit`, :func:`quiet_after`).

Inputs: a function's lines. Output: :func:`reads_only_before`, :func:`flushes_through`,
:func:`done_after_commit`, :func:`quiet_after`.
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
# What may follow a function's last commit and do nothing: a bare return of a name, a
# literal or an attribute, a re-raise, ``pass``, ``else:``/``finally:`` headers, an
# ``if``/``elif`` testing names and attributes only (no call, no ``:=``).
_INERT = re.compile(
    r"^\s*(?:return(?:\s+(?:[\w.]+|\"\"|''))?|raise|pass|else\s*:|finally\s*:|try\s*:"
    r"|(?:el)?if\s+[\w.\s]+(?:(?:==|!=|\bis\b|\bnot\b|\band\b|\bor\b)[\w.\s]*)*:)\s*$"
)
_HANDLER = re.compile(r"^\s*except\b.*:\s*$")
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


def done_after_commit(step: Step, quiet_after: Callable[[FunctionRef, int], bool]) -> bool:
    """Whether ``step``, whose path ends with a commit, does nothing after that commit: a
    direct commit, or a call whose callee's path ends with such a step and whose body has no
    statement after it that may stage work or assign (``quiet_after(callee, line)``)."""
    if not step.effects or step.effects[-1] is not Effect.COMMIT:
        return False
    if step.callee is None:
        return True
    if not step.inner:
        return False  # the callee's path is not known here
    last = step.inner[-1]
    return quiet_after(step.callee, last.line) and done_after_commit(last, quiet_after)


def quiet_after(lines: list[str], line: int, end_line: int) -> bool:
    """Whether the statements of a function body after the statement starting at ``line``
    up to ``end_line`` (1-based lines of ``lines``) do nothing: only blank lines, comments,
    a bare ``return``/``raise``/``pass``, an ``if`` on names and the bodies of ``except`` handlers (they run only
    when the commit failed). Read from the text; anything else counts as work."""
    number, depth = line, 0
    while number <= end_line:  # the statement at ``line`` may carry on below
        code = python_code(lines[number - 1]) if 0 < number <= len(lines) else ""
        depth += code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")
        number += 1
        if depth <= 0:
            break
    handler: int | None = None
    for index in range(number, end_line + 1):
        text = lines[index - 1] if 0 < index <= len(lines) else ""
        code = python_code(text).rstrip()
        if not code.strip():
            continue
        indent = len(code) - len(code.lstrip())
        if handler is not None and indent > handler:
            continue  # inside an ``except`` body
        handler = None
        if _HANDLER.match(code):
            handler = indent
            continue
        if not _INERT.match(code):
            return False
    return True
