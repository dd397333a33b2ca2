"""Path-sensitive sequences: the heaviest run of events along one feasible path through a
function's body.

Events (writes, commits, side effects, calls that perform them) are placed on the
function's statements by line. Exclusive branches (``if/elif/else``, ``switch``/``match``
cases, exception handlers; in Python, sibling ``if x:`` / ``if not x:`` of a local nothing
touches between them, :mod:`.complements`) contribute their heaviest arm, not their sum; ``return``,
``raise`` and ``throw`` end a path, so writes after an early return and writes before it
in the returning arm are never counted together. An arm whose condition is exactly a
parameter the caller passes as a false constant (``if save:`` under ``save=False``) cannot
run. Loops count their body once and always pass (they may run zero times or ``break``). An event in a ``try`` body with a handler that carries on
past a write's failure (it catches a database error or everything, and has no ``return``,
``raise`` or ``throw``: the function goes on) is passed through the caller's ``caught``
marker, so grading knows nobody retries after it fails. A walk may keep only some of the
function's ends (:class:`Exits`: the ``return`` statements whose value a caller carries on
with, :mod:`.outcomes`) and cut a caller's path at the ``if`` that returns on a call's
result. The syntax comes from tree-sitter (Python, Java, Go, JavaScript/TypeScript share
these node names); a function whose body cannot be found is treated as one straight
sequence.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tree_sitter import Node, Parser

from .complements import Test, local_of, python_if, untouched

Event = TypeVar("Event")
Path = tuple  # a tuple of events in source order
Body = tuple[Node | None, bytes, int]
"""A function's body node, the source it was parsed from and the lines before that source."""

_FUNCTIONS = frozenset(
    {"function_definition", "method_declaration", "constructor_declaration", "function_declaration",
     "method_definition", "arrow_function", "function_expression", "generator_function_declaration"}
)  # fmt: skip
_NESTED = _FUNCTIONS | {"class_definition", "decorated_definition", "class_declaration", "lambda", "func_literal"}
_EXITS = frozenset({"return_statement", "raise_statement", "throw_statement"})
_SWITCHES = frozenset(
    {"match_statement", "switch_expression", "switch_statement", "expression_switch_statement",
     "type_switch_statement", "select_statement"}
)  # fmt: skip
_CASE_CONTAINERS = frozenset({"block", "switch_block", "switch_body"})
_CONTAINERS = frozenset(
    {"block", "statement_list", "statement_block", "for_statement", "while_statement", "with_statement",
     "for_in_statement", "enhanced_for_statement", "do_statement", "labeled_statement", "else_clause",
     "switch_block_statement_group", "switch_rule", "expression_case", "default_case", "case_clause",
     "communication_case", "type_case", "switch_case", "switch_default", "finally_clause", "except_clause",
     "catch_clause", "synchronized_statement", "try_with_resources_statement", "constructor_body"}
)  # fmt: skip
_HANDLERS = frozenset({"except_clause", "except_group_clause", "catch_clause"})
_CLAUSES = frozenset({"elif_clause", "else_clause"})
# What a failed write raises (Django's ProtectedError, IntegrityError, DatabaseError, the
# DB-API's Error and InterfaceError, SQLAlchemy's DBAPIError, Spring's DataAccessException
# family, JDBC's SQLException), or a catch-all type.
_WRITE_FAILURE = re.compile(
    r"(?i)exception|baseexception|throwable|runtimeexception|error|dbapierror|interfaceerror|\w*(?:protected|restricted"
    r"|integrity|database|dataerror|operational|sql|dataaccess|persistence|constraint|deadlock)\w*"
)
# A lookup that found nothing (Spring's EmptyResultDataAccessException, like Django's
# DoesNotExist and SQLAlchemy's NoResultFound, sqlalchemy/exc.py, raised by Query.one() and
# Result.one()): not a write's failure.
_LOOKUP_FAILURE = re.compile(r"(?i)emptyresult\w*|\w*doesnotexist|\w*notfound\w*|noresultfound")
_TYPE_NAME = re.compile(r"[A-Za-z_][\w.]*")
EXISTING_ROW = "<an existing row>"
"""In a path's ``off`` set: the object the function saves is a row read from the database,
so a "new object only" guard (:data:`_FRESH_ROW`) is false."""
FRESH_ROW = "<a new row>"
"""In a path's ``off`` set: the object is new, so an "existing object only" guard is false."""


UNCHANGED = "<unchanged> "
"""Prefix of a comparison known false in a path's ``off`` set (:mod:`.snapshots`)."""


def _conjuncts(text: str) -> list[str]:
    """The terms of a condition that is a plain ``and`` chain (none when an ``or`` could
    bind looser than one of them), parentheses stripped."""
    if " or " in text or "||" in text:
        return []
    return [term.strip("() \t") for term in text.split(" and ")]


def none_marker(name: str) -> str:
    """In a path's ``off`` set: parameter ``name`` is ``None``, not only false."""
    return f"<{name} is None>"
# Guards true only while the object is not yet a row: Django's ``created`` (get_or_create,
# post_save), ``_state.adding`` (set False by Model.save_base once the row is written,
# django/db/models/base.py), a primary key not yet assigned.
_FRESH_ROW = re.compile(r"(?:is_new|created|\w+\._state\.adding|(?:\w+\.)+(?:pk|id) is None|not (?:\w+\.)+(?:pk|id))")
_EXISTING = re.compile(r"(?:not (?:is_new|created|\w+\._state\.adding)|(?:\w+\.)+(?:pk|id)(?: is not None)?)")
_GUARD_WORDS = re.compile(rb"\bcreated\b|\bis_new\b|_state\.adding|\.(?:pk|id) is None|\bnot [\w.]+\.(?:pk|id)\b")


# Conditions read against the parameters a call switches off (names, and
# :func:`~.arguments.none_marker` for those passed ``None``).
# A name is a parameter or an attribute of ``self`` (:mod:`.stored_flags`).
_NEGATION = re.compile(r"\(?\s*not\s+((?:self\.)?[A-Za-z_]\w*)\s*\)?")
_NONE_TEST = re.compile(r"\(?\s*((?:self\.)?[A-Za-z_]\w*)\s+is\s+None\s*\)?")
_NOT_NONE_TEST = re.compile(r"((?:self\.)?[A-Za-z_]\w*)\s+is\s+not\s+None")


@dataclass(frozen=True)
class Exits:
    """Which ends of a function's paths a walk keeps (:mod:`.outcomes`): only the
    ``return``/``raise`` statements starting at ``allowed`` (byte offsets in the parsed
    source), falling off the end only when ``falls_through``; ``known_false`` names locals
    the kept ends imply false on the whole path (bound once, so a test of them elsewhere
    reads the same value). ``cut`` holds the byte offsets of ``if`` statements a caller's
    path must leave through an arm that ends (the call it decides on had the outcome that
    returns): paths carrying on past them are not kept."""

    allowed: frozenset[int] | None = None
    falls_through: bool = True
    known_false: frozenset[str] = frozenset()
    cut: frozenset[int] = frozenset()
    raising: frozenset[int] = frozenset()
    """Lines (of the parsed source) of calls that always raise: a simple statement holding
    one ends its path as a ``raise`` would (:mod:`.missing_methods`)."""


EVERY_EXIT = Exits()
"""Every path's end kept (the walk as it is without outcomes)."""


_LOOPS = frozenset({"for_statement", "while_statement", "for_in_statement", "enhanced_for_statement", "do_statement"})
# Statements that hold others: a call inside one raises in one of its parts, not in all.
_COMPOUND = _CONTAINERS | _LOOPS | _SWITCHES | _NESTED | _HANDLERS | _CLAUSES | {"if_statement", "try_statement", "with_statement"}


def loop_lines(body: Node) -> list[tuple[int, int]]:
    """The line ranges of the loops in ``body`` (nested functions aside)."""
    return node_lines(body, _LOOPS)


def node_lines(body: Node, types: frozenset[str]) -> list[tuple[int, int]]:
    """The line ranges of the outermost nodes of ``types`` in ``body`` (nested functions aside)."""
    found: list[tuple[int, int]] = []
    pending = [body]
    while pending:
        node = pending.pop()
        if node.type in types:
            found.append((first_line(node), last_line(node)))
        elif node.type not in _NESTED or node is body:
            pending.extend(node.named_children)
    return found


def row_guarded(source: bytes) -> bool:
    """Whether a body may test whether its object is new (``created``, ``_state.adding``,
    ``pk is None``): its paths are then walked once for a new and once for an existing row."""
    return _GUARD_WORDS.search(source) is not None


_SOMETIMES_EVALUATED = frozenset(
    {
        "boolean_operator", "conditional_expression", "lambda", "list_comprehension", "set_comprehension",
        "dictionary_comprehension", "generator_expression", "assert_statement", "type",
    }
)
"""Python expressions whose parts a statement need not evaluate (language reference,
"Expressions"): ``or``/``and`` stop at the first operand that decides; ``x if c else y``
evaluates one arm; a lambda's body runs when called; a comprehension's element and
conditions run per item (a generator's only when consumed); ``assert c, msg`` evaluates
``msg`` only when ``c`` is false (and neither under ``-O``); a local variable's annotation
is never evaluated ("Annotated assignment statements"). A chained comparison
(``a < b < c``) stops at the first false one too: see :func:`_sometimes_evaluated_spans`."""


def _sometimes_evaluated_spans(statement: Node) -> list[tuple[int, int]]:
    """The line ranges of the parts of ``statement`` that may go unevaluated (the whole
    construct's lines: which operand a call sits in is not told by its line)."""
    spans: list[tuple[int, int]] = []
    pending = [statement]
    while pending:
        node = pending.pop()
        chained = node.type == "comparison_operator" and len(node.named_children) > 2
        if node.type in _SOMETIMES_EVALUATED or chained:
            spans.append((first_line(node), last_line(node)))
            continue
        pending.extend(node.named_children)
    return spans


def first_line(node: Node) -> int:
    return node.start_point.row + 1


def last_line(node: Node) -> int:
    end_row, end_column = node.end_point
    return end_row if end_column == 0 and end_row > node.start_point.row else end_row + 1


def function_body(root: Node, start_line: int, end_line: int) -> Node | None:
    """The body node of the function spanning ``start_line..end_line`` (decorators included)."""
    node = root
    while True:
        for child in node.named_children:
            if last_line(child) < end_line or first_line(child) > end_line:
                continue
            if child.type in _FUNCTIONS and last_line(child) == end_line and first_line(child) >= start_line:
                return child.child_by_field_name("body")
            if first_line(child) <= start_line:
                node = child
                break
        else:
            return None


def dedented_body(parser: Parser, lines: Sequence[str], start_line: int, end_line: int) -> tuple[Node | None, bytes, int]:
    """The body of the function on lines ``start_line..end_line`` parsed on its own,
    dedented: its node, the source parsed and the number of lines before that source."""
    text = textwrap.dedent("\n".join(lines[start_line - 1 : end_line]))
    source = text.encode("utf-8", "surrogatepass")
    root = parser.parse(source).root_node
    offset = start_line - 1
    return function_body(root, 1, end_line - offset), source, offset


def carries_on(handler: Node, source: bytes) -> bool:
    """Whether an ``except``/``catch`` handler lets the function go on after a write fails:
    it catches a database error (:data:`_WRITE_FAILURE`) or everything, not only a lookup's
    ``DoesNotExist``, and has no ``return``, ``raise`` or ``throw`` (nested functions aside)."""
    caught = _caught_types(handler, source)
    names = _TYPE_NAME.findall(caught) if caught is not None else []
    last_names = [name.rsplit(".", 1)[-1] for name in names]
    if caught is not None and not any(_WRITE_FAILURE.fullmatch(name) and not _LOOKUP_FAILURE.fullmatch(name) for name in last_names):
        return False
    pending = list(handler.named_children)
    while pending:
        node = pending.pop()
        if node.type in _EXITS:
            return False
        if node.type not in _NESTED:
            pending.extend(node.named_children)
    return True


def caught_names(handler: Node, source: bytes) -> list[str]:
    """The exception type names an ``except``/``catch`` handler names (none for a bare
    ``except:``)."""
    caught = _caught_types(handler, source)
    return _TYPE_NAME.findall(caught) if caught is not None else []


def _caught_types(handler: Node, source: bytes) -> str | None:
    """The exception types a handler names (``IntegrityError``, ``(A, B)``, ``A | B``);
    None when it catches everything (a bare ``except:``, a JavaScript ``catch (e)``)."""
    for child in handler.named_children:
        if child.type == "catch_formal_parameter":  # Java: the type before the name
            types = next((part for part in child.named_children if part.type == "catch_type"), None)
            return _text(types, source) if types is not None else None
        if handler.type in ("except_clause", "except_group_clause") and child.type not in ("block", "comment"):
            if child.type == "as_pattern" and child.named_children:
                child = child.named_children[0]
            return _text(child, source)
    return None


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


@dataclass(frozen=True)
class _Tested:
    """A single-arm ``if`` already walked in a block: its test, the statement and its
    position among the block's statements, and where its events sit on the path through the
    block (from ``start``, the first ``head`` of them its condition's, up to ``end``)."""

    test: Test
    statement: Node
    position: int
    start: int
    head: int
    end: int


def _single_test(statement: Node) -> Test | None:
    """The test of an ``if`` with one arm and no ``else`` (:mod:`.complements`)."""
    if statement.type != "if_statement" or not python_if(statement):
        return None
    arms, closed = if_arms(statement)
    return Test.of(arms[0][0]) if len(arms) == 1 and not closed else None


class _Walk(Generic[Event]):
    def __init__(
        self,
        source: bytes,
        events: Mapping[int, Sequence[Event]],
        weight: Callable[[Event], int],
        off: frozenset[str],
        caught: Callable[[Event], Event] | None = None,
        exits: Exits = EVERY_EXIT,
    ) -> None:
        self.exits = exits
        self.source = source
        self.events = events
        self.lines = sorted(events)
        self.weight = weight
        self.off = off
        self.caught = caught
        self.protected: list[tuple[int, int]] = []  # line spans of try bodies whose handler carries on
        self.root: Node | None = None  # the function's body, once the walk starts
        self._parameters: set[str] | None = None
        self._locals: set[str] | None = None
        self.claimed: set[int] = set()

    def heavier(self, left: Path | None, right: Path | None) -> Path | None:
        if left is None:
            return right
        if right is None:
            return left
        return right if sum(map(self.weight, right)) > sum(map(self.weight, left)) else left

    def has_events(self, node: Node) -> bool:
        low, high = first_line(node), last_line(node)
        return any(low <= line <= high and line not in self.claimed for line in self.lines)

    def leaf(self, node: Node) -> Path:
        low, high = first_line(node), last_line(node)
        found: list[Event] = []
        for line in self.lines:
            if low <= line <= high and line not in self.claimed:
                self.claimed.add(line)
                if self.caught is not None and any(start <= line <= end for start, end in self.protected):
                    found.extend(map(self.caught, self.events[line]))
                else:
                    found.extend(self.events[line])
        return tuple(found)

    def walk(self, node: Node) -> tuple[Path | None, Path | None]:
        """(heaviest path falling through, heaviest path ending inside) of one statement."""
        kind = node.type
        if kind in _EXITS:
            found = self.leaf(node)
            allowed = self.exits.allowed
            return None, (found if allowed is None or node.start_byte in allowed else None)
        if kind in _NESTED:
            return self.leaf(node), None
        if kind == "if_statement":
            return self.branch(node)
        if kind in _SWITCHES:
            return self.switch(node)
        if kind in _LOOPS:
            return self.loop(node)
        if kind == "try_statement":
            return self.attempt(node)
        if kind in _CONTAINERS:
            return self.sequence(node.named_children)
        if self.exits.raising and self.raises(node):
            found = self.leaf(node)  # a call in it always raises: the path ends here
            return None, (found if self.exits.allowed is None else None)
        if not self.has_events(node):
            return (), None
        return self.leaf(node), None

    def sequence(self, statements: Sequence[Node]) -> tuple[Path | None, Path | None]:
        through: Path | None = ()
        ended: Path | None = None
        tests: list[_Tested] = []  # earlier single-arm ifs of this block, by their test
        for position, statement in enumerate(statements):
            if statement.type in ("comment", "line_comment", "block_comment"):
                continue
            start, test = len(through), _single_test(statement)
            head = self._unclaimed(statement.child_by_field_name("condition")) if test is not None else 0
            passing, ending = self.walk(statement)
            earlier = next((seen for seen in tests if test is not None and test.negates(seen.test)), None)
            if earlier is not None and self._exclusive(earlier, statements[earlier.position + 1 : position]):
                # ``if x: A`` ... ``if not x: B``: A or B, never both.
                head_end = earlier.start + earlier.head
                without = through[: earlier.start] + through[earlier.start : head_end] + through[earlier.end :]
                tests.clear()  # the path may now be another one: earlier positions no longer hold
                if ending is not None:
                    ended = self.heavier(ended, without + ending)
                if passing is None:
                    return self._dead_after(statements, position), ended
                through = self.heavier(through + passing[:head], without + passing)
                continue
            if ending is not None:
                ended = self.heavier(ended, through + ending)
            if passing is None:
                return self._dead_after(statements, position), ended
            through = through + passing
            if test is not None:
                tests.append(_Tested(test, statement, position, start, head, len(through)))
        return through, ended

    def _exclusive(self, earlier: _Tested, between: Sequence[Node]) -> bool:
        """Whether the negated test of ``earlier``'s name, after the statements ``between``,
        reads the value ``earlier`` read (:mod:`.complements`)."""
        name = earlier.test.subject
        arm = earlier.statement.child_by_field_name("consequence")
        if self.root is None or arm is None or not untouched([arm, *between], name):
            return False
        if self._parameters is None:
            self._parameters = _parameter_names(self.root)
            self._locals = bound_names(self.root) | self._parameters
        if earlier.test.question == "truth" and (name in self._parameters or not _bool_valued(self.root, name)):
            return False  # a collection's truth may change through another name for it
        return local_of(self.root, name, self._locals or set())

    def _dead_after(self, statements: Sequence[Node], position: int) -> None:
        for dead in statements[position + 1 :]:
            self.leaf(dead)  # no path runs what follows: its events are on none

    def _unclaimed(self, node: Node | None) -> int:
        """How many events a walk of ``node`` would place: an ``if``'s condition's come first
        on its path."""
        if node is None:
            return 0
        low, high = first_line(node), last_line(node)
        return sum(len(self.events[line]) for line in self.lines if low <= line <= high and line not in self.claimed)

    def loop(self, node: Node) -> tuple[Path | None, Path | None]:
        """A loop's body counted once; the loop always has a passing path (it may run zero
        times or ``break``), whatever its body ends with. An ``else`` clause may run after it."""
        body = node.child_by_field_name("body")
        otherwise = [child for child in node.named_children if child.type == "else_clause"]
        heads = [child for child in node.named_children if child != body and child.type != "else_clause"]
        if body is not None and self.exits.raising:
            self.claim_after_raising(body)  # what follows a call that always raises runs in no iteration
        prefix: Path = sum((self.leaf(head) for head in heads), ())
        # What the loop binds takes another value in each iteration: a value known at the
        # function's end (``known_false``) or passed in says nothing of an earlier one.
        outer, self.off = self.off, _unbound(self.off, node)
        passing, ending = self.walk(body) if body is not None else ((), None)
        self.off = outer
        through: Path = prefix + (self.heavier(passing, ()) or ())
        ended = prefix + ending if ending is not None else None
        for clause in otherwise:
            after, finished = self.walk(clause)
            if finished is not None:
                ended = self.heavier(ended, through + finished)
            through = self.heavier(through + after if after is not None else None, through) or through
        return through, ended

    def raises(self, node: Node) -> bool:
        """Whether ``node`` is a simple statement holding a call that always raises, on a
        line no part of it that may go unevaluated (:data:`_SOMETIMES_EVALUATED`) spans:
        ``a or q.missing()`` raises only when ``a`` is false."""
        if node.type in _COMPOUND:
            return False
        lines = [line for line in self.exits.raising if first_line(node) <= line <= last_line(node)]
        if not lines:
            return False
        spans = _sometimes_evaluated_spans(node)
        return any(not any(start <= line <= end for start, end in spans) for line in lines)

    def claim_after_raising(self, node: Node) -> None:
        """Claim (as on no path) the statements that follow, in their block, a statement
        that always raises, anywhere inside ``node`` (nested functions aside)."""
        pending = [node]
        while pending:
            current = pending.pop()
            statements = [child for child in current.named_children if child.type not in ("comment", "line_comment", "block_comment")]
            raised = False
            for statement in statements:
                if raised:
                    self.leaf(statement)
                elif current.type in _CONTAINERS and self.raises(statement):
                    raised = True
                elif statement.type not in _NESTED:
                    pending.append(statement)

    def feasible(self, condition: Node | None) -> bool:
        if condition is None or not self.off:
            return True
        bound = _walrus_name(condition)
        if bound is not None and bound in self.off:
            return False  # ``if (x := f()):`` (or its first conjunct) with ``x`` known false
        text = self.source[condition.start_byte : condition.end_byte].decode("utf-8", "replace").strip("() \t")
        head = text.split(" and ", 1)[0].split("&&", 1)[0].strip("() \t")
        if EXISTING_ROW in self.off and _FRESH_ROW.fullmatch(head):
            return False
        if FRESH_ROW in self.off and _EXISTING.fullmatch(head):
            return False
        not_none = _NOT_NONE_TEST.fullmatch(head)
        if not_none is not None and none_marker(not_none.group(1)) in self.off:
            return False
        if any(UNCHANGED + " ".join(term.split()) in self.off for term in _conjuncts(text)):
            return False  # ``a and self.f != self.snapshot`` with the field unchanged (:mod:`.snapshots`)
        return head not in self.off

    def certain(self, condition: Node | None) -> bool:
        """Whether an arm's whole condition is true under ``off``: ``not x`` with ``x``
        false, ``x is None`` with ``x`` None (the arms after it cannot run)."""
        if condition is None or not self.off:
            return False
        text = self.source[condition.start_byte : condition.end_byte].decode("utf-8", "replace").strip()
        negated = _NEGATION.fullmatch(text)
        if negated is not None:
            return negated.group(1) in self.off
        none = _NONE_TEST.fullmatch(text)
        return none is not None and none_marker(none.group(1)) in self.off

    def branch(self, node: Node) -> tuple[Path | None, Path | None]:
        arms, closed = if_arms(node)
        conditions = tuple(self.leaf(condition) for condition, _ in arms if condition is not None)
        prefix: Path = sum(conditions, ())
        through: Path | None = None
        ended: Path | None = None
        settled = reached = False
        for condition, body in arms:
            passing, ending = self.walk(body)
            if settled or not self.feasible(condition):
                continue
            # An arm that always runs when reached: the arms after it cannot, nor can the
            # implicit fall-through; the feasible arms before it stay.
            settled = self.certain(condition)
            reached = True
            through = self.heavier(through, passing)
            ended = self.heavier(ended, ending)
        if not settled and not closed or not reached:
            through = self.heavier(through, ())
        if node.start_byte in self.exits.cut:
            through = None  # the caller's path leaves through an ending arm here
        return (prefix + through if through is not None else None), (prefix + ended if ended is not None else None)

    def switch(self, node: Node) -> tuple[Path | None, Path | None]:
        cases: list[Node] = []
        heads: list[Node] = []
        for child in node.named_children:
            if child.type in _CASE_CONTAINERS:
                cases.extend(child.named_children)
            elif child.type in _CONTAINERS:
                cases.append(child)
            else:
                heads.append(child)
        prefix: Path = sum((self.leaf(head) for head in heads), ())
        through: Path | None = ()
        ended: Path | None = None
        for case in cases:
            passing, ending = self.walk(case)
            through = self.heavier(through, passing)
            ended = self.heavier(ended, ending)
        return prefix + through, (prefix + ended if ended is not None else None)

    def attempt(self, node: Node) -> tuple[Path | None, Path | None]:
        body = [child for child in node.named_children if child.type not in _HANDLERS and child.type != "finally_clause"]
        handlers = [child for child in node.named_children if child.type in _HANDLERS]
        final = [child for child in node.named_children if child.type == "finally_clause"]
        protected = node.child_by_field_name("body")
        marking = self.caught is not None and protected is not None and self.has_events(protected)
        marking = marking and any(carries_on(handler, self.source) for handler in handlers)
        if marking:
            self.protected.append((first_line(protected), last_line(protected)))
        try:
            through, ended = self.sequence(body)
        finally:
            if marking:
                self.protected.pop()
        # A handler runs instead of the rest of the body, after the effect that failed
        # (which did not happen): its path is an alternative to the body's, not a
        # continuation of it (a failure record after a commit is not a second step).
        for handler in handlers:
            passing, ending = self.walk(handler)
            if passing is not None:
                through = self.heavier(through, passing)
            if ending is not None:
                ended = self.heavier(ended, ending)
        if final:
            passing, ending = self.sequence(final)
            if ending is not None:
                ended = self.heavier(ended, (through or ()) + ending)
            through = through + passing if through is not None and passing is not None else through
        return through, ended


def if_arms(node: Node) -> tuple[list[tuple[Node | None, Node]], bool]:
    """(condition, body) of every arm of an if-chain, and whether an else closes it."""
    arms: list[tuple[Node | None, Node]] = []
    current: Node | None = node
    while current is not None:
        consequence = current.child_by_field_name("consequence")
        if consequence is not None:
            arms.append((current.child_by_field_name("condition"), consequence))
        following: Node | None = None
        for alternative in current.children_by_field_name("alternative"):
            if alternative.type == "elif_clause":
                body = alternative.child_by_field_name("consequence")
                if body is not None:
                    arms.append((alternative.child_by_field_name("condition"), body))
            elif alternative.type == "if_statement":
                following = alternative
            elif alternative.type == "else_clause":
                body = alternative.child_by_field_name("body") or next(iter(alternative.named_children), None)
                if body is not None and body.type == "if_statement":
                    following = body
                elif body is not None:
                    arms.append((None, body))
            else:
                arms.append((None, alternative))
        current = following
    closed = bool(arms) and arms[-1][0] is None
    return arms, closed


def _walrus_name(condition: Node) -> str | None:
    """The name a condition binds and tests first: ``x := f()``, ``(x := f())``, the left
    conjunct of an ``and`` (the whole is false when it is)."""
    node = condition
    while True:
        operator = node.child_by_field_name("operator") if node.type == "boolean_operator" else None
        left = node.child_by_field_name("left") if operator is not None and operator.type == "and" else None
        if node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[0]
        elif left is not None:
            node = left
        else:
            break
    name = node.child_by_field_name("name") if node.type == "named_expression" else None
    return name.text.decode("utf-8", "replace") if name is not None and name.text is not None else None


def untaken_arms(body: Node, line: int) -> list[tuple[int, int]]:
    """The line ranges (``body``'s lines) of the if/elif/else arms a path through ``line``
    does not take: for every if statement with an arm holding ``line``, its other arms."""
    ranges: list[tuple[int, int]] = []
    node: Node | None = body
    while node is not None:
        inner = next((child for child in node.named_children if first_line(child) <= line <= last_line(child)), None)
        if node.type == "if_statement":
            arms = [arm for _, arm in if_arms(node)[0]]
            taken = next((position for position, arm in enumerate(arms) if first_line(arm) <= line <= last_line(arm)), None)
            if taken is not None:
                for position, arm in enumerate(arms):
                    # An arm before the taken one: its condition ran, its body did not. An
                    # elif or else after it: neither ran.
                    clause = arm.parent if position > taken and arm.parent is not None and arm.parent.type in _CLAUSES else arm
                    if position != taken:
                        ranges.append((first_line(clause), last_line(clause)))
        node = inner
    return ranges


def ending_arms(body: Node, first: int, last: int) -> list[tuple[int, int]]:
    """The line ranges (``body``'s lines) of if/elif/else arms wholly between ``first`` and
    ``last`` whose last statement returns or raises: a path from ``first`` on to ``last``
    never runs them (``if is_new is None: raise NotFound(...)`` between two commits). Arms
    inside a ``try`` or ``with`` statement are left out: an ``except`` or a context manager
    (``contextlib.suppress``) may catch the raise and carry on to the second commit."""
    ranges: list[tuple[int, int]] = []
    pending = [body]
    while pending:
        node = pending.pop()
        if last_line(node) < first or first_line(node) > last:
            continue
        if node.type == "if_statement" and first < first_line(node) and last_line(node) < last:
            for _, arm in if_arms(node)[0]:
                statements = [child for child in arm.named_children if child.type not in ("comment", "line_comment", "block_comment")]
                if statements and statements[-1].type in _EXITS:
                    ranges.append((first_line(arm), last_line(arm)))
        if node.type not in _NESTED and node.type not in ("try_statement", "with_statement"):
            pending.extend(node.named_children)  # inside a ``try`` or ``with`` a raise may be caught and carry on
    return ranges


def heaviest_path(
    body: Node | None,
    source: bytes,
    events: Mapping[int, Sequence[Event]],
    weight: Callable[[Event], int],
    off: frozenset[str] = frozenset(),
    caught: Callable[[Event], Event] | None = None,
    exits: Exits = EVERY_EXIT,
) -> tuple[Event, ...]:
    """The heaviest sequence of ``events`` (by line) along one feasible path of ``body``
    that ends as ``exits`` allows; every event in source order when ``body`` is None. An
    event in a ``try`` body whose handler carries on (:func:`carries_on`) is returned as
    ``caught(event)``."""
    if body is None:
        return tuple(event for line in sorted(events) for event in events[line])
    walk = _Walk(source, events, weight, _unbound(off, body) | exits.known_false, caught, exits)
    walk.root = body
    through, ended = walk.walk(body)
    best = walk.heavier(through if exits.falls_through else None, ended) or ()
    rest = [line for line in sorted(events) if line not in walk.claimed]
    return best + tuple(event for line in rest for event in events[line]) if rest else best


def falls_through(body: Node, source: bytes) -> bool:
    """Whether some path through ``body`` reaches its end (no ``return``/``raise`` ends it)."""
    through, _ = _Walk(source, {}, lambda _event: 1, frozenset()).walk(body)
    return through is not None


# Statements and expressions that bind the names in one of their fields (Python, Java, Go,
# JavaScript): the field's identifiers are bound again.
_BINDERS = {
    "assignment": "left", "augmented_assignment": "left", "for_statement": "left", "for_in_clause": "left",
    "named_expression": "name", "as_pattern_target": None, "assignment_expression": "left",
    "assignment_statement": "left", "short_var_declaration": "left", "for_in_statement": "left",
}  # fmt: skip


def _unbound(off: frozenset[str], body: Node) -> frozenset[str]:
    """``off`` less the parameters the body binds again (``x = ...``, ``a, x = ...``,
    ``x += ...``, ``for x in``, ``as x``, ``x := ...``; nested functions aside): their
    value at a test is not the one passed."""
    names = {name for name in off if not name.startswith("<")}
    if not names:
        return off
    rebound = bound_names(body) & names
    if not rebound:
        return off
    markers = {none_marker(name) for name in rebound}
    return frozenset(name for name in off if name not in rebound and name not in markers)


def bound_names(body: Node) -> set[str]:
    """The names ``body`` binds (nested functions aside), in any target position."""
    bound: set[str] = set()
    pending = [body]
    while pending:
        node = pending.pop()
        if node.type in _BINDERS:
            bound |= _bound_names_of(node)
        if node.type not in _NESTED or node is body:
            pending.extend(node.named_children)
    return bound


_BOOLEANS = frozenset({"true", "false", "none", "integer", "float", "string", "not_operator", "comparison_operator"})


def _bool_valued(body: Node, name: str) -> bool:
    """Whether every binding of ``name`` in ``body`` is a plain ``name = ...`` of a literal, a
    ``not`` or a comparison (an immutable value nothing else can change)."""
    pending = [body]
    while pending:
        node = pending.pop()
        if node.type in _BINDERS and name in _bound_names_of(node):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            simple = node.type == "assignment" and left is not None and left.type == "identifier"
            if not simple or right is None or right.type not in _BOOLEANS:
                return False
        pending.extend(node.named_children)
    return True


def _bound_names_of(binder: Node) -> set[str]:
    """The names one binding node (an assignment, a ``for``, an ``as``...) binds."""
    field = _BINDERS.get(binder.type)
    target = binder.child_by_field_name(field) if field is not None else binder
    names: set[str] = set()
    targets = [target] if target is not None else []
    while targets:
        part = targets.pop()
        if part.type == "identifier" and part.text is not None:
            names.add(part.text.decode("utf-8", "replace"))
        elif part.type not in ("attribute", "subscript", "field_expression", "member_expression", "field_access"):
            targets.extend(part.named_children)
    return names


def _parameter_names(body: Node) -> set[str]:
    """The parameter names of the Python function whose body is ``body``."""
    function = body.parent
    parameters = function.child_by_field_name("parameters") if function is not None else None
    names: set[str] = set()
    for parameter in parameters.named_children if parameters is not None else ():
        name = parameter if parameter.type == "identifier" else parameter.child_by_field_name("name")
        if name is None:
            name = next((child for child in parameter.named_children if child.type == "identifier"), None)
        if name is not None and name.type == "identifier" and name.text is not None:
            names.add(name.text.decode("utf-8", "replace"))
    return names
