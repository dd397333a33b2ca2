"""The classes a local variable built from a parameter may hold, read from every caller's
argument: ``def save_related(serializer, data): s = serializer(data=data); s.save()`` called
as ``save_related(self.SheetSerializer, ...)`` and ``save_related(TeamSerializer, ...)``
makes ``s`` a ``SheetSerializer`` or a ``TeamSerializer``, so ``s.save()`` runs one of
their ``save`` methods and adds the writes of that method, not a write of its own.

Inputs: the file indexes, the call graph and :class:`~.receiver_types.ReceiverTypes`.
Output: :meth:`ParameterClasses.classes`, empty unless every caller's argument names a
repository class.
"""

from __future__ import annotations

from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.receiver_types import ReceiverTypes
from auditor.analysis.transactions.expressions import assigned_expression
from auditor.analysis.transactions.scanning import IDENTIFIER, closing_bracket
from auditor.index.model import CallSite, Definition, FileIndex

_SIGNATURE_LINES = 30


class ParameterClasses:
    """What a variable assigned ``parameter(...)`` holds, from the callers' arguments."""

    def __init__(self, indexes: Mapping[str, FileIndex], graph: CallGraph, types: ReceiverTypes) -> None:
        self.indexes = indexes
        self.graph = graph
        self.types = types
        self._found: dict[tuple[FunctionRef, str], tuple[FunctionRef, ...]] = {}

    def classes(self, ref: FunctionRef, definition: Definition, variable: str, line: int) -> tuple[str, tuple[FunctionRef, ...]]:
        """The parameter ``variable`` was built from at ``line`` in ``ref`` (its last
        assignment above the line calls it) and the repository classes the callers pass
        there. No classes when any caller passes something else, when no caller is known;
        ``("", ())`` when the variable is assigned anything else."""
        lines = self.types.text_lines(ref.path)
        for number in range(min(line - 1, len(lines)), definition.body_start_line - 1, -1):
            text = lines[number - 1]
            if variable not in text:
                continue
            assigned = assigned_expression(text, variable)
            if assigned is None:
                continue
            expression, unpacked = assigned
            called = strip_arguments(expression)
            if unpacked or not expression.endswith(")") or not IDENTIFIER.fullmatch(called):
                return "", ()
            return called, self._passed(ref, definition, called)
        return "", ()

    def passed_at(self, callee: FunctionRef, caller: FunctionRef, arguments: str, parameter: str) -> FunctionRef | None:
        """The repository class one call from ``caller`` (its ``arguments``) passes for
        ``callee``'s ``parameter``, if it names one."""
        definition = self.graph.definition(callee)
        names = self._parameters(callee, definition) if definition is not None else []
        if parameter not in names:
            return None
        return self._argument_class(caller, passed_argument(arguments, parameter, names.index(parameter)))

    def _passed(self, ref: FunctionRef, definition: Definition, parameter: str) -> tuple[FunctionRef, ...]:
        key = (ref, parameter)
        if key not in self._found:
            self._found[key] = self._compute(ref, definition, parameter)
        return self._found[key]

    def _compute(self, ref: FunctionRef, definition: Definition, parameter: str) -> tuple[FunctionRef, ...]:
        names = self._parameters(ref, definition)
        if parameter not in names:
            return ()
        position = names.index(parameter)
        found: set[FunctionRef] = set()
        callers = self.graph.callers(ref)
        if not callers:
            return ()
        for edge in callers:
            calls = [call for call in self._calls_at(edge.caller, edge.line) if call.name == definition.name]
            if len(calls) != 1:
                return ()
            cls = self._argument_class(edge.caller, passed_argument(calls[0].arguments, parameter, position))
            if cls is None:
                return ()
            found.add(cls)
        return tuple(sorted(found))

    def _parameters(self, ref: FunctionRef, definition: Definition) -> list[str]:
        """The function's parameter names after ``self``/``cls``, in order."""
        lines = self.types.text_lines(ref.path)
        text = "\n".join(lines[definition.start_line - 1 : min(definition.end_line, definition.start_line + _SIGNATURE_LINES)])
        start = text.find("def " + definition.name)
        opening = text.find("(", start) if start >= 0 else -1
        closing = closing_bracket(text, opening) if opening >= 0 else None
        if closing is None:
            return []
        names = [part.partition("=")[0].split(":", 1)[0].strip() for part in split_arguments(text[opening + 1 : closing])]
        names = [name for name in names if name and name != "/"]
        if names and names[0] in SELF_RECEIVERS and definition.parent is not None:
            names = names[1:]
        return names

    def _calls_at(self, caller: FunctionRef, line: int) -> list[CallSite]:
        index = self.indexes.get(caller.path)
        if index is None:
            return []
        return [call for call in index.calls if call.line == line and call.enclosing == caller.qualname]

    def _argument_class(self, caller: FunctionRef, argument: str | None) -> FunctionRef | None:
        """The repository class an argument names: ``Name``, ``module.Name``, or ``self.Name``
        (a class nested in the caller's class or one of its bases)."""
        if argument is None:
            return None
        parts = argument.split(".")
        if not all(IDENTIFIER.fullmatch(part) for part in parts):
            return None
        if len(parts) == 2 and parts[0] in SELF_RECEIVERS:
            definition = self.graph.definition(caller)
            if definition is None or definition.parent is None:
                return None
            return self._nested(FunctionRef(caller.path, definition.parent), parts[1])
        return self.types.class_named(caller.path, argument)

    def _nested(self, owner: FunctionRef, name: str) -> FunctionRef | None:
        """The class ``name`` defined in the body of ``owner`` or of one of its bases."""
        pending, seen = [owner], set()
        while pending:
            cls = pending.pop(0)
            if cls in seen:
                continue
            seen.add(cls)
            nested = FunctionRef(cls.path, f"{cls.qualname}.{name}")
            definition = self.graph.definition(nested)
            if definition is not None and definition.kind == "class":
                return nested
            pending.extend(self.graph.base_classes(cls))
        return None


def passed_argument(arguments: str, parameter: str, position: int) -> str | None:
    """The text a call's ``arguments`` pass for ``parameter`` (by keyword, else at
    ``position``); None when it is not passed or ``*args``/``**kwargs`` may pass it."""
    positional: list[str] = []
    for part in split_arguments(arguments):
        name, equals, value = part.partition("=")
        if part.startswith("*"):
            return None
        if equals and IDENTIFIER.fullmatch(name.strip()) and not value.startswith("="):
            if name.strip() == parameter:
                return value.strip()
            continue
        positional.append(part.strip())
    return positional[position] if position < len(positional) else None
