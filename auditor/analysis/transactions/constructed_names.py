"""Which class of object a plain name holds where it is bound once to a constructor call:
a local (``viewset = ExamViewset()``) or, in a function that never binds it, a
module-level name (``exam_viewset = ExamViewset()``). Python looks a method up on an
instance by its class's MRO (``type(obj).__mro__``), so a call on the name runs the base
method with ``self`` of that class, and the base method's self-calls resolve by it
(:meth:`.Dispatch.receiver_after`). A name bound more than once in the function, in any
target position (``other, name = ...``, ``a = name = ...``, ``for``, ``with ... as``,
``del``, ``:=``, augmented: :mod:`.name_bindings`), to anything else, or declared
``global`` somewhere holds no known class.

Inputs: the file texts (through :class:`~.receiver_types.ReceiverTypes`) and a function's
definition. Output: :class:`ConstructedNames`.
"""

from __future__ import annotations

import re

from auditor.callgraph.graph import FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.name_bindings import FunctionBindings, function_bindings
from auditor.analysis.transactions.receiver_types import ReceiverTypes
from auditor.analysis.transactions.expressions import assigned_expression
from auditor.analysis.transactions.scanning import IDENTIFIER
from auditor.analysis.transactions.throwaway import unbound_names
from auditor.index.model import Definition


class ConstructedNames:
    """The constructor-bound class of names, read from the text (kept per module name)."""

    def __init__(self, types: ReceiverTypes) -> None:
        self.types = types
        self._module_names: dict[tuple[str, str], FunctionRef | None] = {}
        self._function_bindings: dict[tuple[str, int], FunctionBindings | None] = {}

    def class_at(self, path: str, definition: Definition, variable: str, line: int) -> FunctionRef | None:
        """The class of what ``variable`` holds at ``line`` of the function ``definition``
        (in ``path``): a local it binds once above the line to a constructor call, else,
        when it never binds the name (nor takes it as a parameter), the module's name bound
        so (:meth:`module_class`). None otherwise."""
        if not IDENTIFIER.fullmatch(variable):
            return None
        lines = self.types.text_lines(path)[definition.start_line - 1 : definition.end_line]
        signature, body = lines[: definition.body_start_line - definition.start_line], lines[definition.body_start_line - definition.start_line :]
        if re.search(rf"\b{re.escape(variable)}\b", " ".join(signature)):
            return None  # a parameter: what the callers pass
        bindings = self._bindings(path, definition)
        if bindings is None:
            return None  # not parsed: what it holds is not known
        bound = bindings.lines_binding(variable)
        if not bound and unbound_names(frozenset({variable}), body):
            return self.module_class(path, variable)
        if len(bound) != 1 or bound[0] >= line:
            return None  # bound again anywhere (``a, variable = ...``, ``for``, ``del``, ...)
        return self.constructed_class(path, bound[0], variable)

    def bound_once(self, path: str, definition: Definition, variable: str, line: int) -> bool:
        """Whether the local ``variable`` of the function ``definition`` (in ``path``) holds
        at ``line`` what one binding gave it: a parameter the body never binds again, or one
        binding above the line and no other anywhere in the function (any target position:
        :mod:`.name_bindings`). A name rebound by ``other, variable = ...`` may hold anything."""
        if not IDENTIFIER.fullmatch(variable):
            return False
        bindings = self._bindings(path, definition)
        if bindings is None:
            return False  # not parsed: what it holds is not known
        bound = bindings.lines_binding(variable)
        lines = self.types.text_lines(path)[definition.start_line - 1 : definition.body_start_line - 1]
        if re.search(rf"\b{re.escape(variable)}\b", " ".join(lines)):
            return not bound
        return len(bound) == 1 and bound[0] < line

    def binding_lines(self, path: str, definition: Definition, variable: str) -> tuple[int, ...]:
        """Every line of the function ``definition`` binding the local ``variable`` (any
        target position); none when it is a parameter or the function cannot be parsed."""
        bindings = self._bindings(path, definition)
        lines = self.types.text_lines(path)[definition.start_line - 1 : definition.body_start_line - 1]
        if bindings is None or re.search(rf"\b{re.escape(variable)}\b", " ".join(lines)):
            return ()
        return bindings.lines_binding(variable)

    def _bindings(self, path: str, definition: Definition) -> FunctionBindings | None:
        """Every binding of a name in ``definition`` (any target position), parsed once."""
        key = (path, definition.start_line)
        if key not in self._function_bindings:
            lines = self.types.text_lines(path)[definition.start_line - 1 : definition.end_line]
            self._function_bindings[key] = function_bindings(lines, definition.start_line)
        return self._function_bindings[key]

    def module_class(self, path: str, variable: str) -> FunctionRef | None:
        """The class of the object a module-level ``variable`` holds when the file binds that
        name once, at module level, to a constructor call; None when any other line binds it
        (or declares it ``global``)."""
        key = (path, variable)
        if key in self._module_names:
            return self._module_names[key]
        found: FunctionRef | None = None
        lines = self.types.text_lines(path)
        bound = [number for number, text in enumerate(lines, start=1) if assigned_expression(text, variable) is not None]
        rebound = any(re.search(rf"\bglobal\b[^\n]*\b{re.escape(variable)}\b|\b(?:for|as)\s+{re.escape(variable)}\b", text) for text in lines)
        if len(bound) == 1 and lines[bound[0] - 1][:1] not in ("", " ", "\t") and not rebound:
            found = self.constructed_class(path, bound[0], variable)
        self._module_names[key] = found
        return found

    def constructed_class(self, path: str, number: int, variable: str) -> FunctionRef | None:
        """The repository class whose constructor line ``number`` of ``path`` assigns to
        ``variable`` (``x = ExamViewset()``, the call spanning lines as written), if it is one."""
        lines = self.types.text_lines(path)
        assigned = assigned_expression(lines[number - 1], variable) if 0 < number <= len(lines) else None
        if assigned is None or assigned[1]:
            return None
        statement = self.types.statement(lines, number, assigned[0].split("#", 1)[0].strip())
        name = strip_arguments(statement)
        if not statement.endswith(")") or name == statement or not all(IDENTIFIER.fullmatch(part) for part in name.split(".")):
            return None
        return self.types.class_named(path, name)
