"""The object a committing call hands back: ``project = form.update(g.project)`` where
``update`` returns the object it was handed and its path ends in a commit. SQLAlchemy's
commit flushes every change of every object the session holds and leaves them persistent,
and ``Session.add`` of a persistent object stages nothing (sqlalchemy/orm/session.py
``Session.commit`` -> ``SessionTransaction.commit`` flushes first; ``Session.add`` ->
``_save_or_update_state`` only moves a transient or detached object), so a
``session.add(project)`` after that call leaves the next commit nothing to write.

Input: a :class:`~.grading.Step` of a caller's path and the caller's facts. Output:
:func:`handed_back`, the name the caller binds that object to, or None.
"""

from __future__ import annotations

import re

from auditor.callgraph.graph import CallGraph
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import DOTTED, Effect
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.grading import Step
from auditor.analysis.transactions.parameter_classes import passed_argument
from auditor.analysis.transactions.scanning import IDENTIFIER, closing_bracket

_BOUND_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)\s*[A-Za-z_][\w.]*\(")
_RETURN = re.compile(r"^\s*return\b\s*(.*?)\s*$")


def handed_back(graph: CallGraph, arguments: Arguments, facts: FileFacts, step: Step) -> str | None:
    """The variable ``step``'s line binds to what its callee returns, when the callee's
    path ends in a commit and every ``return`` of it returns the parameter the call passes
    an existing object for (a name or attribute, not one built in the call)."""
    if step.callee is None or not step.effects or step.effects[-1] is not Effect.COMMIT:
        return None
    text = facts.line_text(step.line)
    bound = _BOUND_CALL.match(text)
    if bound is None:
        return None
    parameter = _returned_parameter(arguments, step)
    if parameter is None:
        return bound.group(1) if _returns_session_object(arguments, step) else None
    opening, closing = _last_call(text.rstrip(), bound.end() - 1)
    if closing is None:
        return None
    names = [name for name, _ in arguments.parameters(step.callee)]
    passed = passed_argument(text[opening + 1 : closing], parameter, names.index(parameter))
    return bound.group(1) if passed is not None and DOTTED.fullmatch(passed) else None


def _returned_parameter(arguments: Arguments, step: Step) -> str | None:
    """The parameter every ``return`` of the callee returns (None if any returns else)."""
    value = _returned_name(arguments, step)
    names = {name for name, _ in arguments.parameters(step.callee)} if step.callee is not None else set()
    return value if value is not None and value in names else None


def _returns_session_object(arguments: Arguments, step: Step) -> bool:
    """Whether every ``return`` of the callee returns one local that the session holds:
    each assignment of it reads a row through a query (``cls.query.filter_by(...).first()``:
    a persistent object) or the callee adds it to the session (``session.add(instance)``,
    committed on the callee's path). timesketch's ``BaseModel.get_or_create``: the caller's
    ``db_session.add(group)`` after it stages nothing."""
    value = _returned_name(arguments, step)
    lines = _body_lines(arguments, step)
    if value is None or lines is None:
        return False
    added = any(re.search(rf"[sS]ession\.add\(\s*{re.escape(value)}\s*\)", text) for text in lines)
    for text in lines:
        match = re.match(rf"^\s*{re.escape(value)}\s*=(?!=)\s*(.*)$", text)
        if match is not None and not _QUERY_READ.search(match.group(1)) and not added:
            return False
    return any(re.match(rf"^\s*{re.escape(value)}\s*=(?!=)", text) for text in lines)


_QUERY_READ = re.compile(r"\.(?:first|one|one_or_none|scalar|scalar_one|scalar_one_or_none)\(\s*\)\s*$|\bsession\.get\(")


def _body_lines(arguments: Arguments, step: Step) -> list[str] | None:
    """The callee's own body lines (nested definitions' lines left out)."""
    callee = step.callee
    definition = arguments.graph.definition(callee) if callee is not None else None
    callee_facts = arguments.facts.get(callee.path) if callee is not None else None
    if callee is None or definition is None or callee_facts is None:
        return None
    nested = [
        (other.start_line, other.end_line)
        for other in callee_facts.index.definitions
        if definition.start_line < other.start_line <= definition.end_line
    ]
    return [
        callee_facts.line_text(number)
        for number in range(definition.body_start_line, definition.end_line + 1)
        if not any(start <= number <= end for start, end in nested)
    ]


def _returned_name(arguments: Arguments, step: Step) -> str | None:
    """The one name every ``return`` of the callee returns (None if they return others)."""
    lines = _body_lines(arguments, step)
    if lines is None:
        return None
    returned = {found.group(1) for text in lines if (found := _RETURN.match(text)) is not None}
    if len(returned) != 1:
        return None
    (value,) = returned
    return value if IDENTIFIER.fullmatch(value) else None



def _last_call(text: str, opening: int) -> tuple[int, int | None]:
    """The brackets of the argument list that ends ``text``, from the first ``(`` at
    ``opening`` on (``Form().update(x)``: those of ``update``)."""
    while opening >= 0:
        closing = closing_bracket(text, opening)
        if closing is None:
            return opening, None
        if closing == len(text) - 1:
            return opening, closing
        opening = text.find("(", closing + 1)
    return opening, None
