"""The classes of receivers read from a Python function's text, for :mod:`.receivers`:
what a local variable holds (its last assignment, ``for`` target or annotation), what a
module-level name holds (its one assignment at module level, followed through ``from m import
name``), through foreign keys and getters' returns, and class names as written in a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.analysis.entrypoints import is_test_path
from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import FOR_LOOP, SELF_RECEIVERS
from auditor.analysis.transactions.scanning import IDENTIFIER
from auditor.analysis.transactions.expressions import SESSION_GET, assigned_expression, depth_of, return_starts, statement_end
from auditor.analysis.transactions.own_rows import NOT_ROWS, OwnRows
from auditor.analysis.transactions.module_objects import ModuleObjects
from auditor.index.model import Definition

GETTER = re.compile(r"^(?:[\w.]*\.)?(?:property|cached_property)$")
"""A decorator that makes a method a property."""
# Django manager/queryset calls that return one row of the model.
_DJANGO_ROW = frozenset({"get", "first", "last", "latest", "earliest", "create", "create_user", "create_superuser"})
_DJANGO_ROW_AND_FLAG = frozenset({"get_or_create", "update_or_create"})
# ... and those returning a queryset of its rows (iterated by ``for x in ...``).
_DJANGO_ROWS = frozenset({"all", "filter", "exclude", "order_by", "select_related", "prefetch_related", "select_for_update", "iterator"})
# Flask-SQLAlchemy ``M.query`` chains that return one row.
_QUERY_ROW = frozenset({"first", "first_or_404", "one", "one_or_none", "get", "get_or_404"})
_GET_OR_404 = re.compile(r"^(?:[\w.]*\.)?(?:get_object_or_404|get_or_404)\(\s*([A-Za-z_][\w.]*)\s*[,)]")
_RETURNS = re.compile(r"\)\s*->\s*['\"]?([A-Za-z_][\w.]*)['\"]?\s*:")
# ``name = models.ForeignKey(`` / ``OneToOneField(`` in a model's class body.
_RELATION_LINE = re.compile(r"^\s+([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*(?:[\w.]*\.)?(?:ForeignKey|OneToOneField)\((.*)$")
# The related model: the first positional argument or ``to=``, a name or a string.
_RELATION_FIRST = re.compile(r"^\s*(?:to\s*=\s*)?(['\"]?)([A-Za-z_][\w.]*)\1\s*(?:[,)]|$)")
_RELATION_TO = re.compile(r"[(,]\s*to\s*=\s*(['\"]?)([A-Za-z_][\w.]*)\1\s*[,)]")
# ``AUTH_USER_MODEL = "app_label.ModelName"`` in a settings module.
_USER_MODEL_SETTING = re.compile(r"""^AUTH_USER_MODEL\s*(?::[^=]+)?=\s*['"](\w+)\.(\w+)['"]""", re.MULTILINE)
REQUEST_USER = (("request", "user"), ("self", "request", "user"))
"""Expressions Django's ``AuthenticationMiddleware`` binds to the logged-in user's row."""


class ReceiverTypes:
    """What a receiver's class is, read from the text (kept per question asked)."""

    def __init__(self, indexes: Mapping[str, object], graph: CallGraph, texts: Mapping[str, str]) -> None:
        self.indexes = indexes
        self.graph = graph
        self.texts = texts
        self._lines: dict[str, list[str]] = {}
        self._classes: dict[tuple[str, str], FunctionRef | None] = {}
        self._variables: dict[tuple[str, str, str, int], FunctionRef | None] = {}
        self.followed: set[tuple[str, str, str, int]] = set()
        """Variables whose class was read through a foreign key or a getter's return."""
        self._relations: dict[FunctionRef, dict[str, FunctionRef]] = {}
        self._members: dict[tuple[FunctionRef, str], FunctionRef | None] = {}
        self.modules = ModuleObjects(self)
        self._returns: dict[FunctionRef, tuple[FunctionRef | None, bool]] = {}
        self._user_model: tuple[FunctionRef | None] | None = None
        self.own_rows = OwnRows(graph, indexes, self.text_lines, self.statement)  # :mod:`.own_rows`

    def is_property(self, ref: FunctionRef) -> bool:
        definition = self.graph.definition(ref)
        return definition is not None and any(GETTER.match(decorator) for decorator in definition.decorators)

    # -- variables -----------------------------------------------------------------------

    def variable_class(self, path: str, definition: Definition, variable: str, line: int) -> FunctionRef | None:
        """The repository class of what ``variable`` holds at ``line``: from its last
        assignment (or ``for`` target) above the line in the function, else from a
        parameter annotation."""
        key = (path, definition.qualname, variable, line)
        if key in self._variables:
            return self._variables[key]
        lines = self.text_lines(path)
        found: FunctionRef | None = None
        for number in range(min(line - 1, len(lines)), definition.body_start_line - 1, -1):
            text = lines[number - 1]
            if variable not in text:
                continue
            assigned = assigned_expression(text, variable)
            if assigned is not None:
                expression, unpacked = assigned
                statement = self.statement(lines, number, expression)
                found, followed = self._class_of_expression(path, definition, statement, unpacked, number)
                if followed and found is not None:
                    self.followed.add(key)
                break
            loop = FOR_LOOP.match(text)
            if loop and loop.group(1) == variable:
                found = self.rows_class(path, loop.group(2))
                break
        else:
            found = self.modules.unassigned_class(path, definition, variable)
        self._variables[key] = found
        return found

    def statement(self, lines: list[str], number: int, start: str) -> str:
        """The assigned expression from ``start`` (on line ``number``) through the line where its
        brackets close."""
        return statement_end(lines, number, start)[0]

    def _class_of_expression(
        self, path: str, caller: Definition, expression: str, unpacked: bool, line: int
    ) -> tuple[FunctionRef | None, bool]:
        """The repository class of what ``expression`` (written at ``line`` in ``caller``)
        evaluates to, and whether it was read through a foreign key or a getter's body."""
        found = _GET_OR_404.match(expression) or SESSION_GET.match(expression)
        if found:
            return (None if unpacked else self.class_named(path, found.group(1))), False
        chain = expression.split("#", 1)[0].strip().split(".")
        if not unpacked and len(chain) == 1 and IDENTIFIER.fullmatch(chain[0]) and chain[0] not in SELF_RECEIVERS:
            # ``return row`` of a local typed above it (``row = obj_or_404(M.by_id(x)); ...; return row``).
            return self.variable_class(path, caller, chain[0], line), False
        passed = None if unpacked else self.own_rows.passed_through(path, expression)
        if passed is not None:
            return self._class_of_expression(path, caller, passed, False, line)
        if not unpacked and len(chain) >= 2 and all(IDENTIFIER.fullmatch(part) for part in chain):
            # ``self.invitation.submission``: an attribute chain, read name by name.
            return self._attribute_class(path, caller, chain, line)
        parts = strip_arguments(expression).split(".")
        if not parts or not all(IDENTIFIER.fullmatch(part) for part in parts) or not expression.endswith(")"):
            return None, False
        last = parts[-1]
        if NOT_ROWS.intersection(parts[1:]):
            return None, False  # ``M.objects.values(...).get(...)``: a dict or tuple, not an ``M``
        if "objects" in parts[1:]:
            position = parts.index("objects")
            wanted = _DJANGO_ROW_AND_FLAG if unpacked else _DJANGO_ROW
            return (self.class_named(path, ".".join(parts[:position])) if last in wanted else None), False
        if "query" in parts[1:]:
            position = parts.index("query")
            wanted_row = last in _QUERY_ROW and not unpacked
            return (self.class_named(path, ".".join(parts[:position])) if wanted_row else None), False
        if unpacked:
            return None, False
        if last[:1].isupper():
            return self.class_named(path, ".".join(parts)), False  # a constructor call: M(...)
        return self._returned_class(path, caller, parts, line)

    def _returned_class(
        self, path: str, caller: Definition, parts: list[str], line: int
    ) -> tuple[FunctionRef | None, bool]:
        """The class a repository function returns, for a call ``self.m(...)``,
        ``self.a.m(...)`` or ``f(...)``/``module.f(...)``: see :meth:`function_returns`."""
        if parts[0] in SELF_RECEIVERS:
            if caller.parent is None:
                return None, False
            owner: FunctionRef | None = FunctionRef(path, caller.parent)
            followed = False
            if len(parts) > 2:
                owner, followed = self._attribute_class(path, caller, parts[:-1], line)
            function = self.graph.class_member(owner, parts[-1]) if owner is not None else None
        else:
            function, followed = self.graph.resolve(path, ".".join(parts)), False
            owner = self.class_named(path, ".".join(parts[:-1])) if len(parts) >= 2 else None
        if function is None:
            return None, False
        if owner is not None and self.own_rows.returns_own_row(function):
            return owner, True  # ``M.by_id(x)``: a classmethod's row of ``cls``, here ``M``
        returned, from_body = self.function_returns(function)
        return returned, followed or from_body

    def function_returns(self, function: FunctionRef) -> tuple[FunctionRef | None, bool]:
        """The class a repository function's return annotation names (``def get_object(self)
        -> Question``), else that of the typed expression its body's single ``return``
        returns (``return get_object_or_404(Invitation, ...)``, ``return self.get_x()``);
        with whether the body was read. Memoised; a function reached again while its own
        return is being read returns nothing."""
        if function in self._returns:
            return self._returns[function]
        self._returns[function] = (None, False)
        definition = self.graph.definition(function)
        result: tuple[FunctionRef | None, bool] = (None, False)
        if definition is not None and definition.kind != "class":
            lines = self.text_lines(function.path)
            signature = " ".join(lines[definition.start_line - 1 : definition.body_start_line])
            returned = _RETURNS.search(signature)
            if returned:
                result = (self.class_named(function.path, returned.group(1)), False)
            else:
                single = self._single_return(function.path, definition)
                if single is not None:
                    number, expression = single
                    found, _ = self._class_of_expression(function.path, definition, expression, False, number)
                    result = (found, True)
                else:
                    result = (self._branches_return(function.path, definition), True)
        self._returns[function] = result
        return result

    def _branches_return(self, path: str, definition: Definition) -> FunctionRef | None:
        """The class a function with several ``return`` statements returns when each returns
        a repository class and one of those classes is a base of all the others
        (``return WithCaptchaForm()`` / ``return Form()``: a ``Form`` or below). None when
        any return's class is unknown, or a bare ``return`` returns None."""
        lines = self.text_lines(path)
        classes: set[FunctionRef] = set()
        for number, start in return_starts(lines, definition, getattr(self.indexes.get(path), "definitions", ())):
            expression = self.statement(lines, number, start)
            found, _ = self._class_of_expression(path, definition, expression, False, number) if expression else (None, False)
            if found is None:
                return None
            classes.add(found)
        return next((cls for cls in sorted(classes) if all(cls in _ancestry(self.graph, other) for other in classes)), None)

    def _single_return(self, path: str, definition: Definition) -> tuple[int, str] | None:
        """``(line, expression)`` when the function's body (after its docstring) is one
        ``return <expression>`` statement, else None."""
        lines = self.text_lines(path)
        last = min(definition.end_line, len(lines))
        code = [
            number
            for number in range(definition.body_start_line, last + 1)
            if lines[number - 1].strip() and not lines[number - 1].lstrip().startswith("#")
        ]
        if not code or definition.body_start_line <= definition.start_line:
            return None
        first = lines[code[0] - 1].strip()
        if not first.startswith("return "):
            return None
        statement, end = statement_end(lines, code[0], first[len("return ") :])
        if depth_of(statement) != 0 or code[-1] > end:
            return None  # more statements follow, or the brackets never close
        return code[0], statement

    # -- the request's user --------------------------------------------------------------

    def user_model(self) -> FunctionRef | None:
        """The repository model ``request.user`` is an instance of for a logged-in user: the
        class ``AUTH_USER_MODEL`` names in a production settings module. Django's
        ``AuthenticationMiddleware`` (django/contrib/auth/middleware.py) sets
        ``request.user`` to ``get_user(request)``, whose backend loads the row through
        ``get_user_model()`` (django/contrib/auth/__init__.py), the model of that setting.
        None when no settings module sets it (``auth.User``, no repository class) or the
        name is no single repository class."""
        if self._user_model is None:
            self._user_model = (user_model_of(self.indexes, self.texts),)
        return self._user_model[0]

    # -- foreign keys and getters -----------------------------------------------------

    def _attribute_class(
        self, path: str, caller: Definition, parts: list[str], line: int
    ) -> tuple[FunctionRef | None, bool]:
        """The class of ``self.a.b`` or ``x.a.b`` read at ``line`` in ``caller``: ``self``'s
        class or the variable's, then per name the related model of a foreign key or the
        return of a getter (see :meth:`_member_class`); with whether any step was followed."""
        user = next((len(prefix) for prefix in REQUEST_USER if tuple(parts[: len(prefix)]) == prefix), 0)
        if user:
            cls, followed = self.user_model(), True
            parts = parts[user - 1 :]
        elif parts[0] in SELF_RECEIVERS:
            cls = FunctionRef(path, caller.parent) if caller.parent is not None else None
            followed = False
        else:
            cls = self.variable_class(path, caller, parts[0], line)
            followed = (path, caller.qualname, parts[0], line) in self.followed
        for name in parts[1:]:
            if cls is None:
                return None, False
            cls, followed = self._member_class(cls, name), True
        return cls, followed

    def _member_class(self, cls: FunctionRef, name: str) -> FunctionRef | None:
        """The repository class ``cls().name`` holds: the model a ``ForeignKey`` or
        ``OneToOneField`` named ``name`` relates to, else what a ``@property`` or
        ``@cached_property`` getter named ``name`` returns. Memoised per class and name."""
        key = (cls, name)
        if key not in self._members:
            related = self._relations_of(cls).get(name)
            if related is None:
                getter = self.graph.class_member(cls, name)
                if getter is not None and self.is_property(getter):
                    related = self.function_returns(getter)[0]
            self._members[key] = related
        return self._members[key]

    def _relations_of(self, cls: FunctionRef) -> dict[str, FunctionRef]:
        """The foreign keys and one-to-one fields of the model ``cls`` and its repository
        bases (its own first), by field name, to the related repository model. Memoised
        per class."""
        found = self._relations.get(cls)
        if found is not None:
            return found
        self._relations[cls] = {}  # a base cycle reads as no relations
        result: dict[str, FunctionRef] = {}
        for base in reversed(self.graph.base_classes(cls)):
            result.update(self._relations_of(base))
        result.update(self._own_relations(cls))
        self._relations[cls] = result
        return result

    def _own_relations(self, cls: FunctionRef) -> dict[str, FunctionRef]:
        definition = self.graph.definition(cls)
        index = self.indexes.get(cls.path)
        if definition is None or index is None or definition.kind != "class":
            return {}
        lines = self.text_lines(cls.path)
        body = range(definition.body_start_line, min(definition.end_line, len(lines)) + 1)
        result: dict[str, FunctionRef] = {}
        if not any("ForeignKey(" in lines[number - 1] or "OneToOneField(" in lines[number - 1] for number in body):
            return result  # most classes declare no relation
        for number in body:
            match = _RELATION_LINE.match(lines[number - 1])
            if not match or index.enclosing_definition(number, ("class", "function", "method")) is not definition:
                continue
            arguments = self.statement(lines, number, "(" + match.group(2))
            target = _RELATION_FIRST.match(arguments[1:]) or _RELATION_TO.search(arguments)
            if target is None:
                continue
            quoted, name = target.group(1), target.group(2)
            if name == "self":
                related: FunctionRef | None = cls
            else:
                # ``"app.Model"`` names the model ``Model`` of the app ``app``.
                related = self.class_named(cls.path, name.rsplit(".", 1)[-1] if quoted else name)
            if related is not None:
                result[match.group(1)] = related
        return result

    def rows_class(self, path: str, expression: str) -> FunctionRef | None:
        """The model whose rows ``M.objects.filter(...)`` (``all``, ``exclude``...) yields."""
        parts = strip_arguments(expression).split(".")
        if "objects" not in parts[1:] or NOT_ROWS.intersection(parts[1:]) or parts[-1] not in _DJANGO_ROWS or not all(IDENTIFIER.fullmatch(part) for part in parts):
            return None
        return self.class_named(path, ".".join(parts[: parts.index("objects")]))

    def class_named(self, path: str, text: str) -> FunctionRef | None:
        """The repository class a dotted name written in ``path`` names, if any."""
        key = (path, text)
        if key not in self._classes:
            ref = self.graph.resolve(path, text) if text and text.split(".")[-1][:1].isupper() else None
            definition = self.graph.definition(ref) if ref is not None else None
            self._classes[key] = ref if definition is not None and definition.kind == "class" else None
        return self._classes[key]

    def text_lines(self, path: str) -> list[str]:
        lines = self._lines.get(path)
        if lines is None:
            lines = self._lines[path] = self.texts.get(path, "").split("\n")
        return lines


def user_model_of(indexes: Mapping[str, object], texts: Mapping[str, str]) -> FunctionRef | None:
    """The repository class ``AUTH_USER_MODEL = "app.Model"`` names in the production
    settings (one value, one class by that name, case-insensitive as ``apps.get_model``
    reads it, the one under the app's folder when several share it); None otherwise."""
    named = {
        match.groups()
        for path, text in texts.items()
        if path.endswith(".py") and "AUTH_USER_MODEL" in text and not is_test_path(path)
        for match in _USER_MODEL_SETTING.finditer(text)
    }
    if len(named) != 1:
        return None
    app, model = next(iter(named))
    classes = [
        FunctionRef(path, definition.qualname)
        for path, index in indexes.items()
        if not is_test_path(path) and path.endswith(".py")
        for definition in getattr(index, "definitions", ())
        if definition.kind == "class" and definition.qualname.lower() == model.lower()
    ]
    in_app = [ref for ref in classes if f"/{app}/" in f"/{ref.path}"]
    chosen = in_app or classes
    return chosen[0] if len(chosen) == 1 else None



def _ancestry(graph: CallGraph, cls: FunctionRef) -> set[FunctionRef]:
    """``cls`` and every repository class it derives from."""
    found: set[FunctionRef] = set()
    pending = [cls]
    while pending:
        item = pending.pop()
        if item not in found:
            found.add(item)
            pending.extend(graph.base_classes(item))
    return found
