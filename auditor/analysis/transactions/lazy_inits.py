"""Lazy initializers: a getter that writes one row only when the value it reads is missing.

The shape (open-event-server's ``get_settings``, froide's ``FoiRequest.get_secret``): a
function that returns a value, whose heaviest path holds exactly one database step (at most
one row written and one commit), and that step sits in the arm of an ``if`` (or ``elif``)
testing that something is missing (``if s is None:``, ``if not self.secret:``, ``if x ==
None:``), outside any loop of the function. The arm runs when the value is absent and fills
it; every call after the first reads it instead. A failure after such a call leaves the value
made, which the next call would have made anyway: the call is set aside from a caller's
sequence, like a registry row, and named in the explanation. The getter's own body is still
analysed as any function (its single write makes no sequence).

Kept narrow so it cannot hide business writes: only a call that passes no argument, into a
function whose parameters (after ``self``) all have defaults, is one (a get-or-create keyed by
the caller's data stays a write: :mod:`.registry_rows`); a second database step anywhere on the
getter's heaviest path, two writes or two commits in its one step, a write under a test of
anything else (``if form.is_valid():``), in an ``else`` arm, or in a loop, and a function that
returns nothing all leave the call counted.

Inputs: the call (its edge and site, the callee's signature through
:class:`~.arguments.Arguments`), the callee's heaviest path (:class:`~.grading.Step`) and its
parsed body (:data:`~.paths.Body`). Outputs: :func:`lazy_call`, :func:`lazily_initializes`.
"""

from __future__ import annotations

from tree_sitter import Node

from auditor.callgraph.graph import Edge
from auditor.analysis.transactions import paths
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import DB_EFFECTS, WRITES, Step
from auditor.analysis.transactions.paths import Body
from auditor.index.model import CallSite

REASON = "a lazy initializer (it writes one row only when the value it returns is missing: every later call reads it)"
"""Why a finding's explanation sets a call into a lazy initializer aside."""

_NESTED = frozenset({"function_definition", "class_definition", "lambda"})
_GUARDED = frozenset({"if_statement", "elif_clause"})


def lazy_call(edge: Edge, call: CallSite | None, arguments: Arguments) -> bool:
    """Whether the call behind ``edge`` passes no argument to a callee whose parameters
    (after ``self``) all have defaults: what a lazy initializer makes then depends on no value
    of the caller's."""
    return call is not None and not call.arguments.strip() and all(default is not None for _, default in arguments.parameters(edge.callee))


def lazily_initializes(steps: tuple[Step, ...], body: Body) -> bool:
    """Whether a function whose heaviest path is ``steps`` and whose parsed body is ``body``
    is a lazy initializer (module docstring)."""
    node, source, offset = body
    if node is None:
        return False
    database = [step for step in steps if any(effect in DB_EFFECTS for effect in step.effects)]
    if len(database) != 1:
        return False
    step = database[0]
    if sum(effect in WRITES for effect in step.effects) > 1 or step.effects.count(Effect.COMMIT) > 1:
        return False
    if not _returns_value(node):
        return False
    line = step.line - offset
    if any(low <= line <= high for low, high in paths.loop_lines(node)):
        return False
    guard = _innermost_guard(node, line)
    return guard is not None and _tests_missing(guard, source)


def _returns_value(body: Node) -> bool:
    """Whether ``body`` (nested functions aside) has a ``return`` with a value."""
    pending = [body]
    while pending:
        node = pending.pop()
        if node.type == "return_statement" and node.named_children:
            return True
        if node.type not in _NESTED or node is body:
            pending.extend(node.named_children)
    return False


def _innermost_guard(body: Node, line: int) -> Node | None:
    """The condition of the innermost ``if``/``elif`` whose own arm holds ``line`` (None when
    the innermost branch holding it is an ``else``, a ``try``, a ``with`` or nothing)."""
    found: Node | None = None
    node = body
    while True:
        inner = next(
            (child for child in node.named_children if paths.first_line(child) <= line <= paths.last_line(child)),
            None,
        )
        if inner is None or inner.type in _NESTED:
            return found
        if inner.type in _GUARDED:
            consequence = inner.child_by_field_name("consequence")
            if consequence is not None and paths.first_line(consequence) <= line <= paths.last_line(consequence):
                found = inner.child_by_field_name("condition")
                node = consequence
                continue
        elif inner.type in ("else_clause", "try_statement", "with_statement", "except_clause", "finally_clause"):
            found = None
        node = inner


def _tests_missing(condition: Node | None, source: bytes) -> bool:
    """Whether ``condition`` is ``not X``, ``X is None`` or ``X == None``."""
    if condition is None:
        return False
    if condition.type == "parenthesized_expression" and condition.named_children:
        return _tests_missing(condition.named_children[0], source)
    if condition.type == "not_operator":
        return True
    if condition.type == "comparison_operator" and len(condition.named_children) == 2:
        text = source[condition.start_byte : condition.end_byte].decode("utf-8", "replace")
        right = condition.named_children[1]
        operators = text[condition.named_children[0].end_byte - condition.start_byte : right.start_byte - condition.start_byte].split()
        return right.type == "none" and operators in (["is"], ["=="])
    return False
