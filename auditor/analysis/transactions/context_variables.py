"""A transaction opened through a variable: ``with context:`` where ``context`` is a local
variable bound once, above the block and at the top level of the function's body, to a
boundary call (``context = transaction.atomic()``) or to a conditional expression choosing
between a boundary and a null context on a dry-run flag (``context = transaction.atomic()
if not dry_run else nullcontext()``: the condition names ``dry_run``, ``dryrun``, ``dry``,
``commit``, ``noop`` or ``simulate`` as a word, so the mode that skips the transaction is
taken to write nothing; a null context chosen on any other condition covers nothing).

Kept narrow so it stays sound: the variable is no parameter of the function, and the
function mentions it only on that one assignment line (a single line, parsed whole) and on
``with`` items naming it, so no other binding (a branch's reassignment, a loop target,
``global``) can stand behind the block.

Inputs: one ``with`` block, its file's lines and index, and a test for boundary
expressions. Output: :func:`opens_through_variable`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence

from auditor.analysis.transactions.scanning import def_parameters
from auditor.index.model import ContextBlock, FileIndex

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DRY_RUN = re.compile(r"(?i)(?<![a-z0-9])(?:dry_run|dryrun|dry|commit|noop|simulate)(?![a-z0-9])")
_NULL_CONTEXT = frozenset({"nullcontext", "contextlib.nullcontext"})


def opens_through_variable(block: ContextBlock, index: FileIndex, lines: Sequence[str], is_boundary: Callable[[str], bool]) -> bool:
    """Whether the ``with`` block's expression is a local variable (no parameter) bound, once,
    above the block and at the body's top level, to a boundary call or to ``boundary if
    dry-run condition else nullcontext()`` (either order)."""
    name = block.expression.strip()
    if not _IDENTIFIER.fullmatch(name):
        return False
    scope = index.enclosing_definition(block.start_line)
    if scope is None or scope.body_start_line > min(scope.end_line, len(lines)):
        return False
    header = "\n".join(lines[scope.start_line - 1 : scope.body_start_line - 1])
    if re.search(rf"(?<![\w.]){re.escape(name)}\b", def_parameters(header)):
        return False  # a parameter: the caller's value may stand behind the block
    top = _indentation(lines[scope.body_start_line - 1])
    word = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
    assignment = re.compile(rf"^\s*{re.escape(name)}\s*=(?!=)\s*(.+?)\s*$")
    item = re.compile(rf"^\s*(?:async\s+)?with\b.*(?<![\w.]){re.escape(name)}\s*(?:,|:|\)|\bas\b)")
    value: str | None = None
    for number in range(scope.body_start_line, min(scope.end_line, len(lines)) + 1):
        text = lines[number - 1]
        if not word.search(text):
            continue
        found = assignment.match(text)
        if found is not None and value is None and number < block.start_line and _indentation(text) == top:
            value = found.group(1)
        elif not item.match(text):
            return False  # any other mention may bind or rebind it
    return value is not None and _boundary_value(value, is_boundary)


def _boundary_value(value: str, is_boundary: Callable[[str], bool]) -> bool:
    """Whether an assigned value is a boundary call, or a conditional expression with a
    boundary call in one arm and a null context in the other."""
    try:
        expression = ast.parse(value, mode="eval").body
    except SyntaxError:
        return False
    if isinstance(expression, ast.IfExp):
        arms = (expression.body, expression.orelse)
        chosen = any(_is_boundary_call(value, arm, is_boundary) and _is_null_context(other) for arm, other in (arms, arms[::-1]))
        return chosen and _dry_run_test(expression.test)
    return _is_boundary_call(value, expression, is_boundary)


def _dry_run_test(test: ast.expr) -> bool:
    """Whether a condition names a dry-run-like flag (a word of a name, attribute or key)."""
    words: list[str] = []
    for node in ast.walk(test):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.append(node.value)
    return any(_DRY_RUN.search(word) for word in words)


def _indentation(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_boundary_call(value: str, node: ast.expr, is_boundary: Callable[[str], bool]) -> bool:
    segment = ast.get_source_segment(value, node)
    return isinstance(node, ast.Call) and segment is not None and is_boundary(segment)


def _is_null_context(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and not node.args and not node.keywords and ast.unparse(node.func) in _NULL_CONTEXT
