"""What a name a function does not assign holds, for :mod:`.receiver_types`: a parameter's
annotation (``x: M``), else the object a module-level assignment built.

A module's top-level code runs once, at its first import, and the module object is kept in
``sys.modules`` (the Python reference, "The import system"): every ``from events import
event_checked_in`` binds that one object. So ``namespace = EventTypeNamespace(...)`` and
``event_x = namespace.add_event_type(...)`` give ``event_x.commit(...)``, in any function that
imports ``event_x`` and does not bind the name itself, the class the assignment's value has:
a constructor call ``Cls(...)``, or a call to a repository function, or to a method of
another such object, whose return is read as for local variables (Mayan EDMS declares its
event types and permissions this way). A name assigned more than once at module level, or
bound by the function (a parameter, an assignment, a loop or ``with``/``except`` target, a
comprehension variable, ``global``), is not read so.
"""

from __future__ import annotations

import re
from typing import Protocol

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.expressions import assigned_expression
from auditor.analysis.transactions.scanning import IDENTIFIER
from auditor.index.model import Definition

_ANNOTATION = re.compile(r"[(,]\s*([A-Za-z_]\w*)\s*:\s*['\"]?([A-Za-z_][\w.]*)['\"]?\s*(?=[,)=])")


class TypeReader(Protocol):
    """What :class:`ModuleObjects` asks of :class:`~.receiver_types.ReceiverTypes`."""

    graph: CallGraph

    def text_lines(self, path: str) -> list[str]: ...

    def class_named(self, path: str, text: str) -> FunctionRef | None: ...

    def statement(self, lines: list[str], number: int, start: str) -> str: ...

    def function_returns(self, function: FunctionRef) -> tuple[FunctionRef | None, bool]: ...


class ModuleObjects:
    """The classes of parameters by annotation and of module-level objects (memoised)."""

    def __init__(self, types: TypeReader) -> None:
        self.types = types
        self._classes: dict[tuple[str, str], FunctionRef | None] = {}

    def unassigned_class(self, path: str, definition: Definition, variable: str) -> FunctionRef | None:
        """The class of ``variable`` in a function that assigns it nowhere above its use: its
        parameter annotation, else (when the function binds no such name) the module-level
        object of that name (:meth:`module_class`)."""
        lines = self.types.text_lines(path)
        signature = " ".join(lines[definition.start_line - 1 : definition.body_start_line])
        annotations = dict(_ANNOTATION.findall(signature))
        if variable in annotations:
            return self.types.class_named(path, annotations[variable])
        if binds_name(lines, definition, variable, signature):
            return None
        return self.module_class(path, variable)

    def module_class(self, path: str, name: str) -> FunctionRef | None:
        """The repository class of the object the module-level ``name`` of ``path`` holds,
        followed through ``from module import name`` into a repository module."""
        key = (path, name)
        if key in self._classes:
            return self._classes[key]
        self._classes[key] = None  # a name read while its own value is being read
        found: FunctionRef | None = None
        expression = self._assignment(path, name)
        if expression is not None:
            found = self._value_class(path, expression)
        else:
            imported = self.types.graph.imported_from(path, name)
            if imported is not None and imported[0] != path:
                found = self.module_class(*imported)
        self._classes[key] = found
        return found

    def _assignment(self, path: str, name: str) -> str | None:
        """The value of the one module-level ``name = ...`` of ``path`` (None: none, or
        several, when which one holds is a question of control flow)."""
        lines = self.types.text_lines(path)
        found: list[str] = []
        for number, text in enumerate(lines, start=1):
            if not text.startswith(name):
                continue
            assigned = assigned_expression(text, name)
            if assigned is not None and not assigned[1]:
                found.append(self.types.statement(lines, number, assigned[0]))
        return found[0] if len(found) == 1 else None

    def _value_class(self, path: str, expression: str) -> FunctionRef | None:
        if not expression.endswith(")"):
            return None
        parts = strip_arguments(expression).split(".")
        if not parts or not all(IDENTIFIER.fullmatch(part) for part in parts):
            return None
        if parts[-1][:1].isupper():
            return self.types.class_named(path, ".".join(parts))
        graph = self.types.graph
        function: FunctionRef | None = None
        if len(parts) == 2:
            owner = self.module_class(path, parts[0])
            function = graph.class_member(owner, parts[1]) if owner is not None else None
        if function is None:
            function = graph.resolve(path, ".".join(parts))
        definition = graph.definition(function) if function is not None else None
        if function is None or definition is None or definition.kind == "class":
            return None
        return self.types.function_returns(function)[0]


def binds_name(lines: list[str], definition: Definition, variable: str, signature: str) -> bool:
    """Whether the function binds ``variable`` itself: a parameter, or a name assigned
    anywhere in its body, a ``for``/``with``/``except``/comprehension target, or declared
    ``global``/``nonlocal``. Read from the text, so a doubtful line counts as a binding."""
    if re.search(rf"\b{re.escape(variable)}\b", signature.split("(", 1)[-1]):
        return True
    binding = re.compile(
        rf"(?:\b(?:for|as|global|nonlocal)\s+(?:[\w\s,*]*,\s*)?|^\s*(?:[\w\s,*]*,\s*)?)"
        rf"{re.escape(variable)}\b\s*(?:[,:)]|=(?!=)|\bin\b|$)"
    )
    last = min(definition.end_line, len(lines))
    return any(variable in lines[number - 1] and binding.search(lines[number - 1]) for number in range(definition.body_start_line, last + 1))
