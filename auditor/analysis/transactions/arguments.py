"""Call arguments against callee parameters: which of a callee's parameters are false on
one call (a false constant passed by keyword or by position, a false parameter of the
caller passed on, or a false default left in place), so a path can skip the arms those
parameters guard.

Inputs: a call site, its callee's signature (read from the text) and the caller's false
parameters. Output: :meth:`Arguments.off`, a frozenset of parameter names, with
:func:`~.paths.none_marker` of each one known to be ``None`` (so ``if x is None:`` is known true).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.languages import traits
from auditor.analysis.transactions.paths import none_marker
from auditor.analysis.transactions.scanning import IDENTIFIER, closing_bracket
from auditor.analysis.transactions.throwaway import in_memory_locals, memory_marker, memory_names, unbound_names
from auditor.index.model import CallSite

Parameters = tuple[tuple[str, str | None], ...]
"""A function's parameters as (name, default text or None), in order."""

_MAYBE_FALSE = re.compile(r"""=\s*(?:False\b|None\b|0\b|false\b|nil\b|""|'')""")
_FALSE_DEFAULT = re.compile(r"^(?:False|None|0)$")
_FALSE_KEYWORD = re.compile(r"""^([A-Za-z_]\w*)\s*=\s*(False|None|0|false|nil|""|'')$""")
_FALSE_LITERAL = re.compile(r"""^(?:False|None|0|""|'')$""")
_POSITIONAL_FALSE = re.compile(r"""(?:^|,)\s*(?:False|None|0|""|'')\s*(?:,|$)""")
_NONE = frozenset({"None", "nil"})
_SIGNATURE_LINES = 30


class Arguments:
    """What calls pass their callees, read once per call text and per signature."""

    def __init__(
        self, graph: CallGraph, facts: Mapping[str, FileFacts], none_tested: Callable[[FunctionRef], frozenset[str]] | None = None
    ) -> None:
        self.graph = graph
        self.facts = facts
        self.none_tested = none_tested
        """The parameters of a function the framework tests against ``None`` for it (a
        serializer built with one as its instance: :mod:`.serializer_edges`)."""
        self._offs: dict[tuple[FunctionRef, CallSite | None, frozenset[str]], frozenset[str]] = {}
        self._signatures: dict[FunctionRef, Parameters] = {}
        self._positionals: dict[FunctionRef, int] = {}
        self._variadic: dict[FunctionRef, tuple[bool, bool]] = {}
        self._passed: dict[str, tuple[dict[str, str], int] | None] = {}
        self._memories: dict[FunctionRef, frozenset[str]] = {}

    def off(
        self, callee: FunctionRef, call: CallSite | None, caller_off: frozenset[str] = frozenset(), caller: FunctionRef | None = None
    ) -> frozenset[str]:
        """The callee's parameters that are false on this call: passed a false constant,
        passed a parameter of the caller that is itself false (``save=save``), or omitted
        where the parameter's default is false (``def f(order, save=False)`` called as
        ``f(order)``); with the marker of each passed an in-memory database connection
        (:mod:`.throwaway`: a local of ``caller`` or a marked parameter of it). Kept per
        callee, call, caller's false parameters and caller (asked again for every path
        through the caller and by the reachability search)."""
        key = (callee, call, caller_off, caller)
        found = self._offs.get(key)
        if found is None:
            found = self._offs[key] = self._compute_off(callee, call, caller_off, caller) | self._in_memory(callee, call, caller_off, caller)
        return found

    def _in_memory(self, callee: FunctionRef, call: CallSite | None, caller_off: frozenset[str], caller: FunctionRef | None) -> frozenset[str]:
        """Markers of the callee's parameters passed an in-memory connection by name."""
        if call is None:
            return frozenset()
        marked = memory_names(caller_off)
        if marked and caller is not None:
            facts, definition = self.facts.get(caller.path), self.graph.definition(caller)
            lines = facts.lines[definition.body_start_line - 1 : definition.end_line] if facts is not None and definition is not None else ()
            marked = unbound_names(marked, lines)
        memory = marked | (self.memory_locals(caller) if caller is not None else frozenset())
        if not memory:
            return frozenset()
        passed = self.passed(call.arguments)
        if passed is None:
            return frozenset()
        keywords, positional = passed
        found = {memory_marker(name) for name, value in keywords.items() if value in memory}
        values = [argument.strip() for argument in split_arguments(call.arguments) if argument.strip()][:positional]
        if not self._through_class(callee, call):
            reachable = self.parameters(callee)[: self.positional(callee)]
            found |= {memory_marker(name) for (name, _), value in zip(reachable, values) if value in memory}
        return frozenset(found)

    def memory_locals(self, ref: FunctionRef) -> frozenset[str]:
        """The function's locals bound to an in-memory database connection (once per function)."""
        found = self._memories.get(ref)
        if found is None:
            facts = self.facts.get(ref.path)
            definition = self.graph.definition(ref)
            found = frozenset()
            if facts is not None and definition is not None and ":memory:" in facts.text:
                body = definition.body_start_line - 1
                found = in_memory_locals(facts.lines[definition.start_line - 1 : body], facts.lines[body : definition.end_line])
            self._memories[ref] = found
        return found

    def passed(self, arguments: str) -> tuple[dict[str, str], int] | None:
        """A call's keyword arguments (name to value text) and its number of positional
        ones, or None when it unpacks ``*args``/``**kwargs``; kept per argument text (the
        same call is asked about for every callee and caller's false parameters)."""
        if arguments in self._passed:
            return self._passed[arguments]
        split = split_arguments(arguments)
        found: tuple[dict[str, str], int] | None = None
        if not any(argument.startswith("*") for argument in split):
            keywords: dict[str, str] = {}
            positional = 0
            for argument in split:
                name, equals, value = argument.partition("=")
                if equals and IDENTIFIER.fullmatch(name.strip()) and not value.startswith("="):
                    keywords[name.strip()] = value.strip()
                elif argument.strip():
                    positional += 1
            found = (keywords, positional)
        self._passed[arguments] = found
        return found

    def parameters(self, ref: FunctionRef) -> Parameters:
        """A function's parameters after ``self``/``cls`` as (name, default text or
        None), in order; keyword-only parameters follow the positional ones. Empty for a
        language whose signatures are not read."""
        found = self._signatures.get(ref)
        if found is not None:
            return found
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        parameters: list[tuple[str, str | None]] = []
        positional: int | None = None  # how many precede ``*``/``*args`` (keyword-only after)
        star_args = star_kwargs = False
        read = False
        if facts is not None and definition is not None and traits(facts.index.language).signature_defaults:
            last = min(definition.end_line, definition.start_line + _SIGNATURE_LINES)
            text = "\n".join(facts.lines[definition.start_line - 1 : last])
            start = text.find("def " + definition.name)
            opening = text.find("(", start) if start >= 0 else -1
            closing = closing_bracket(text, opening) if opening >= 0 else None
            if closing is not None:
                read = True
                for parameter in split_arguments(text[opening + 1 : closing]):
                    name, _, default = parameter.partition("=")
                    name = name.split(":", 1)[0].strip()
                    star_args = star_args or (name.startswith("*") and not name.startswith("**") and name != "*")
                    star_kwargs = star_kwargs or name.startswith("**")
                    if name.startswith("*") and positional is None:
                        positional = len(parameters)
                    if not name or name.startswith("*") or name == "/":
                        continue
                    parameters.append((name, default.strip() or None))
                if parameters and parameters[0][0] in SELF_RECEIVERS and definition.parent is not None:
                    parameters = parameters[1:]
                    positional = None if positional is None else positional - 1
        self._positionals[ref] = len(parameters) if positional is None else positional
        # Unread signatures count as taking anything.
        self._variadic[ref] = (star_args or not read, star_kwargs or not read)
        result = self._signatures[ref] = tuple(parameters)
        return result

    def positional(self, ref: FunctionRef) -> int:
        """How many of :meth:`parameters` a positional argument can reach (those before
        ``*``/``*args``; the keyword-only ones after it are reached by name only)."""
        self.parameters(ref)
        return self._positionals[ref]

    def variadic(self, ref: FunctionRef) -> tuple[bool, bool]:
        """Whether the function takes ``*args`` and whether it takes ``**kwargs`` (both
        True when its signature was not read)."""
        self.parameters(ref)
        return self._variadic[ref]

    def _body_lines(self, ref: FunctionRef | None) -> Sequence[str] | None:
        """A function's body lines, or None when it is not known."""
        facts = self.facts.get(ref.path) if ref is not None else None
        definition = self.graph.definition(ref) if ref is not None else None
        if facts is None or definition is None:
            return None
        return facts.lines[definition.body_start_line - 1 : definition.end_line]

    def _relayed(self, caller_off: frozenset[str], caller: FunctionRef | None) -> frozenset[str]:
        """The caller's false parameters it still holds when it calls: less those its body
        binds again (nothing when its body is not known)."""
        if not caller_off:
            return caller_off
        lines = self._body_lines(caller)
        return frozenset() if lines is None else unbound_names(caller_off, lines)

    def _compute_off(self, callee: FunctionRef, call: CallSite | None, caller_off: frozenset[str], caller: FunctionRef | None) -> frozenset[str]:
        off = set(false_keywords(call))
        if call is None:
            return self._relevant(callee, frozenset(off))
        parameters = self.parameters(callee)
        may_pass_false = bool(caller_off) or _POSITIONAL_FALSE.search(call.arguments) is not None
        if not may_pass_false and not any(default is not None and _FALSE_DEFAULT.match(default) for _, default in parameters):
            return self._relevant(callee, frozenset(off))  # nothing below could add a name
        passed = self.passed(call.arguments)
        if passed is None:
            return self._relevant(callee, frozenset(off))  # *args/**kwargs: what is passed is not known
        keywords, positional = passed
        off.update(name for name, value in keywords.items() if value in self._relayed(caller_off, caller))
        values = [argument.strip() for argument in split_arguments(call.arguments) if argument.strip()][:positional]
        if self._through_class(callee, call):
            values = []  # ``Form.save(form, None)``: the first is ``self``, positions shift
        reachable = self.positional(callee)
        for position, (name, default) in enumerate(parameters):
            if position < positional and position >= reachable:
                continue  # a keyword-only parameter: the positional arguments fill ``*args``
            if position < positional:
                value = values[position] if position < len(values) else ""
                if _FALSE_LITERAL.match(value):
                    off.add(name)
                if value in _NONE:
                    off.add(none_marker(name))
            elif name not in keywords and default is not None and _FALSE_DEFAULT.match(default):
                off.add(name)
                if default in _NONE:
                    off.add(none_marker(name))
        return self._relevant(callee, frozenset(off))

    def _relevant(self, callee: FunctionRef, off: frozenset[str]) -> frozenset[str]:
        """``off`` less the None markers of parameters the callee never tests against
        ``None``, itself or through the framework (:attr:`none_tested`): fewer distinct sets,
        fewer paths computed again."""
        markers = [item for item in off if item.startswith("<") and item.endswith(" is None>")]
        if markers and self.none_tested is not None:
            tested = self.none_tested(callee)
            markers = [marker for marker in markers if marker[1 : -len(" is None>")] not in tested]
        if not markers:
            return off
        facts = self.facts.get(callee.path)
        definition = self.graph.definition(callee)
        if facts is None or definition is None:
            return off - set(markers)
        body = "\n".join(facts.lines[definition.body_start_line - 1 : definition.end_line])
        unused = {marker for marker in markers if not re.search(rf"\b{re.escape(marker[1:-len(' is None>')])}\s+is\s+(?:not\s+)?None\b", body)}
        return off - unused if unused else off

    def _through_class(self, callee: FunctionRef, call: CallSite) -> bool:
        """Whether a method is called on its class, ``self`` passed first (``Cls.m(obj, x)``)."""
        definition = self.graph.definition(callee)
        if definition is None or definition.parent is None:
            return False
        receiver = strip_arguments(call.callee).rsplit(".", 1)[0] if "." in call.callee else ""
        return receiver.rsplit(".", 1)[-1] == definition.parent.rsplit(".", 1)[-1]



def false_keywords(call: CallSite | None) -> frozenset[str]:
    """Keyword parameters a call passes as a false constant (``save=False``)."""
    if call is None or "=" not in call.arguments or not _MAYBE_FALSE.search(call.arguments):
        return frozenset()
    names = set()
    for argument in split_arguments(call.arguments):
        match = _FALSE_KEYWORD.match(argument.strip())
        if match:
            names.add(match.group(1))
            if match.group(2) in _NONE:
                names.add(none_marker(match.group(1)))
    return frozenset(names)
