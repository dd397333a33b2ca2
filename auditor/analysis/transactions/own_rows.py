"""Calls whose value is a row of a known class, read from the called function's text: a
classmethod that returns a row of its ``cls`` (``M.by_id(k)`` is an ``M``), and a helper that
returns its first argument unchanged (``obj_or_404(x)`` is ``x``).

SQLAlchemy's ``Query.first``/``one``/``one_or_none``/``get`` return entities of the query's
own (sqlalchemy/orm/query.py ``Query.first``), so ``cls.query.filter_by(...).first()`` or a
query built from ``cls`` step by step (``q = cls.all(); q = q.filter(...); return q.first()``)
returns a row of the class the classmethod is called on; ``typing.Self`` names that class too.
A chain through a call that turns rows into plain values (:data:`NOT_ROWS`) yields none.

Inputs: the call graph, the file indexes and texts (through :class:`~.receiver_types.ReceiverTypes`).
Output: :class:`OwnRows`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.expressions import SESSION_GET, assigned_expression, first_argument, return_starts
from auditor.analysis.transactions.scanning import IDENTIFIER

# ``-> Self``, ``-> Optional[Self]``, ``-> Self | None`` (typing.Self: an instance of the class called on).
_RETURNS_SELF = re.compile(r"\)\s*->\s*['\"]?(?:Optional\[\s*Self\s*\]|Self(?:\s*\|\s*None)?)['\"]?\s*:")
_FIRST_PARAMETER = re.compile(r"def\s+\w+\s*\(\s*([A-Za-z_]\w*)")
# Query methods that return one row of the query's entity (or None).
_OWN_ROW_METHODS = frozenset({"first", "one", "one_or_none", "get", "first_or_404", "one_or_404", "get_or_404"})
NOT_ROWS = frozenset({"values", "values_list", "dates", "datetimes", "with_entities", "add_columns", "add_entity"})
"""Query calls after which the query yields plain values, not rows of its model: Django's
``QuerySet.values`` (dicts: ``ValuesIterable``), ``values_list`` (tuples, or flat values:
``ValuesListIterable``/``FlatValuesListIterable``), ``dates``/``datetimes`` (django/db/models/
query.py); SQLAlchemy's ``Query.with_entities``/``add_columns``/``add_entity`` (rows of
tuples: sqlalchemy/orm/query.py). ``.values(...).get()`` is a dict, never a row."""


class OwnRows:
    """Which repository functions return a row of their ``cls`` or their argument (memoised)."""

    def __init__(
        self, graph: CallGraph, indexes: Mapping[str, object], text_lines: Callable[[str], list[str]],
        statement: Callable[[list[str], int, str], str],
    ) -> None:
        self.graph = graph
        self.indexes = indexes
        self.text_lines = text_lines
        self.statement = statement
        self._pass_through: dict[FunctionRef, bool] = {}
        self._own_rows: dict[FunctionRef, bool] = {}

    def passed_through(self, path: str, expression: str) -> str | None:
        """The first argument of a call ``f(arg, ...)`` to a repository function that returns
        its first parameter unchanged wherever it returns (``def obj_or_404(obj): if obj is
        None: raise NotFound(); return obj``): the call's value is the argument's."""
        name = strip_arguments(expression)
        if not expression.endswith(")") or not name or not all(IDENTIFIER.fullmatch(part) for part in name.split(".")):
            return None
        argument = first_argument(expression[len(name) :])
        if argument is None:
            return None
        function = self.graph.resolve(path, name)
        definition = self.graph.definition(function) if function is not None else None
        if function is None or definition is None or definition.kind == "class":
            return None
        known = self._pass_through.get(function)
        if known is None:
            lines = self.text_lines(function.path)
            signature = " ".join(lines[definition.start_line - 1 : definition.body_start_line])
            first = _FIRST_PARAMETER.search(signature[signature.find("def ") :])
            parameter = first.group(1) if first is not None and first.group(1) not in SELF_RECEIVERS else None
            returns = [text for _, text in return_starts(lines, definition, getattr(self.indexes.get(function.path), "definitions", ()))]
            known = self._pass_through[function] = bool(parameter and returns and all(text == parameter for text in returns))
        return argument if known else None

    def returns_own_row(self, function: FunctionRef) -> bool:
        """Whether ``function`` is a classmethod that returns a row of its ``cls`` (or None)
        wherever it returns: annotated ``-> Self`` (``Optional[Self]``, ``Self | None``), or
        each ``return`` is bare, ``None``, ``cls(...)``, ``session.get(cls, ...)``, a chain from
        ``cls`` ending in a row method (``cls.query.filter_by(...).first()``: ``first``,
        ``one``, ``one_or_none``, ``get``...; SQLAlchemy's ``Query.first`` returns the first
        entity of the query's own, sqlalchemy/orm/query.py ``Query.first``), another such
        classmethod of ``cls``, or a local every assignment of which is one of these or a
        chain from ``cls``/itself (``q = cls.all(); q = q.filter(...); return q.first()``).
        Memoised."""
        known = self._own_rows.get(function)
        if known is not None:
            return known
        self._own_rows[function] = False
        definition = self.graph.definition(function)
        result = False
        if definition is not None and definition.kind != "class" and any(d.rsplit(".", 1)[-1] == "classmethod" for d in definition.decorators):
            lines = self.text_lines(function.path)
            signature = " ".join(lines[definition.start_line - 1 : definition.body_start_line])
            if _RETURNS_SELF.search(signature):
                result = True
            else:
                returns = [
                    self.statement(lines, number, start)
                    for number, start in return_starts(lines, definition, getattr(self.indexes.get(function.path), "definitions", ()))
                ]
                body = lines[definition.body_start_line - 1 : definition.end_line]
                result = bool(returns) and any(text for text in returns) and all(self._own_row(function, body, text, 0) for text in returns)
        self._own_rows[function] = result
        return result

    def _own_row(self, function: FunctionRef, body: list[str], expression: str, depth: int) -> bool:
        """Whether ``expression`` in the classmethod ``function`` (its ``body`` lines) is a row
        of its ``cls`` or None (see :meth:`_returns_own_row`)."""
        expression = expression.split("#", 1)[0].strip()
        if expression in ("", "None"):
            return True
        session = SESSION_GET.match(expression)
        if session is not None:
            return session.group(1) == "cls"
        parts = strip_arguments(expression).split(".")
        if NOT_ROWS.intersection(parts[1:]):
            return False  # ``cls.objects.values(...).first()``: a dict, not a row
        if not expression.endswith(")") or not all(IDENTIFIER.fullmatch(part) for part in parts):
            if len(parts) == 1 and IDENTIFIER.fullmatch(parts[0]) and depth == 0:
                values = [found[0] for text in body if (found := assigned_expression(text, parts[0])) is not None and not found[1]]
                return bool(values) and all(self._own_row(function, body, value, 1) for value in values)
            return False
        if parts == ["cls"]:
            return True  # ``cls(...)``
        if parts[0] != "cls" and len(parts) >= 2 and parts[-1] in _OWN_ROW_METHODS and depth == 0:
            # ``q.first()``: ``q`` a query every assignment builds from ``cls`` or from ``q`` itself
            sources = [found[0] for text in body if (found := assigned_expression(text, parts[0])) is not None]
            chains = [strip_arguments(source).split(".") for source in sources]
            roots = {chain[0] for chain in chains}
            plain = any(NOT_ROWS.intersection(chain[1:]) for chain in chains)
            return bool(sources) and not plain and roots <= {"cls", parts[0]} and "cls" in roots
        if parts[0] != "cls" or len(parts) < 2:
            return False
        if len(parts) == 2:
            owner = FunctionRef(function.path, function.qualname.rsplit(".", 1)[0])
            member = self.graph.class_member(owner, parts[1])
            return member is not None and member != function and self.returns_own_row(member)
        return parts[-1] in _OWN_ROW_METHODS
