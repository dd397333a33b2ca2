"""Calls that always raise ``AttributeError``: ``row.name(...)`` where ``row`` holds a row
of a repository Django model and nothing gives that model a ``name``.

Python finds an instance's attribute in the instance's ``__dict__`` or on
``type(obj).__mro__``, else calls ``__getattr__``, else raises ``AttributeError``
(language reference, "Customizing attribute access"). A Django model's instance
attributes are its fields and relations (assigned in ``Model.__init__``, named in the
model's text), the methods of ``django.db.models.Model`` (django/db/models/base.py
``Model``: the names in :data:`DJANGO_MODEL_METHODS`; its other methods start with ``_``),
what ``ModelBase`` and the fields add to the class (``DoesNotExist``, the manager,
``get_FOO_display``, ``get_next_by_FOO``/``get_previous_by_FOO``, ``get_FOO_order``/
``set_FOO_order``, ``get_next_in_order``/``get_previous_in_order``, an
``ABSOLUTE_URL_OVERRIDES`` ``get_absolute_url``: django/db/models/base.py
``ModelBase.__new__``/``_prepare``, django/db/models/fields/__init__.py
``Field.contribute_to_class``) and whatever its own classes define.

What a class body binds may add more: ``ModelBase.__new__`` hands every value with a
``contribute_to_class`` to ``add_to_class`` (django/db/models/base.py), which lets it set
any attribute on the model (django-simple-history's ``HistoricalRecords.contribute_to_class``
-> ``add_extra_methods`` sets ``save_without_historical_record``: simple_history/models.py),
and a class decorator may return anything. So a body is *closed* only when it has no class
decorator and binds only functions (undecorated, or decorated by ``property``,
``cached_property``, ``classmethod``, ``staticmethod`` or a property's ``setter``...),
nested classes (``Meta``: ``ModelBase`` skips classes, ``_has_contribute_to_class``), plain
literals, and calls of Django's own fields and managers (``models.CharField(...)`` with
``from django.db import models``, or a name imported from ``django.db.models`` or a
``django.contrib`` module): those add only the field's name and the generated names above.

So a call raises when all of these hold: the receiver is a local bound once
(:meth:`.ConstructedNames.bound_once`) to a row of repository model ``M``
(:meth:`.ReceiverTypes.variable_class`); every class on ``M``'s MRO is a repository class
with a closed body or Django's ``Model`` (no third-party base or mixin, no ``metaclass=``,
no ``__getattr__``/``__getattribute__``); the name is public, lower case, none of Django's
and matches none of its generated patterns; and the repository text never writes the
name other than as a called attribute (``.name(``): no definition, field, assignment,
``setattr(..., "name", ...)`` or string anywhere. A path through such a call ends there
(the statement is an exit, as a ``raise`` is: :mod:`.paths`).

django-helpdesk's ``create_queue_permissions`` calls ``q.generate_permission_name()`` on
a ``Queue``, which defines ``prepare_permission_name``: that branch raises before its save.

Inputs: the call graph, the per-file facts and the receiver types. Output:
:meth:`MissingMethods.raising_lines`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping

from tree_sitter import Node

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import FOR_LOOP, SELF_RECEIVERS
from auditor.analysis.transactions.facts import FileFacts, enclosing_of
from auditor.analysis.transactions.expressions import assigned_expression
from auditor.analysis.transactions.receivers import Receivers
from auditor.analysis.transactions.scanning import IDENTIFIER
from auditor.index.model import Definition
from auditor.languages.grammars import parser_for

DJANGO_MODEL_METHODS = frozenset(
    """
    from_db get_deferred_fields refresh_from_db arefresh_from_db serializable_value save asave save_base
    delete adelete prepare_database_save clean validate_unique date_error_message unique_error_message
    get_constraints validate_constraints full_clean clean_fields check pk get_absolute_url
    get_next_in_order get_previous_in_order
    """.split()
)
"""The public attributes of ``django.db.models.Model`` instances (django/db/models/base.py
``Model``), and the two ``ModelBase._prepare`` adds for ``order_with_respect_to``."""

_GENERATED = re.compile(r"^(?:get_\w+_display|get_(?:next|previous)_by_\w+|[gs]et_\w+_order)$")
_DYNAMIC_LOOKUP = ("__getattr__", "__getattribute__")
# Decorators whose result carries no ``contribute_to_class``: builtins and functools'.
_PLAIN_DECORATORS = frozenset({"property", "cached_property", "functools.cached_property", "classmethod", "staticmethod"})
_PROPERTY_PARTS = frozenset({"setter", "getter", "deleter"})
# Django's modules of fields and managers (``django.contrib.postgres.fields``, ``contenttypes.fields``...).
_DJANGO_MODEL_MODULES = ("django.db", "django.contrib.")
_LITERALS = frozenset({"string", "concatenated_string", "integer", "float", "true", "false", "none"})
_LITERAL_CONTAINERS = frozenset({"tuple", "list", "set", "parenthesized_expression", "unary_operator", "pair", "dictionary"})


class MissingMethods:
    """Which lines of a function call a method its receiver's model does not have."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], receivers: Receivers | None) -> None:
        self.graph = graph
        self.facts = facts
        self.receivers = receivers
        self.texts: Mapping[str, str] = receivers.texts if receivers is not None else {}
        self._lines: dict[FunctionRef, frozenset[int]] = {}
        self._closed: dict[FunctionRef, bool] = {}
        self._only_called: dict[str, bool] = {}

    def raising_lines(self, ref: FunctionRef) -> frozenset[int]:
        """The lines of ``ref`` (Python) holding a call that always raises
        ``AttributeError`` (module docstring)."""
        found = self._lines.get(ref)
        if found is None:
            found = self._lines[ref] = self._compute(ref)
        return found

    def _compute(self, ref: FunctionRef) -> frozenset[int]:
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if self.receivers is None or facts is None or definition is None or facts.index.language != "python":
            return frozenset()
        enclosing = enclosing_of(ref)
        lines: set[int] = set()
        for call in facts.index.calls:
            if call.enclosing != enclosing:
                continue
            parts = strip_arguments(call.callee).split(".")
            if len(parts) != 2 or parts[0] in SELF_RECEIVERS or not IDENTIFIER.fullmatch(parts[0]) or not _candidate(parts[1]):
                continue
            model = self._row_class(ref, definition, parts[0], call.line)
            if model is None:
                continue
            if self._closed_model(model) and self.graph.class_member(model, parts[1]) is None and self._only_called_anywhere(parts[1]):
                lines.add(call.line)
        return frozenset(lines)

    def _row_class(self, ref: FunctionRef, definition: Definition, variable: str, line: int) -> FunctionRef | None:
        """The model whose row the local ``variable`` holds at ``line``, when one binding
        gives it (:meth:`.ConstructedNames.bound_once`): what its assignment or loop reads
        (:meth:`.ReceiverTypes.variable_class`), or, for ``for row in rows:``, the model
        of every binding of ``rows`` in the function, each ``rows = M.objects.filter(...)``
        (``all``, ``exclude``...: a queryset of ``M`` rows) of one ``M``."""
        assert self.receivers is not None
        if not self.receivers.constructed.bound_once(ref.path, definition, variable, line):
            return None
        types = self.receivers.types
        found = types.variable_class(ref.path, definition, variable, line)
        if found is not None:
            return found
        lines = types.text_lines(ref.path)
        for number in range(min(line - 1, len(lines)), definition.body_start_line - 1, -1):
            loop = FOR_LOOP.match(lines[number - 1])
            if loop is None or loop.group(1) != variable:
                continue
            rows = loop.group(2).strip()
            bindings = self.receivers.constructed.binding_lines(ref.path, definition, rows) if IDENTIFIER.fullmatch(rows) else ()
            models = set()
            for bound in bindings:
                assigned = assigned_expression(lines[bound - 1], rows)
                model = types.rows_class(ref.path, assigned[0]) if assigned is not None and not assigned[1] else None
                models.add(model)
            return models.pop() if len(models) == 1 and None not in models else None
        return None

    def _closed_model(self, model: FunctionRef) -> bool:
        """Whether every class on ``model``'s MRO is a repository class or Django's
        ``Model`` (at least one), none has a ``metaclass=`` or a dynamic lookup hook."""
        known = self._closed.get(model)
        if known is None:
            known = self._closed[model] = self._compute_closed(model)
        return known

    def _compute_closed(self, model: FunctionRef) -> bool:
        seen: set[FunctionRef] = set()
        pending = [model]
        django_model = False
        while pending:
            cls = pending.pop()
            if cls in seen:
                continue
            seen.add(cls)
            definition = self.graph.definition(cls)
            if definition is None or definition.kind != "class":
                return False
            facts = self.facts.get(cls.path)
            header = " ".join(facts.lines[definition.start_line - 1 : definition.body_start_line - 1]) if facts is not None else "metaclass"
            if "metaclass" in header or any(self.graph.class_member(cls, hook) is not None for hook in _DYNAMIC_LOOKUP):
                return False
            if facts is None or not _closed_body(facts, definition):
                return False  # a class decorator or a value that may add methods (module docstring)
            repository = self.graph.base_classes(cls)
            foreign = [base for base in definition.bases if facts is not None and _names_django_model(facts, base.strip())]
            if len(repository) + len(foreign) != len(definition.bases):
                return False  # a base the repository does not define (a third-party mixin)
            django_model = django_model or bool(foreign)
            pending.extend(repository)
        return django_model

    def _only_called_anywhere(self, name: str) -> bool:
        """Whether every occurrence of ``name`` in the repository's texts is a called
        attribute (``.name(``)."""
        known = self._only_called.get(name)
        if known is None:
            word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
            called = re.compile(rf"\.\s*{re.escape(name)}\s*\(")
            known = True
            for text in self.texts.values():
                if name not in text:
                    continue
                if len(word.findall(text)) != len(called.findall(text)):
                    known = False
                    break
            self._only_called[name] = known
        return known


def _candidate(name: str) -> bool:
    """Whether an attribute name could be missing from a model: public, lower case, not
    Django's own nor one its fields generate."""
    return not name.startswith("_") and name[:1].islower() and name not in DJANGO_MODEL_METHODS and _GENERATED.match(name) is None


def _names_django_model(facts: FileFacts, base: str) -> bool:
    """Whether the base ``base`` written in ``facts``'s file is ``django.db.models.Model``
    (``models.Model`` with ``from django.db import models``, ``Model`` imported from
    ``django.db.models``, or the dotted name with ``import django.db.models``)."""
    imports = facts.index.imports
    if base == "models.Model":
        return any(record.module == "django.db" and record.name == "models" and record.alias in (None, "models") for record in imports)
    if base == "Model":
        return any(record.module == "django.db.models" and record.name == "Model" and record.alias in (None, "Model") for record in imports)
    return base == "django.db.models.Model" and any(
        record.module.startswith("django") and record.name is None and record.alias is None for record in imports
    )


def _closed_body(facts: FileFacts, definition: Definition) -> bool:
    """Whether the class ``definition`` (in ``facts``'s file) has no decorator and its body
    binds nothing that may add attributes to the class (module docstring)."""
    if definition.decorators:
        return False
    parser = parser_for("python")
    if parser is None:
        return False
    text = textwrap.dedent("\n".join(facts.lines[definition.start_line - 1 : definition.end_line]))
    source = text.encode("utf-8", "surrogatepass")
    root = parser.parse(source).root_node
    node = root.named_children[0] if root.named_children else None
    body = node.child_by_field_name("body") if node is not None and node.type == "class_definition" else None
    if body is None:
        return False
    django = _django_names(facts)
    return all(_closed_statement(statement, source, django) for statement in body.named_children)


def _closed_statement(statement: Node, source: bytes, django: tuple[frozenset[str], frozenset[str]]) -> bool:
    kind = statement.type
    if kind in ("comment", "pass_statement", "function_definition", "class_definition"):
        return True
    if kind == "decorated_definition":
        inner = statement.child_by_field_name("definition")
        decorators = [child for child in statement.named_children if child.type == "decorator"]
        return inner is not None and inner.type == "function_definition" and all(_plain_decorator(_text(d, source).lstrip("@").strip()) for d in decorators)
    if kind != "expression_statement" or len(statement.named_children) != 1:
        return False
    expression = statement.named_children[0]
    if expression.type in _LITERALS:
        return True  # a docstring
    if expression.type != "assignment":
        return False
    target = expression.child_by_field_name("left")
    if target is None or not _plain_target(target):
        return False  # ``locals()["x"] = ...``, ``Other.x = ...``: not a name of this body
    value = expression.child_by_field_name("right")
    if value is None:
        return True  # ``name: int``, an annotation alone
    return value.type != "assignment" and _closed_value(value, source, django)


def _closed_value(value: Node, source: bytes, django: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether ``value`` is a plain literal or a call of one of Django's own fields or
    managers (``django``: the names of ``django.db.models`` modules, the names imported
    from a ``django`` module)."""
    if value.type in _LITERALS:
        return True
    if value.type in _LITERAL_CONTAINERS:
        return all(_closed_value(child, source, django) for child in value.named_children if child.type != "comment")
    if value.type != "call":
        return False
    function = value.child_by_field_name("function")
    if function is None:
        return False
    name = _text(function, source)
    modules, names = django
    if function.type == "identifier":
        return name in names
    head = name.split(".", 1)[0]
    return function.type == "attribute" and head in modules and all(IDENTIFIER.fullmatch(part) for part in name.split("."))


def _django_names(facts: FileFacts) -> tuple[frozenset[str], frozenset[str]]:
    """The local names of ``django.db.models`` (``from django.db import models``) and the
    names imported from one of Django's model modules, in ``facts``'s file."""
    modules: set[str] = set()
    names: set[str] = set()
    for record in facts.index.imports:
        if record.name is None or not record.module.startswith(_DJANGO_MODEL_MODULES):
            continue
        local = record.alias or record.name
        if record.module in ("django.db", "django.contrib.gis.db") and record.name == "models":
            modules.add(local)
        else:
            names.add(local)
    return frozenset(modules), frozenset(names)


def _plain_target(target: Node) -> bool:
    if target.type == "identifier":
        return True
    return target.type in ("pattern_list", "tuple_pattern", "list_pattern") and all(_plain_target(child) for child in target.named_children)


def _plain_decorator(text: str) -> bool:
    """Whether a method decorator returns a value with no ``contribute_to_class``."""
    parts = text.split(".")
    return text in _PLAIN_DECORATORS or (len(parts) == 2 and parts[1] in _PROPERTY_PARTS and IDENTIFIER.fullmatch(parts[0]) is not None)


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")
