"""Flags stored from an argument: a method that stores a parameter the call passes a false
constant into an attribute of ``self`` (``self.save = save`` under ``update(x,
save=False)``), at the top level of its body, makes ``self.save`` known false in the
methods it then calls on ``self``: their ``if not self.save: return`` arms run, their
``if self.save:`` arms do not. The store may sit in a method it calls first, on ``self``,
at its top level (``self.reset(save=save)``, which stores ``self.save = save``).

Kept narrow so it stays sound: the attribute is assigned at exactly one place in the whole
project (``.save = ...``, ``setattr``, ``__dict__["save"] = ...``) and no class the
object may be an instance of stores on ``self`` by a computed name (:mod:`.dynamic_stores`),
so only the storing method can set it again; the parameter is bound nowhere above the store
(``save = save or force``); the function names ``self.save`` nowhere above the store, and
calls the storing method once. A
function that stores the attribute itself or calls the storing method on ``self`` forgets
what its caller knew (:meth:`StoredFlags.kept`); a call further down that stores it again
is not followed.

Inputs: the call graph, the per-file facts, reachability (the calls behind edges) and call
arguments (:mod:`.arguments`). Outputs: :meth:`StoredFlags.kept` and :meth:`StoredFlags.known`, each ``self.<attribute>``
known false (with its :func:`~.paths.none_marker` when passed ``None``) and the line from
which it holds.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.dynamic_stores import DynamicStores
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.paths import none_marker
from auditor.analysis.transactions.reach import Reach
from auditor.index.model import CallSite

Known = Mapping[str, int]
"""``self.<attribute>`` names (and their None markers) known false, each with the line of
the statement after which it holds."""

_SELF_PREFIX = "self."


def self_names(off: frozenset[str]) -> frozenset[str]:
    """The ``self.<attribute>`` names (and their None markers) in ``off``: what a call on
    the same ``self`` still knows."""
    return frozenset(name for name in off if name.startswith(_SELF_PREFIX) or name.startswith("<" + _SELF_PREFIX))


class StoredFlags:
    """What each method stores on ``self`` from its parameters, read once per method."""

    def __init__(
        self, graph: CallGraph, facts: Mapping[str, FileFacts], reach: Reach, arguments: Arguments,
        trees: Callable[[FunctionRef], tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None] | None = None,
    ) -> None:
        """``trees``: a function's syntax tree and the lines above it, parsed once by the
        caller (:meth:`.Memos.tree`); by default each method is parsed here."""
        self.graph = graph
        self._trees = trees
        self.facts = facts
        self.reach = reach
        self.arguments = arguments
        self._stores: dict[FunctionRef, tuple[tuple[str, str, int], ...]] = {}
        self._unique: dict[str, bool] = {}
        self._rebound: dict[FunctionRef, Mapping[str, int]] = {}
        self.dynamic = DynamicStores(graph, facts)

    def known(self, ref: FunctionRef, off: frozenset[str]) -> Known:
        """The ``self`` attributes known false in ``ref`` after its top-level statements
        store a false parameter into them (directly, or through one call on ``self``)."""
        names = {name for name in off if not name.startswith("<")}
        found: dict[str, int] = {}
        if names:
            for attribute, parameter, line in self.stores(ref):
                if parameter in names:
                    self._add(found, ref, attribute, none_marker(parameter) in off, line)
        for edge in self.reach.callees(ref):
            call = self.reach.call_for(edge)
            if call is None or edge.approximate or call.callee.split(".", 1)[0] not in SELF_RECEIVERS or call.callee.count(".") != 1:
                continue
            stores = self.stores(edge.callee)
            if not stores or not self._top_level_call(ref, edge.line):
                continue
            rebound = self.rebound(ref)
            passed = frozenset(name for name in off if rebound.get(name.removeprefix("<").split(" ", 1)[0], edge.line) >= edge.line)
            inner = self.arguments.off(edge.callee, call, passed, ref)
            for attribute, parameter, _ in stores:
                if parameter in inner and sum(1 for other in self.reach.callees(ref) if other.callee == edge.callee) == 1:
                    self._add(found, ref, attribute, none_marker(parameter) in inner, edge.line)
        return found

    def inner_off(self, edge: Edge, call: CallSite | None, off: frozenset[str], stored: Known | None) -> frozenset[str]:
        """What is false in ``edge.callee`` on this call: its parameters (:meth:`Arguments.off`)
        and, for a call on the same ``self``, the ``self`` attributes the caller knows false
        there (those it was given, those it stored above the call)."""
        known = self_names(off) | {name for name, line in (stored or {}).items() if line < edge.line}
        inner_off = self.arguments.off(edge.callee, call, off | known, edge.caller)
        if known and call is not None and call.callee.split(".", 1)[0] == "self" and call.callee.count(".") == 1:
            inner_off |= known
        return inner_off

    def kept(self, ref: FunctionRef, off: frozenset[str]) -> frozenset[str]:
        """``off`` less the ``self`` attributes ``ref`` may store again (it assigns them, or
        calls a method on ``self`` that does): :meth:`known` says which it stores false."""
        inherited = {name for name in self_names(off) if not name.startswith("<")}
        if not inherited:
            return off
        attributes = {attribute for attribute, _, _ in self.stores(ref)}
        for edge in self.reach.callees(ref):
            attributes.update(attribute for attribute, _, _ in self.stores(edge.callee))
        dropped = {_SELF_PREFIX + attribute for attribute in attributes} & inherited
        return off - dropped - {none_marker(name) for name in dropped} if dropped else off

    def _add(self, found: dict[str, int], ref: FunctionRef, attribute: str, none: bool, line: int) -> None:
        """Record ``self.attribute`` as known after ``line`` when nothing can undo it."""
        name = _SELF_PREFIX + attribute
        definition = self.graph.definition(ref)
        if definition is None or definition.parent is None or self.dynamic.reach(FunctionRef(ref.path, definition.parent)):
            return
        if not self._assigned_once(attribute) or self._named_before(ref, name, line):
            return
        found[name] = line
        if none:
            found[none_marker(name)] = line

    def stores(self, ref: FunctionRef) -> tuple[tuple[str, str, int], ...]:
        """(attribute, parameter, line) of each ``self.attribute = parameter`` at the top
        level of a method's body."""
        found = self._stores.get(ref)
        if found is None:
            found = self._stores[ref] = self._read_stores(ref)
        return found

    def rebound(self, ref: FunctionRef) -> Mapping[str, int]:
        """The first line on which ``ref``'s body binds each name (assignment, augmented
        assignment, walrus, ``for``/``with``/``except`` target, ``del``)."""
        found = self._rebound.get(ref)
        if found is None:
            parsed = self._parsed(ref)
            found = self._rebound[ref] = _bound_lines(parsed[0], parsed[1]) if parsed is not None else {}
        return found

    def _parsed(self, ref: FunctionRef) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
        """A Python method parsed on its own, and the lines above it."""
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is None or definition is None or definition.parent is None or facts.index.language != "python":
            return None
        if self._trees is not None:
            shared = self._trees(ref)
            return shared if shared is not None and shared[0].args.args else None
        lines = facts.lines[definition.start_line - 1 : definition.end_line]
        try:
            module = ast.parse(textwrap.dedent("\n".join(lines)))
        except SyntaxError:
            return None
        function = module.body[0] if module.body else None
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not function.args.args:
            return None
        return function, definition.start_line - 1

    def _read_stores(self, ref: FunctionRef) -> tuple[tuple[str, str, int], ...]:
        parsed = self._parsed(ref)
        if parsed is None:
            return ()
        function, offset = parsed
        receiver = function.args.args[0].arg
        parameters = {argument.arg for argument in (*function.args.args[1:], *function.args.kwonlyargs)}
        found = []
        for statement in function.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.value, ast.Name):
                target, value = statement.targets[0], statement.value.id
                line = statement.lineno + offset
                if (
                    isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == receiver
                    and value in parameters and self._rebound_in(ref, function, offset).get(value, line) >= line
                ):  # fmt: skip
                    found.append((target.attr, value, line))
        return tuple(found)

    def _rebound_in(self, ref: FunctionRef, function: ast.FunctionDef | ast.AsyncFunctionDef, offset: int) -> Mapping[str, int]:
        """:meth:`rebound` from the parse at hand (walked only for a method that stores a
        parameter on ``self``: most store none)."""
        found = self._rebound.get(ref)
        if found is None:
            found = self._rebound[ref] = _bound_lines(function, offset)
        return found

    def _top_level_call(self, ref: FunctionRef, line: int) -> bool:
        """Whether the statement on ``line`` sits at the top level of ``ref``'s body."""
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is None or definition is None or not definition.body_start_line <= line <= definition.end_line:
            return False
        body = [text for text in facts.lines[definition.body_start_line - 1 : definition.end_line] if text.strip()]
        top = len(body[0]) - len(body[0].lstrip()) if body else -1
        text = facts.line_text(line)
        return len(text) - len(text.lstrip()) == top and text.lstrip().startswith(_SELF_PREFIX)

    def _named_before(self, ref: FunctionRef, name: str, line: int) -> bool:
        """Whether ``ref`` mentions ``name`` above ``line`` (a test there reads the old value)."""
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is None or definition is None:
            return True
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        return any(pattern.search(facts.line_text(number)) for number in range(definition.body_start_line, line))

    def _assigned_once(self, attribute: str) -> bool:
        """Whether the project assigns ``attribute`` of any object at one place only."""
        if attribute not in self._unique:
            name = re.escape(attribute)
            assigned = re.compile(
                rf"\.{name}\s*(?::[^=\n]*)?(?:[-+*/|&%@^]?=)(?!=)|(?:__dict__|vars\([^)]*\))\s*\[\s*['\"]{name}['\"]\s*\]\s*=(?!=)|"
                rf"\b(?:set|del)attr\([^)]*['\"]{name}['\"]|\bdel\s+[\w.]+\.{name}\b")
            count = sum(len(assigned.findall(facts.text)) for facts in self.facts.values() if attribute in facts.text)
            self._unique[attribute] = count == 1
        return self._unique[attribute]


def _bound_lines(function: ast.FunctionDef | ast.AsyncFunctionDef, offset: int) -> dict[str, int]:
    """The first line (``offset`` added) on which ``function``'s body binds each name."""
    found: dict[str, int] = {}
    for node in ast.walk(function):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            name = node.id
        elif isinstance(node, ast.ExceptHandler) or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function):
            name = node.name
        if name is not None:
            found[name] = min(found.get(name, node.lineno + offset), node.lineno + offset)
    return found
