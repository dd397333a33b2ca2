"""Memoized helpers: a function that returns early once an attribute of one of its
parameters (or of ``self``) is set, and sets that attribute on the path that writes, writes
at most once per object. On one path, repeated calls with the same object expression count
its writes once (the first call's).

A memo guard is one of these, at the top level of a Python function's body:

- an early return: ``if hasattr(o, "_x"): return ...`` (or ``getattr(o, "_x", None) is not
  None``, ``"_x" in o.__dict__``, ``"_x" in vars(o)``, ``o._x is not None``) with every
  counted effect after it, ``o._x`` set before every later ``return`` and before the
  function falls off its end;
- a guarded block: ``if not hasattr(o, "_x"): ... o._x = ...`` (or the negated forms above)
  holding every counted effect and setting ``o._x`` at its top level, with no ``return``
  before that;
- ``functools.lru_cache``/``functools.cache``: the whole call (receiver and arguments) is the key.

A call's key is the object expression the caller passes for ``o`` (its receiver for
``self``) with the attribute: a dotted name whose root the caller never binds again, whose
attribute it never resets (``o._x = None``, ``del o._x``), and that the project never
clears (``del o._x``, ``delattr``, ``o.__dict__.pop("_x")``, ``vars(o).pop``, ``del
o.__dict__["_x"]``) and sets only in an ``__init__`` or, to something other than ``None``,
in a function guarded by a memo test of that attribute: a reset anywhere else, such as a
method the caller reaches between two calls (``self.rollover()`` setting ``self._x =
None``), may make the second call write again. A function
whose counted writes all come from calls keyed on one of its own parameters is keyed the
same way at its own call sites (``export_permissions(user)`` calling ``check_permissions(user,
...)`` three times). Conservative: a different object, a guard that tests another
attribute than the one set, a key built from a call keep every write.

Inputs: the call graph, the per-file facts and call arguments (:mod:`.arguments`).
Outputs: :meth:`Memos.key` (a step's key) and :func:`once_per_key`.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.grading import Step
from auditor.index.model import CallSite

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_CACHES = frozenset({"lru_cache", "cache", "functools.lru_cache", "functools.cache"})
_WHOLE_CALL = "<call>"
"""A guard's attribute for a function cached on its whole call (``lru_cache``)."""


@dataclass(frozen=True)
class MemoGuard:
    """What a memoized function is keyed on: ``holder`` (a parameter's name, ``self``) and
    the ``attribute`` set on it; :data:`_WHOLE_CALL` for a cache on the whole call."""

    holder: str
    attribute: str


def once_per_key(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """``steps`` less every step whose memo key an earlier step on the path has: the
    memoized helper wrote on that first call and returns its cached result after."""
    seen: set[str] = set()
    kept: list[Step] = []
    for step in steps:
        if step.memo is not None:
            if step.memo in seen:
                continue
            seen.add(step.memo)
        kept.append(step)
    return tuple(kept) if len(kept) < len(steps) else steps


class Memos:
    """Memo guards read once per function and path, keys per call."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], arguments: Arguments) -> None:
        self.graph = graph
        self.facts = facts
        self.arguments = arguments
        self._guards: dict[tuple[FunctionRef, frozenset[int]], MemoGuard | None] = {}
        self._trees: dict[FunctionRef, tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None] = {}
        self._reset: dict[str, bool] = {}

    def key(self, edge: Edge, call: CallSite | None, steps: tuple[Step, ...]) -> str | None:
        """The memo key of the call behind ``edge`` whose callee's path is ``steps``: the
        object expression with the attribute its guard sets, or the key every effect of
        the callee's path shares, seen from the caller; None when the call may write again."""
        effectful = [step for step in steps if step.effects]
        if call is None or not effectful or edge.callee.path not in self.facts:
            return None
        guard = self.guard(edge.callee, frozenset(step.line for step in effectful))
        if guard is not None:
            if guard.attribute == _WHOLE_CALL:
                return self._whole_call(edge, call)
            holder, attribute = guard.holder, guard.attribute
        else:
            keys = {step.memo for step in effectful}
            if len(keys) != 1 or None in keys:
                return None
            inner = next(iter(keys))
            if inner is None or not _DOTTED.fullmatch(inner):
                return None  # a whole call's key: its arguments are the callee's names
            holder, _, attribute = inner.partition(".")
            if not attribute or not self._unbound_in(edge.callee, holder):
                return None
        expression = self._passed_for(edge, call, holder)
        if expression is None:
            return None
        if self._reset_anywhere(attribute.rsplit(".", 1)[-1]):
            return None
        key = f"{expression}.{attribute}"
        return key if self._stable_in(edge.caller, expression, key) else None

    def guard(self, ref: FunctionRef, lines: frozenset[int]) -> MemoGuard | None:
        """The memo guard of ``ref`` that every effect on ``lines`` sits behind, or None."""
        cache_key = (ref, lines)
        if cache_key not in self._guards:
            self._guards[cache_key] = self._find_guard(ref, lines)
        return self._guards[cache_key]

    def _find_guard(self, ref: FunctionRef, lines: frozenset[int]) -> MemoGuard | None:
        parsed = self._tree(ref)
        if parsed is None:
            return None
        function, offset = parsed
        parameters = [argument.arg for argument in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
        if any(_decorator_name(decorator) in _CACHES for decorator in function.decorator_list):
            return MemoGuard("", _WHOLE_CALL)
        absolute = {line - offset for line in lines}
        for position, statement in enumerate(function.body):
            if not isinstance(statement, ast.If) or statement.orelse:
                continue
            tested = _memo_test(statement.test)
            if tested is None:
                continue
            holder, attribute, already_set = tested
            if holder not in parameters:
                continue
            if already_set and _only_returns(statement.body) and all(line > _end(statement) for line in absolute):
                if _sets_before_leaving(function.body[position + 1 :], holder, attribute):
                    return MemoGuard(holder, attribute)
            elif not already_set and all(statement.lineno <= line <= _end(statement) for line in absolute):
                if _sets_before_leaving(statement.body, holder, attribute):
                    return MemoGuard(holder, attribute)
        return None

    def tree(self, ref: FunctionRef) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
        """A Python function's syntax tree parsed on its own (dedented), and the lines before
        it; None for another language, a function that does not parse or is none. Parsed
        once per function; the tree is shared (:class:`.StoredFlags` reads it too), never
        changed."""
        return self._tree(ref)

    def _tree(self, ref: FunctionRef) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
        """The function's syntax tree parsed on its own, and the lines before it."""
        if ref in self._trees:
            return self._trees[ref]
        found = None
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is not None and definition is not None and facts.index.language == "python":
            text = textwrap.dedent("\n".join(facts.lines[definition.start_line - 1 : definition.end_line]))
            try:
                module = ast.parse(text)
            except SyntaxError:
                module = None
            function = module.body[0] if module is not None and module.body else None
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found = (function, definition.start_line - 1)
        self._trees[ref] = found
        return found

    def _passed_for(self, edge: Edge, call: CallSite, holder: str) -> str | None:
        """The dotted expression the call passes for the callee's ``holder`` (its receiver
        for ``self``), or None when it is no plain dotted name or cannot be told."""
        definition = self.graph.definition(edge.callee)
        if definition is None:
            return None
        if holder in SELF_RECEIVERS and definition.parent is not None:
            if definition.name == "__init__" or "." not in call.callee:
                return None  # a new object each call, or a bare name
            receiver = call.callee.rsplit(".", 1)[0]
            facts = self.facts.get(edge.caller.path)
            written = facts.line_text(call.line) if facts is not None else ""
            # The call text drops chained arguments (``get(x).m`` reads ``get.m``): the
            # receiver must be written as it is.
            if not re.search(rf"(?<![\w.]){re.escape(receiver)}\s*\.\s*{re.escape(call.name)}\s*\(", written):
                return None
            return receiver if _DOTTED.fullmatch(receiver) else None
        passed = self.arguments.passed(call.arguments)
        if passed is None:
            return None
        keywords, positional = passed
        value = keywords.get(holder)
        if value is None:
            names = [name for name, _ in self.arguments.parameters(edge.callee)][: self.arguments.positional(edge.callee)]
            values = [argument.strip() for argument in split_arguments(call.arguments) if argument.strip()][:positional]
            if holder in names and names.index(holder) < len(values):
                value = values[names.index(holder)]
        return value if value is not None and _DOTTED.fullmatch(value) else None

    def _whole_call(self, edge: Edge, call: CallSite) -> str | None:
        """A cached function's key: the callee and its argument text, when every argument
        is a constant or a dotted name the caller does not bind again."""
        arguments = [argument.strip() for argument in split_arguments(call.arguments) if argument.strip()]
        names = []
        for argument in arguments:
            value = argument.partition("=")[2].strip() if re.match(r"^[A-Za-z_]\w*\s*=[^=]", argument) else argument
            if _DOTTED.fullmatch(value):
                names.append(value)
            elif not re.fullmatch(r"-?\d+|'[^']*'|\"[^\"]*\"|True|False|None", value):
                return None
        key = f"{edge.callee.qualname}({', '.join(arguments)})"
        return key if all(self._stable_in(edge.caller, name, None) for name in names) else None

    def _unbound_in(self, ref: FunctionRef, name: str) -> bool:
        """Whether ``name`` is a parameter (or ``self``) that ``ref``'s body never binds again."""
        parsed = self._tree(ref)
        if parsed is None:
            return False
        function, _ = parsed
        parameters = {argument.arg for argument in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
        return name in parameters and self._stable_in(ref, name, None)

    def _stable_in(self, ref: FunctionRef, expression: str, key: str | None) -> bool:
        """Whether ``ref``'s body never binds the root name of ``expression`` again, never
        replaces the object it names (``self.owner = ...`` for ``self.owner``) and never
        resets the attribute ``key`` names (``del o._x``, ``o._x = None``)."""
        parsed = self._tree(ref)
        if parsed is None:
            return False
        function, _ = parsed
        parts = expression.split(".")
        root = parts[0]
        prefixes = {".".join(parts[:end]) for end in range(2, len(parts) + 1)}  # ``self.owner`` of ``self.owner.user``
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id == root and isinstance(node.ctx, (ast.Store, ast.Del)):
                return False
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and ast.unparse(node) in prefixes:
                return False  # the object itself replaced: a later call is on another one
            if key is None:
                continue
            if isinstance(node, ast.Delete) and any(ast.unparse(target) == key for target in node.targets):
                return False
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None:
                if any(ast.unparse(target) == key for target in node.targets):
                    return False
        return True

    def _reset_anywhere(self, attribute: str) -> bool:
        """Whether any file clears ``attribute`` of an object (``del o._x``, ``delattr``,
        ``o.__dict__.pop("_x")``, ``vars(o).pop``, ``del o.__dict__["_x"]``) or sets it
        where it may reset a memo: outside an ``__init__`` and outside a function whose
        top level tests it with a memo test, or to ``None``."""
        if attribute not in self._reset:
            self._reset[attribute] = self._find_reset(attribute)
        return self._reset[attribute]

    def _find_reset(self, attribute: str) -> bool:
        name = re.escape(attribute)
        keyed = rf"(?:__dict__|vars\([^)]*\))\s*\[\s*['\"]{name}['\"]\s*\]"
        sets = re.compile(rf"\.{name}\s*(?::[^=\n]*)?(?:[-+*/|&%@^]?=)(?!=)|{keyed}\s*=(?!=)|\bsetattr\([^)]*['\"]{name}['\"]")
        clears = re.compile(
            rf"\bdel\s+[\w.]+\.{name}\b|\bdelattr\([^)]*['\"]{name}['\"]|\bdel\s+[\w.()]*{keyed}"
            rf"|(?:__dict__|vars\([^)]*\))\s*\.\s*pop\(\s*['\"]{name}['\"]"
        )
        for path, facts in self.facts.items():
            if attribute not in facts.text:
                continue
            if clears.search(facts.text):
                return True
            for match in sets.finditer(facts.text):
                line = facts.text.count("\n", 0, match.start()) + 1
                definition = facts.index.enclosing_definition(line)
                if definition is None:
                    return True
                if definition.name == "__init__":
                    continue
                if re.search(r"=\s*None\s*(?:#.*)?$|,\s*None\s*\)", facts.line_text(line)) or not self._tests(FunctionRef(path, definition.qualname), attribute):
                    return True
        return False

    def _tests(self, ref: FunctionRef, attribute: str) -> bool:
        """Whether ``ref``'s top level holds a memo test of ``attribute`` (``if hasattr(o, "_x")``)."""
        parsed = self._tree(ref)
        if parsed is None:
            return False
        for statement in parsed[0].body:
            tested = _memo_test(statement.test) if isinstance(statement, ast.If) else None
            if tested is not None and tested[1] == attribute:
                return True
        return False

def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target)


def _end(node: ast.stmt) -> int:
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _memo_test(test: ast.expr) -> tuple[str, str, bool] | None:
    """(holder, attribute, whether the test is true once it is set) of a memo check."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _memo_test(test.operand)
        return (inner[0], inner[1], not inner[2]) if inner is not None else None
    if isinstance(test, ast.Call) and _call_of(test, "hasattr", 2):
        holder, attribute = test.args
        if isinstance(holder, ast.Name) and isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
            return holder.id, attribute.value, True
        return None
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, operator, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(operator, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
        set_when = isinstance(operator, ast.IsNot)
        if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name):
            return left.value.id, left.attr, set_when
        if isinstance(left, ast.Call) and _call_of(left, "getattr", 3):
            holder, attribute, default = left.args
            if (
                isinstance(holder, ast.Name) and isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
                and isinstance(default, ast.Constant) and default.value is None
            ):  # fmt: skip
                return holder.id, attribute.value, set_when
        return None
    if isinstance(operator, (ast.In, ast.NotIn)) and isinstance(left, ast.Constant) and isinstance(left.value, str):
        holder = None
        if isinstance(right, ast.Attribute) and right.attr == "__dict__" and isinstance(right.value, ast.Name):
            holder = right.value.id
        elif isinstance(right, ast.Call) and _call_of(right, "vars", 1) and isinstance(right.args[0], ast.Name):
            holder = right.args[0].id
        return (holder, left.value, isinstance(operator, ast.In)) if holder is not None else None
    return None


def _call_of(node: ast.Call, name: str, arity: int) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == name and len(node.args) == arity and not node.keywords


def _only_returns(body: Sequence[ast.stmt]) -> bool:
    """Whether a guard's arm only returns (the cached value)."""
    return len(body) == 1 and isinstance(body[0], ast.Return)


def _sets(statement: ast.stmt, holder: str, attribute: str) -> bool:
    """Whether a statement sets ``holder.attribute`` (assignment, ``setattr``, ``__dict__[...]``)."""
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)) and getattr(statement, "value", None) is not None:
        targets = [statement.target]
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and _call_of(statement.value, "setattr", 3):
        holder_node, name, _ = statement.value.args
        return isinstance(holder_node, ast.Name) and holder_node.id == holder and isinstance(name, ast.Constant) and name.value == attribute
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            if target.value.id == holder and target.attr == attribute:
                return True
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) and target.value.attr == "__dict__":
            owner, key = target.value.value, target.slice
            if isinstance(owner, ast.Name) and owner.id == holder and isinstance(key, ast.Constant) and key.value == attribute:
                return True
    return False


def _sets_before_leaving(body: Sequence[ast.stmt], holder: str, attribute: str) -> bool:
    """Whether every ``return`` in ``body`` comes after ``holder.attribute`` is set (in its
    block or an enclosing one) and the body sets it at its top level before it ends."""
    done = _walk_block(body, holder, attribute, False)
    if done is None:
        return False
    return done or (bool(body) and isinstance(body[-1], (ast.Return, ast.Raise)))


def _walk_block(body: Sequence[ast.stmt], holder: str, attribute: str, done: bool) -> bool | None:
    """Whether the attribute is set after ``body`` (None: a ``return`` comes before it is)."""
    for statement in body:
        if _sets(statement, holder, attribute):
            done = True
        elif isinstance(statement, ast.Return):
            if not done:
                return None
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        else:
            blocks = [getattr(statement, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(statement, name, None), list)]
            blocks += [handler.body for handler in getattr(statement, "handlers", [])]
            blocks += [case.body for case in getattr(statement, "cases", [])]
            after_blocks = done
            for block in blocks:
                inner = _walk_block(block, holder, attribute, done)
                if inner is None:
                    return None
                if isinstance(statement, (ast.With, ast.AsyncWith)):
                    after_blocks = inner
            done = after_blocks
    return done
