"""Outcomes: on which of its return values a function's effects happen, and which calls'
results decide an immediate ``return`` or ``raise`` in their caller.

A caller that returns or raises at once on a call's result (``if f(): return redirect()``,
``r = f(); if isinstance(r, HttpResponse): return r``, ``if limited(): raise ...``) carries
on only when the call returned the other kind of value. :func:`decisions` finds those call
sites in a Python body and says what the continuing path needs the call to have returned
(a requirement: one of :data:`REQUIREMENTS`, put in the callee's ``off`` set the way
:mod:`.arguments` puts the parameters a call switches off). :meth:`Outcomes.exits` then
tells the path walker (:class:`~.paths.Exits`) which of the callee's ``return`` statements
may end such a path: those whose value can be of the required kind (``return True`` cannot
end a path that needs a false value; a tuple or an HTTP response cannot be ``None``), every
``raise`` (its effects stay: kept conservative), and an unknown value always, but for a
false value required of ``return x`` (or ``return a or x``, or an attribute set to that on
the statement just before) a local ``x`` bound once, outside any loop, and never used as
a receiver, passed to a call, or aliased (assigned to or from another name: nothing changes
its truth), is known false on that path, so an arm testing ``x`` cannot have run on it.

The sequence builder (:mod:`.sequences`) walks the caller once with the decided calls'
filtered effects, and once per decision with that call's full effects and the path cut at
its deciding ``if`` (the path that returns there): the two together cover every real path.

Kept sound by refusing what it cannot read: only Python; a generator, an ``async def`` or a
decorated callee (but ``staticmethod``/``classmethod``) is not filtered; an ``if`` with
``elif`` arms, or whose returning arm holds another decision, decides nothing; nor does
one inside a ``try`` of the caller with an ``except`` or ``finally``: a caught exception (the
caller's own ``raise``, or one the callee throws after its write) carries the path on past
the ``if`` with the callee's writes, and a ``finally`` adds writes to the returning path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from tree_sitter import Node

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.transactions import paths
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.paths import Body

RETURNS_FALSE = "<returns a false value>"
RETURNS_TRUE = "<returns a true value>"
RETURNS_NONE = "<returns None>"
RETURNS_VALUE = "<returns a value, not None>"
RETURNS_NO_RESPONSE = "<returns no HTTP response>"
RETURNS_RESPONSE = "<returns an HTTP response>"
REQUIREMENTS = frozenset({RETURNS_FALSE, RETURNS_TRUE, RETURNS_NONE, RETURNS_VALUE, RETURNS_NO_RESPONSE, RETURNS_RESPONSE})
"""What a caller's continuing path needs a call to have returned (markers in ``off``)."""


class Kind(Enum):
    """What one ``return`` statement hands back, as far as its text tells."""

    NONE = "None"
    FALSE = "a false value, not None"
    TRUE = "True or a true literal"
    TUPLE = "a non-empty tuple"
    RESPONSE = "a Django HTTP response"
    OTHER = "unknown"


_MATCHING: Mapping[str, frozenset[Kind]] = {
    RETURNS_FALSE: frozenset({Kind.NONE, Kind.FALSE}),
    RETURNS_TRUE: frozenset({Kind.TRUE, Kind.TUPLE, Kind.RESPONSE}),
    RETURNS_NONE: frozenset({Kind.NONE}),
    RETURNS_VALUE: frozenset({Kind.FALSE, Kind.TRUE, Kind.TUPLE, Kind.RESPONSE}),
    RETURNS_NO_RESPONSE: frozenset({Kind.NONE, Kind.FALSE, Kind.TRUE, Kind.TUPLE}),
    RETURNS_RESPONSE: frozenset({Kind.RESPONSE}),
}
# What the continuing path needs, by test and by the value the condition has on it.
_TRUTH, _NONE_TEST, _RESPONSE_TEST = "truth", "none", "response"
_REQUIRED = {
    (_TRUTH, True): RETURNS_TRUE, (_TRUTH, False): RETURNS_FALSE,
    (_NONE_TEST, True): RETURNS_NONE, (_NONE_TEST, False): RETURNS_VALUE,
    (_RESPONSE_TEST, True): RETURNS_RESPONSE, (_RESPONSE_TEST, False): RETURNS_NO_RESPONSE,
}  # fmt: skip
# Every Django response (DRF's ``Response`` too) is an instance of these.
_RESPONSE_BASES = frozenset({"HttpResponse", "HttpResponseBase"})
_RESPONSE_CLASS = re.compile(r"\w*HttpResponse\w*|\w*Response")  # HttpResponseRedirect, JsonResponse, DRF's Response
_RESPONSE_SHORTCUTS = frozenset({"render", "redirect", "render_to_response"})  # django.shortcuts
_TRANSPARENT_DECORATORS = frozenset({"staticmethod", "classmethod"})
_FALSE_LITERALS = frozenset({"0", '""', "''", "()", "[]", "{}"})
_NESTED = frozenset({"function_definition", "class_definition", "decorated_definition", "lambda"})
_CARRIERS = frozenset({"boolean_operator", "conditional_expression", "tuple", "list", "set", "dictionary", "pair", "expression_list",
                       "list_splat", "dictionary_splat"})  # fmt: skip
_HANDLING = frozenset({"except_clause", "except_group_clause", "finally_clause"})
_LOOPS = frozenset({"for_statement", "while_statement"})
_BINDERS = {"assignment": "left", "augmented_assignment": "left", "for_statement": "left", "named_expression": "name",
            "for_in_clause": "left", "as_pattern_target": None}  # fmt: skip


def required(off: frozenset[str]) -> str | None:
    """The requirement on the function's return value ``off`` carries, if any."""
    return next((item for item in off if item in REQUIREMENTS), None)


@dataclass(frozen=True)
class Decision:
    """A call whose result decides an immediate ``return``/``raise`` of its caller."""

    line: int
    """The call's first line, in the file."""
    name: str
    """The last part of the called name (``f`` of ``self.f(...)``)."""
    statement: int
    """Byte offset of the deciding ``if`` statement in the parsed source."""
    requirement: str
    """What the call returned on the paths that carry on past that ``if``."""


def decisions(body: Node | None, offset: int) -> tuple[Decision, ...]:
    """The calls in a Python body whose result decides an ``if`` whose only ending arm
    returns or raises: ``if f(...):``, ``if not f(...):``, ``if f(...) is None:``, or the
    same tests (and ``isinstance(r, HttpResponse)``) of ``r`` bound by ``r = f(...)`` on the
    statement just before. An ``if`` with ``elif`` arms, both arms ending, or another
    decision inside its ending arm, decides nothing; nor does one inside a ``try`` with an
    ``except`` or ``finally`` (:func:`_in_handling_try`)."""
    if body is None:
        return ()
    found: list[tuple[Decision, tuple[int, int]]] = []
    for statement in _statements(body):
        if statement.type == "if_statement" and not _in_handling_try(statement, body):
            decided = _decision(statement, offset)
            if decided is not None:
                found.append(decided)
    return tuple(
        decision for decision, (low, high) in found
        if not any(low <= other.statement < high for other, _ in found if other is not decision)
    )  # fmt: skip


def _in_handling_try(statement: Node, body: Node) -> bool:
    """Whether ``statement`` (and so its call, in its condition or on the statement just
    before) lies inside a ``try`` of ``body`` that has an ``except`` or ``finally``: there an
    exception may carry the path on past the ``if`` after the callee's writes (the caller's
    own ``raise`` caught, or one the callee throws), and a ``finally`` runs on the returning
    path too. A ``with`` counts as such a ``try``: its context manager may swallow the
    exception (``contextlib.suppress``) or run code on the way out."""
    node = statement.parent
    while node is not None and node != body:
        if node.type == "with_statement":
            return True
        if node.type == "try_statement" and any(child.type in _HANDLING for child in node.named_children):
            return True
        node = node.parent
    return False


def _decision(statement: Node, offset: int) -> tuple[Decision, tuple[int, int]] | None:
    arms, closed = paths.if_arms(statement)
    if not arms or len(arms) > 2 or (len(arms) == 2 and not closed):
        return None
    condition, consequence = arms[0]
    alternative = arms[1][1] if len(arms) == 2 else None
    first_ends, other_ends = _ends(consequence), alternative is not None and _ends(alternative)
    if first_ends == other_ends or condition is None:
        return None
    test = _test(condition)
    if test is None:
        return None
    subject, kind, negated = test
    call = subject if subject.type == "call" else _bound_call(statement, subject)
    function = call.child_by_field_name("function") if call is not None else None
    if call is None or function is None or function.text is None:
        return None
    continuing = not first_ends  # the condition's value on the path that carries on
    requirement = _REQUIRED[(kind, continuing != negated)]
    ending = consequence if first_ends else alternative
    if ending is None:
        return None
    name = function.text.decode("utf-8", "replace").rsplit(".", 1)[-1]
    decision = Decision(paths.first_line(call) + offset, name, statement.start_byte, requirement)
    return decision, (ending.start_byte, ending.end_byte)


def _test(condition: Node) -> tuple[Node, str, bool] | None:
    """(subject, kind of test, negated) of a condition: the truth of a call or name,
    ``is None``/``is not None``, ``isinstance(x, HttpResponse)``, each perhaps under ``not``."""
    node, negated = _unwrapped(condition), False
    argument = node.child_by_field_name("argument") if node.type == "not_operator" else None
    while argument is not None:
        node, negated = _unwrapped(argument), not negated
        argument = node.child_by_field_name("argument") if node.type == "not_operator" else None
    if node.type == "comparison_operator" and len(node.children) == 3 and node.children[2].type == "none":
        operator = node.children[1].type
        subject = _subject(node.children[0])
        if operator not in ("is", "is not") or subject is None:
            return None
        return subject, _NONE_TEST, negated != (operator == "is not")
    if node.type == "call" and _text(node.child_by_field_name("function")) == "isinstance":
        arguments = [child for child in (node.child_by_field_name("arguments") or node).named_children if child.type != "comment"]
        if len(arguments) != 2 or _text(arguments[1]).rsplit(".", 1)[-1] not in _RESPONSE_BASES:
            return None
        subject = _subject(arguments[0])
        return (subject, _RESPONSE_TEST, negated) if subject is not None else None
    subject = _subject(node)
    return (subject, _TRUTH, negated) if subject is not None else None


def _subject(node: Node) -> Node | None:
    node = _unwrapped(node)
    return node if node.type in ("call", "identifier") else None


def _bound_call(statement: Node, name: Node) -> Node | None:
    """The call ``name`` is bound to by the statement just before ``statement``
    (``r = f(...)``), or None."""
    previous = statement.prev_named_sibling
    while previous is not None and previous.type == "comment":
        previous = previous.prev_named_sibling
    if previous is None or previous.type != "expression_statement" or len(previous.named_children) != 1:
        return None
    assignment = previous.named_children[0]
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    if assignment.type != "assignment" or left is None or right is None or left.type != "identifier":
        return None
    return right if right.type == "call" and left.text == name.text else None


def _ends(block: Node) -> bool:
    """Whether a block's last statement returns or raises."""
    statements = [child for child in block.named_children if child.type != "comment"]
    return bool(statements) and statements[-1].type in ("return_statement", "raise_statement")


class Outcomes:
    """Which of a function's ends a path may take when its caller needs a kind of result."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], body_of: Callable[[FunctionRef], Body]) -> None:
        self.graph = graph
        self.facts = facts
        self.body_of = body_of
        self._responses: dict[FunctionRef, bool] = {}

    def exits(self, ref: FunctionRef, body: Body, requirement: str | None) -> tuple[paths.Exits, ...]:
        """The walks that together cover ``ref``'s paths returning a value ``requirement``
        allows: one with every ``raise`` and the allowed ``return`` statements (falling off
        the end when ``None`` is allowed), one more per ``return x`` that needs ``x`` false.
        Every end, when there is no requirement or the function cannot be read."""
        node, source, offset = body
        if requirement is None or node is None or not self._filterable(ref, node):
            return (paths.EVERY_EXIT,)
        matching = _MATCHING[requirement]
        allowed: set[int] = set()
        guarded: list[paths.Exits] = []
        dropped = Kind.NONE not in matching
        for exit_node in _exits(node):
            if exit_node.type == "raise_statement":
                allowed.add(exit_node.start_byte)
                continue
            kind = self._kind(ref, exit_node, offset)
            false_names = _false_names(exit_node, node) if kind is Kind.OTHER and requirement == RETURNS_FALSE else frozenset()
            if false_names:
                guarded.append(paths.Exits(frozenset({exit_node.start_byte}), False, false_names))
            elif kind is Kind.OTHER or kind in matching:
                allowed.add(exit_node.start_byte)
            else:
                dropped = True
        if not dropped and not guarded:
            return (paths.EVERY_EXIT,)
        return (paths.Exits(frozenset(allowed), Kind.NONE in matching), *guarded)

    def returns_response(self, ref: FunctionRef) -> bool:
        """Whether every way out of ``ref`` but a raise returns a Django HTTP response (its
        view decorators, ``login_required`` and the like, answer with one too)."""
        found = self._responses.get(ref)
        if found is not None:
            return found
        self._responses[ref] = False  # a cycle proves nothing
        node, source, offset = self.body_of(ref)
        returns = [exit_node for exit_node in _exits(node) if exit_node.type == "return_statement"] if node is not None else []
        found = (
            node is not None
            and self._python(ref)
            and bool(returns)
            and not _generator(node)
            and not paths.falls_through(node, source)
            and all(self._kind(ref, exit_node, offset) is Kind.RESPONSE for exit_node in returns)
        )
        self._responses[ref] = found
        return found

    def _python(self, ref: FunctionRef) -> bool:
        facts = self.facts.get(ref.path)
        return facts is not None and facts.index.language == "python"

    def _filterable(self, ref: FunctionRef, node: Node) -> bool:
        """A Python function whose call returns what its ``return`` statements give: no
        generator, no coroutine, no decorator that may change the value."""
        definition = node.parent
        if not self._python(ref) or definition is None or definition.type != "function_definition" or _generator(node):
            return False
        if any(child.type == "async" for child in definition.children):
            return False
        decorated = definition.parent
        if decorated is None or decorated.type != "decorated_definition":
            return True
        names = [_text(decorator.named_children[0]) if decorator.named_children else "" for decorator in decorated.named_children if decorator.type == "decorator"]
        return all(name in _TRANSPARENT_DECORATORS for name in names)

    def _kind(self, ref: FunctionRef, exit_node: Node, offset: int) -> Kind:
        values = [child for child in exit_node.named_children if child.type != "comment"]
        if not values:
            return Kind.NONE
        value = _unwrapped(values[0])
        text = _text(value)
        if value.type == "none":
            return Kind.NONE
        if value.type == "false" or text in _FALSE_LITERALS:
            return Kind.FALSE
        if value.type == "true" or (value.type == "integer" and text.isdigit() and text.strip("0")):
            return Kind.TRUE
        if value.type == "expression_list" or (value.type == "tuple" and value.named_children):
            return Kind.TUPLE
        if value.type == "call" and self._response_call(ref, value, offset):
            return Kind.RESPONSE
        return Kind.OTHER

    def _response_call(self, ref: FunctionRef, call: Node, offset: int) -> bool:
        """Whether a call gives a Django response: a project function that always returns
        one, else a response class or a ``django.shortcuts`` name in a file that uses Django."""
        function = _text(call.child_by_field_name("function"))
        name = function.rsplit(".", 1)[-1]
        line = paths.first_line(call) + offset
        targets = [edge.callee for edge in self.graph.callees(ref) if edge.line == line and edge.callee.qualname.rsplit(".", 1)[-1] == name]
        if targets:
            return all(self.returns_response(target) for target in targets)
        facts = self.facts.get(ref.path)
        if facts is None or "django" not in facts.text and "rest_framework" not in facts.text:
            return False
        if _RESPONSE_CLASS.fullmatch(name):
            return True
        return name in _RESPONSE_SHORTCUTS and not function.startswith(("self.", "cls."))


def _false_names(exit_node: Node, body: Node) -> frozenset[str]:
    """The locals a false value of ``return <value>`` makes false on its path: ``x`` of
    ``return x`` or ``return a or x``, or of ``return obj.attr`` right after ``obj.attr = a
    or x``; each bound at most once in the body (never in a loop, never by ``global``), or
    a parameter never bound again."""
    values = [child for child in exit_node.named_children if child.type != "comment"]
    if not values:
        return frozenset()
    value = _unwrapped(values[0])
    if value.type == "attribute":
        previous = exit_node.prev_named_sibling
        assignment = previous.named_children[0] if previous is not None and previous.type == "expression_statement" and previous.named_children else None
        left = assignment.child_by_field_name("left") if assignment is not None and assignment.type == "assignment" else None
        right = assignment.child_by_field_name("right") if assignment is not None else None
        if left is None or right is None or left.text != value.text:
            return frozenset()
        value = _unwrapped(right)
    names = {_text(operand) for operand in _disjuncts(value) if operand.type == "identifier"}
    parameters = _parameters(body)
    return frozenset(name for name in names if _bound_once(name, body, parameters))


def _disjuncts(node: Node) -> Iterator[Node]:
    """The operands of a chain of ``or`` (the node itself when it is none)."""
    operator = node.child_by_field_name("operator") if node.type == "boolean_operator" else None
    if operator is None or operator.type != "or":
        yield node
        return
    for side in ("left", "right"):
        part = node.child_by_field_name(side)
        if part is not None:
            yield from _disjuncts(_unwrapped(part))


def _parameters(body: Node) -> frozenset[str]:
    definition = body.parent
    parameters = definition.child_by_field_name("parameters") if definition is not None else None
    names: set[str] = set()
    for parameter in parameters.named_children if parameters is not None else ():
        target = parameter if parameter.type == "identifier" else parameter.child_by_field_name("name") or next(iter(parameter.named_children), None)
        if target is not None and target.type == "identifier":
            names.add(_text(target))
    return frozenset(names)


def _bound_once(name: str, body: Node, parameters: frozenset[str]) -> bool:
    """Whether ``name`` has one value, and one truth, on every path once bound: a parameter
    the body never binds again, or a local bound by one statement outside any loop; never
    a receiver nor an argument (:func:`_may_change`), and never aliased (:func:`_aliased`)."""
    bindings = 0
    pending: list[tuple[Node, bool]] = [(body, False)]
    while pending:
        node, looped = pending.pop()
        if node.type in ("global_statement", "nonlocal_statement", "delete_statement") and any(_text(child) == name for child in node.named_children):
            return False
        if node.type in _BINDERS:
            field = _BINDERS[node.type]
            target = node.child_by_field_name(field) if field is not None else node
            if target is not None and name in _identifiers(target):
                bindings += 1
                if looped:
                    return False
        if node.type in ("import_statement", "import_from_statement") and name in _identifiers(node):
            return False
        if _may_change(node, name) or _aliased(node, name):
            return False
        if node.type not in _NESTED or node is body:
            pending.extend((child, looped or node.type in _LOOPS) for child in node.named_children)
    return bindings == 0 if name in parameters else bindings == 1


def _may_change(node: Node, name: str) -> bool:
    """Whether ``node`` may change the truth of the object ``name`` holds without binding
    it again: a method called or an attribute or item read on it (``hit.clear()``), or
    the object passed to a call."""
    if node.type == "attribute":
        base = node.child_by_field_name("object")
    elif node.type == "subscript":
        base = node.child_by_field_name("value")
    elif node.type in ("argument_list", "keyword_argument"):
        return any(child.type == "identifier" and _text(child) == name for child in node.named_children)
    else:
        return False
    return base is not None and base.type == "identifier" and _text(base) == name


def _aliased(node: Node, name: str) -> bool:
    """Whether ``node`` binds a name to the object ``name`` holds, or ``name`` to another
    name's object (``pending = hits``, ``hits = found or pending``): a change made through
    the other name changes its truth too."""
    if node.type in ("assignment", "augmented_assignment"):
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    elif node.type == "named_expression":
        left, right = node.child_by_field_name("name"), node.child_by_field_name("value")
    else:
        return False
    if left is None or right is None:
        return False
    targets, carried = _identifiers(left), _carried(right)
    return (name in carried and bool(targets - {name})) or (name in targets and bool(carried - {name}))


def _carried(value: Node) -> set[str]:
    """The names whose objects ``value`` may be or hold: the value itself, either side of
    ``or``/``and``, either arm of ``a if c else b``, the items of a tuple, list, set or dict."""
    found: set[str] = set()
    pending = [value]
    while pending:
        node = _unwrapped(pending.pop())
        if node.type == "identifier":
            found.add(_text(node))
        elif node.type in _CARRIERS:
            pending.extend(child for child in node.named_children if child.type != "comment")
        elif node.type == "named_expression":
            pending.extend(child for child in (node.child_by_field_name("name"), node.child_by_field_name("value")) if child is not None)
    return found


def _identifiers(target: Node) -> set[str]:
    found: set[str] = set()
    pending = [target]
    while pending:
        node = pending.pop()
        if node.type == "identifier":
            found.add(_text(node))
        elif node.type not in ("attribute", "subscript", "call"):
            pending.extend(node.named_children)
    return found


def _exits(body: Node) -> Iterator[Node]:
    """The ``return`` and ``raise`` statements of a body (nested functions aside)."""
    pending = [body]
    while pending:
        node = pending.pop()
        if node.type in ("return_statement", "raise_statement"):
            yield node
        elif node.type not in _NESTED or node is body:
            pending.extend(node.named_children)


def _statements(body: Node) -> Iterator[Node]:
    """Every node of a body, nested functions aside."""
    pending = [body]
    while pending:
        node = pending.pop()
        yield node
        if node.type not in _NESTED or node is body:
            pending.extend(node.named_children)


def _generator(body: Node) -> bool:
    return any(node.type in ("yield", "await") for node in _statements(body))


def _unwrapped(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    return node


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""
