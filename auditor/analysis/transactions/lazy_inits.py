"""Lazy initializers: a getter that writes one row only when the value it reads is missing.

The shape (open-event-server's ``get_settings``, froide's ``FoiRequest.get_secret``): a
Python function that returns a value, whose every database effect (its own sites and its
calls that reach one, on every path) sits in the arm of an ``if``/``elif`` testing that a
plain value is missing (``if s is None:``, ``if not self.secret:``), outside any loop or
comprehension, and whose heaviest path holds one database step: at most one row made (a
write, an upsert, a save of its own row) and one commit. The value is a local name (a row a
lookup just missed) or an attribute the arm assigns (``self.secret = get_random_string()``).
The arm may also be the handler of a lookup that found nothing (securedrop's
``InstanceConfig.get_current``: ``try: return q.one()`` then, under ``except NoResultFound:``,
an insert, itself perhaps in a race-safe ``try ... except IntegrityError``), and the test may
add ``or P`` / ``or P is True`` for a parameter ``P`` false at its default (securedrop's
``get_default(refresh=False)``: a lazy call passes no argument, so ``P`` is false).
The arm runs when the value is absent and fills it; every call after the first reads it. A
failure after such a call leaves the value made, which the next call would have made anyway:
the call is set aside from a caller's sequence, like a registry row, and named in the
explanation. The getter's own body is still analysed as any function.

Kept narrow so it cannot hide business writes: only a call that passes no argument, into a
function whose parameters (after ``self``) all have defaults, is one (a get-or-create keyed by
the caller's data stays a write: :mod:`.registry_rows`). Any write outside such an arm (an
``else``, another test, ``if not form.is_valid():``, ``if not self.pk:``, a flag set to a
literal), a loop anywhere below the step, a delete, two rows or two commits, or no returned
value leaves the call counted.

Inputs: the call (its edge and site, the callee's signature through
:class:`~.arguments.Arguments`), the callee's heaviest path (:class:`~.grading.Step`), its
parsed body (:data:`~.paths.Body`) and its effect lines (:func:`effect_lines`). Outputs:
:func:`lazy_call`, :func:`lazily_initializes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tree_sitter import Node

from auditor.callgraph.graph import Edge, FunctionRef
from auditor.analysis.transactions import paths
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.grading import DB_EFFECTS, Step
from auditor.analysis.transactions.paths import Body
from auditor.analysis.transactions.reach import Reach
from auditor.index.model import CallSite

REASON = "a lazy initializer (it writes one row only when the value it returns is missing: every later call reads it)"
"""Why a finding's explanation sets a call into a lazy initializer aside."""

_NESTED = frozenset({"function_definition", "class_definition", "lambda"})
_GUARDED = frozenset({"if_statement", "elif_clause"})
_RESETS = frozenset({"else_clause", "try_statement", "with_statement", "except_clause", "finally_clause"})
_COMPREHENSIONS = frozenset({"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"})
_PLAIN = frozenset({"identifier", "attribute", "subscript"})
_LITERALS = frozenset({"true", "false", "none", "integer", "float", "string", "concatenated_string"})
_MADE = (Effect.WRITE, Effect.UPSERT, Effect.UPDATE)
"""The effects that make a value: a save or create (a save of the object's own row is an update)."""
_ROW_IDENTITY = re.compile(r"(?:^|\.)(?:pk|id|_state\.adding)$")
_MAKERS = frozenset({"create", "get_or_create", "update_or_create"})
_ORM_LOOKUP_FAILURE = re.compile(r"(?i)noresultfound|\w*doesnotexist")
"""The lookups a lazy initializer's handler may catch: an ORM query that found no row
(sqlalchemy/exc.py ``NoResultFound``; django/core/exceptions.py ``ObjectDoesNotExist``, each
model's ``DoesNotExist``), not a missing file or an HTTP 404."""


def effect_lines(facts: FileFacts | None, reach: Reach, ref: FunctionRef) -> set[int]:
    """The lines of ``ref``'s own database effects and of its calls that reach an effect, on
    every path (not only the heaviest)."""
    own = {site.call.line for site in facts.sites.get(ref, ()) if site.effect in DB_EFFECTS} if facts is not None else set()
    return own | {edge.line for edge in reach.callees(ref) if reach.reaches_effect(edge.callee)}


def lazy_call(edge: Edge, call: CallSite | None, arguments: Arguments) -> bool:
    """Whether the call behind ``edge`` passes no argument to a Python callee whose
    parameters (after ``self``) all have defaults: what a lazy initializer makes then depends
    on no value of the caller's."""
    return (
        call is not None
        and edge.callee.path.endswith(".py")
        and not call.arguments.strip()
        and all(default is not None for _, default in arguments.parameters(edge.callee))
    )


def lazily_initializes(steps: tuple[Step, ...], body: Body, effect_lines: Iterable[int]) -> bool:
    """Whether a function whose heaviest path is ``steps``, whose parsed body is ``body`` and
    whose database effects (its own sites and its calls that reach one, on every path) sit at
    ``effect_lines`` is a lazy initializer (module docstring)."""
    node, source, offset = body
    if node is None or not _returns_value(node):
        return False
    database = [step for step in steps if any(effect in DB_EFFECTS for effect in step.effects)]
    if len(database) != 1 or _loops_inside(database[0]):
        return False
    effects = database[0].effects
    made = [effect for effect in effects if effect in DB_EFFECTS and effect is not Effect.COMMIT]
    if effects.count(Effect.COMMIT) > 1 or len(made) > 1 or any(effect not in _MADE for effect in made):
        return False  # two rows, two commits, a delete, a separately committed helper
    loops = paths.loop_lines(node) + paths.node_lines(node, _COMPREHENSIONS)  # a comprehension makes a row per item
    for line in {line - offset for line in effect_lines}:
        if any(low <= line <= high for low, high in loops):
            return False
        guard = _innermost_guard(node, line, source)
        if guard is None or (guard[0] is not None and not _fills_missing(guard[0], guard[1], source, node)):
            return False  # a write on an arm the value's presence does not decide: every call
    return True


def _loops_inside(step: Step) -> bool:
    """Whether ``step`` or a step of a call it makes, at any depth, runs in a loop."""
    pending = [step]
    while pending:
        current = pending.pop()
        if current.in_loop:
            return True
        pending.extend(current.inner)
    return False


def _returns_value(body: Node) -> bool:
    """Whether ``body`` (nested functions aside) has a ``return`` of something other than ``None``."""
    return any(value is not None and value.type != "none" for value in _returns(body))


def _innermost_guard(body: Node, line: int, source: bytes) -> tuple[Node | None, Node] | None:
    """The condition and the arm of the innermost ``if``/``elif`` whose own arm holds
    ``line``, or (None, handler) for the handler of a lookup that found nothing
    (:func:`_missed_lookup`); None when the innermost branch holding it is an ``else``, a
    ``try``, a ``with`` or nothing. Inside such a handler, the body of a ``try`` (the
    race-safe insert: ``try: add; commit except IntegrityError: ...``) runs only when the
    lookup missed too."""
    found: tuple[Node | None, Node] | None = None
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
            condition = inner.child_by_field_name("condition")
            if consequence is not None and condition is not None and paths.first_line(consequence) <= line <= paths.last_line(consequence):
                found = (condition, consequence)
                node = consequence
                continue
        elif inner.type == "except_clause" and _missed_lookup(inner, source):
            found = (None, inner)
        elif inner.type == "try_statement" and found is not None and found[0] is None:
            pass  # its body and handlers run only inside the missed lookup's handler
        elif inner.type in _RESETS:
            found = None
        node = inner


def _missed_lookup(handler: Node, source: bytes) -> bool:
    """Whether ``handler`` catches only an ORM lookup that found nothing (SQLAlchemy's
    ``NoResultFound``, Django's ``DoesNotExist``/``ObjectDoesNotExist``) of a ``try`` whose
    one statement returns or binds what it looked up (``try: return q.one() except
    NoResultFound: ...``), and fills that value: every ``return`` in it hands back a value
    (not ``None``), or it binds the name the ``try`` bound. The handler then runs only while
    the row is missing, and makes it."""
    caught = paths.caught_names(handler, source)
    if not caught or not all(_ORM_LOOKUP_FAILURE.fullmatch(name.rsplit(".", 1)[-1]) for name in caught):
        return False
    attempt = handler.parent
    body = attempt.child_by_field_name("body") if attempt is not None and attempt.type == "try_statement" else None
    statements = [child for child in body.named_children if child.type != "comment"] if body is not None else []
    if len(statements) != 1:
        return False
    lookup = statements[0].named_children[0] if statements[0].named_children else None
    if statements[0].type == "return_statement":
        returns = _returns(handler)
        return bool(returns) and all(value is not None and _hands_back_the_row(handler, value, lookup, source) for value in returns)
    bound = _binding(statements[0])
    target = bound.child_by_field_name("left") if bound is not None else None
    return target is not None and target.type == "identifier" and _makes(handler, _text(target, source), source)


def _hands_back_the_row(handler: Node, value: Node, lookup: Node | None, source: bytes) -> bool:
    """Whether a ``return value`` of the handler hands back the row it made (a local it
    :func:`_makes`) or the same lookup again (a race-safe insert's ``except IntegrityError:
    return q.one()``): not a default object or a literal, which leave the row unmade."""
    if value.type == "identifier":
        return _makes(handler, _text(value, source), source)
    return lookup is not None and " ".join(_text(value, source).split()) == " ".join(_text(lookup, source).split())


def _makes(handler: Node, name: str, source: bytes) -> bool:
    """Whether ``handler`` binds ``name`` to a row it makes: ``name = M.objects.create(...)``
    (``get_or_create``, ``update_or_create``), or ``name = <call>`` then ``session.add(name)``
    or ``name.save()``."""
    bound = made = False
    pending = [handler]
    while pending:
        node = pending.pop()
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if node.type == "assignment" and left is not None and right is not None and _text(left, source) == name and right.type == "call":
            function = right.child_by_field_name("function")
            bound = True
            made = made or (function is not None and _text(function, source).rsplit(".", 1)[-1] in _MAKERS)
        if node.type == "call":
            function, arguments = node.child_by_field_name("function"), node.child_by_field_name("arguments")
            text = _text(function, source) if function is not None else ""
            passed = [_text(argument, source) for argument in arguments.named_children] if arguments is not None else []
            made = made or (text.endswith(".add") and passed == [name]) or text == f"{name}.save"
        if node.type not in _NESTED:
            pending.extend(node.named_children)
    return bound and made


def _returns(node: Node) -> list[Node | None]:
    """The values of the ``return`` statements in ``node`` (None for a bare ``return``),
    nested functions aside."""
    found: list[Node | None] = []
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type == "return_statement":
            found.append(current.named_children[0] if current.named_children else None)
        elif current.type not in _NESTED:
            pending.extend(current.named_children)
    return found


def _binding(statement: Node) -> Node | None:
    """The assignment a statement is (``row = q.one()``), or None."""
    expression = statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    return expression if expression is not None and expression.type == "assignment" else None


def _fills_missing(condition: Node, arm: Node, source: bytes, body: Node) -> bool:
    """Whether ``condition`` tests that a plain value is missing (``not X``, ``X is None``,
    ``X == None``, with ``X`` a name, attribute or subscript, not a row's ``pk``/``id`` or
    ``_state.adding``) and either ``X`` is a local name or ``arm`` assigns ``X`` a value that
    is no literal (the arm makes the value; a flag set to ``True`` is a state change). An
    ``or`` with a test of a parameter false at its default (``X is None or refresh is
    True`` under ``refresh=False``) is that test alone: a lazy call passes no argument."""
    condition = _unwrapped(condition)
    operator = condition.child_by_field_name("operator") if condition.type == "boolean_operator" else None
    if operator is not None and operator.type == "or":
        left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
        return left is not None and right is not None and _false_by_default(right, source, body) and _fills_missing(left, arm, source, body)
    value: Node | None = None
    if condition.type == "not_operator":
        value = condition.child_by_field_name("argument")
    elif condition.type == "comparison_operator" and len(condition.named_children) == 2:
        left, right = condition.named_children
        operators = source[left.end_byte : right.start_byte].decode("utf-8", "replace").split()
        value = left if right.type == "none" and operators in (["is"], ["=="]) else None
    if value is None or value.type not in _PLAIN:
        return False
    text = _text(value, source)
    if _ROW_IDENTITY.search(text):
        return False
    if value.type == "identifier":
        return True
    return _assigns(arm, text, source)


def _unwrapped(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    return node


def _false_by_default(test: Node, source: bytes, body: Node) -> bool:
    """Whether ``test`` is ``P``, ``P is True`` or ``P == True`` for a parameter ``P`` of the
    function whose default is ``False``, ``None`` or ``0``."""
    test = _unwrapped(test)
    if test.type == "comparison_operator" and len(test.named_children) == 2:
        left, right = test.named_children
        operators = source[left.end_byte : right.start_byte].decode("utf-8", "replace").split()
        test = left if right.type == "true" and operators in (["is"], ["=="]) else test
    function = body.parent
    parameters = function.child_by_field_name("parameters") if function is not None else None
    if test.type != "identifier" or parameters is None:
        return False
    name = _text(test, source)
    if name in paths.bound_names(body):
        return False  # bound again in the body: not the default at the test
    for parameter in parameters.named_children:
        if parameter.type in ("default_parameter", "typed_default_parameter"):
            named, default = parameter.child_by_field_name("name"), parameter.child_by_field_name("value")
            if named is not None and default is not None and _text(named, source) == name:
                return default.type in ("false", "none") or _text(default, source) == "0"
    return False


def _assigns(arm: Node, target: str, source: bytes) -> bool:
    """Whether ``arm`` (nested functions aside) assigns ``target`` a value that is no literal."""
    pending = [arm]
    while pending:
        node = pending.pop()
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and _text(left, source) == target and right.type not in _LITERALS:
                return True
        if node.type not in _NESTED:
            pending.extend(node.named_children)
    return False


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")
