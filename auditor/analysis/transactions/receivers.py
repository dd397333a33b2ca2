"""Calls whose receiver's class the call graph cannot see, read from the function's text
(Python only): a local variable last assigned a row of a repository model, or a model's
manager.

* ``x = M(...)``, ``x = M.objects.get/first/last/latest/earliest/create(...)``,
  ``x, created = M.objects.get_or_create(...)``, Flask-SQLAlchemy's
  ``x = M.query.filter_by(...).first_or_404()`` (``first``, ``one``, ``get``...),
  ``x = get_object_or_404(M, ...)``, ``x = session.get(M, ...)``, ``for x in
  M.objects.filter(...)``, ``x = self.get_object()`` (or any repository function) whose
  return annotation is ``-> M`` or whose body is one ``return`` of such an expression
  (``return get_object_or_404(M, ...)``, or a local variable holding one), or a classmethod
  of ``M`` that returns a row of its ``cls`` (``x = M.by_id(k)``: :mod:`.own_rows`), either of
  these handed through a helper that returns its argument (``x = obj_or_404(M.by_id(k))``), or
  a parameter annotated ``x: M``, or a module-level name (of the file, or imported from a
  repository module) that the function does not bind itself, assigned once ``x = M(...)`` or a
  repository call returning such an object (``x = namespace.add_event_type(...)`` where
  ``namespace = EventTypeNamespace(...)``): then
  ``x.method(...)`` runs ``M.method`` (or the repository base's) when the repository
  defines it.
* ``M.objects.method(...)``: the method of the manager or queryset class assigned to
  ``objects`` in ``M`` or its repository bases (``objects = FooManager()``,
  ``FooQuerySet.as_manager()``, ``FooManager.from_queryset(FooQuerySet)()``).
* ``x.name`` (no call) where ``name`` is a ``@property``/``@cached_property`` of ``x``'s
  class (``self`` too): the getter runs.
* ``x = self.a.b`` (or ``y.a.b``, ``self.a.m()``), then ``x.method(...)``: each name is
  typed by a ``ForeignKey``/``OneToOneField`` of the model (``b = models.ForeignKey(T |
  "T" | "app.T" | "self", ...)``; the reverse side is not) or by a getter or method whose
  return is read as above. Only through a variable: ``self.a.b.method(...)`` written in
  one expression is not followed (measured on healthchecks and pretalx, the findings it
  added were harmless re-runnable sequences).
* ``request.user.method(...)`` / ``self.request.user.method(...)`` (and a variable assigned
  ``request.user``): the logged-in user's row, of the model ``AUTH_USER_MODEL`` names
  (:meth:`ReceiverTypes.user_model`), runs that model's method (or its bases').
* ``M.objects.create/create_user(...)`` that no repository manager defines: Django's
  manager runs ``M.save()``, so the call reaches the model's own ``save`` override when the
  repository defines one. ``get_or_create``/``update_or_create`` run that save inside their
  own ``transaction.atomic`` (rows ``atomic: true`` of models/django.yaml:
  django/db/models/query.py ``QuerySet.get_or_create``, ``QuerySet.update_or_create``): the
  call is one atomic write, and no edge leads into the override's writes.

* a variable built by calling one of the function's parameters (``s = serializer(...)``;
  ``s.save()``): the class every caller passes there (:mod:`.parameter_classes`), one edge
  per class whose method the repository defines; none unless each does.

Each edge stands for its call site: the callee's path replaces the call's own
classification (a ``topic.delete()`` that runs ``Topic.delete`` is not also one write).
The edges are approximate (what a variable holds is read from its last assignment above
the call, not from control flow).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import SELF_RECEIVERS
from auditor.analysis.transactions.constructed_names import ConstructedNames
from auditor.analysis.transactions.framework_facts import builtin_facts
from auditor.analysis.transactions.languages import traits
from auditor.analysis.transactions.parameter_classes import ParameterClasses
from auditor.analysis.transactions.receiver_types import GETTER, REQUEST_USER, ReceiverTypes
from auditor.analysis.transactions.scanning import IDENTIFIER
from auditor.index.model import CallSite, Definition, FileIndex

ASSIGNED = "receiver's class from its assignment"
MANAGER = "the model manager's method"
CREATED = "the model's save() run by its manager"
PROPERTY = "a property read runs its getter"
FOLLOWED = "receiver's class through a foreign key or a getter's return"
PASSED = "receiver's class from the callers' arguments"
REQUEST_USER_KIND = "request.user is a row of the AUTH_USER_MODEL"

# Manager calls that save a new instance through ``Model.save()`` outside any transaction of
# their own (the atomic ones, get_or_create/update_or_create, save inside theirs).
_CREATES = frozenset({"create", "get_or_create", "update_or_create", "create_user", "create_superuser"}) - builtin_facts().atomic_methods("manager")
_CLASS_NAME = re.compile(r"[A-Za-z_][\w.]*")
_MANAGER_LINE = re.compile(r"^\s+objects\s*(?::[^=]+)?=\s*(.+)$")
# ``receiver.name`` at the start of an expression, not called and not assigned to.
_ATTRIBUTE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b(?!\s*\(|\s*=[^=])")


@dataclass(frozen=True, order=True)
class Binding:
    """An edge out of ``s.method()`` where ``s = parameter(...)``: it runs when the caller
    passes ``cls`` for ``parameter``; ``name`` is the call's last name."""

    parameter: str
    cls: FunctionRef
    name: str


class Receivers:
    """Approximate edges for calls on receivers whose class is read from the text."""

    def __init__(
        self, indexes: Mapping[str, FileIndex], graph: CallGraph, texts: Mapping[str, str], kinds: dict[Edge, str]
    ) -> None:
        self.indexes = indexes
        self.graph = graph
        self.texts = texts
        self.kinds = kinds
        self.call_names: dict[Edge, str] = {}
        """The last name of the call each edge stands for (``create`` for a manager's
        ``create()`` that runs the model's ``save``)."""
        self.types = ReceiverTypes(indexes, graph, texts)
        self.constructed = ConstructedNames(self.types)
        self.passed = ParameterClasses(indexes, graph, self.types)
        self.bindings: dict[Edge, Binding] = {}
        """The parameter and class each edge from a variable built from a parameter runs for."""
        self.classes: dict[Edge, FunctionRef] = {}
        """The class (or a subclass of it) of the receiver each edge out of a variable bound
        once (:meth:`.ConstructedNames.bound_once`), a ``request.user`` or a manager's
        ``create`` was resolved by: ``self`` has it inside the callee."""
        self._calls: dict[str, dict[str, list[CallSite]]] = {}
        self._managers: dict[FunctionRef, tuple[FunctionRef, ...]] = {}
        self._properties: frozenset[str] | None = None
        self._getters: dict[FunctionRef, bool] = {}
        self._methods: frozenset[str] | None = None
        self._property_read: re.Pattern[str] | None = None

    def edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """The extra edges out of the Python function ``ref``."""
        index = self.indexes.get(ref.path)
        definition = self.graph.definition(ref)
        if index is None or not traits(index.language).receivers or definition is None or definition.kind == "class":
            return ()
        found: list[Edge] = self._property_edges(ref, definition)
        methods = self._method_names()
        for call in self._function_calls(ref.path).get(ref.qualname, ()):
            if call.name not in methods and ".objects." not in call.callee:
                continue  # no repository method by that name, and no manager call
            parts = strip_arguments(call.callee).split(".")
            if len(parts) >= 3 and parts[-2] == "objects":
                found.extend(self._manager_edges(ref, call, ".".join(parts[:-2]), parts[-1]))
            elif len(parts) == 2 and parts[1] in methods and parts[0] not in SELF_RECEIVERS and IDENTIFIER.fullmatch(parts[0]):
                cls = self.types.variable_class(ref.path, definition, parts[0], call.line)
                target = self.graph.class_member(cls, parts[1]) if cls is not None else None
                if target is not None and target != ref:
                    followed = (ref.path, definition.qualname, parts[0], call.line) in self.types.followed
                    edge = self._edge(ref, target, call, FOLLOWED if followed else ASSIGNED)
                    if self.constructed.bound_once(ref.path, definition, parts[0], call.line):
                        self.classes[edge] = cls  # type: ignore[assignment]
                    found.append(edge)
                elif cls is None:
                    found.extend(self._passed_edges(ref, definition, call, parts[0], parts[1]))
            elif tuple(parts[:-1]) in REQUEST_USER:
                user = self.types.user_model()
                target = self.graph.class_member(user, parts[-1]) if user is not None else None
                if target is not None and target != ref:
                    edge = self._edge(ref, target, call, REQUEST_USER_KIND)
                    self.classes[edge] = user  # type: ignore[assignment]
                    found.append(edge)
        return tuple(sorted(set(found)))

    def _passed_edges(self, ref: FunctionRef, definition: Definition, call: CallSite, variable: str, method: str) -> list[Edge]:
        """An edge to ``method`` of each class the callers pass for the parameter
        ``variable`` was built from, where the repository defines that method, each with its
        :class:`Binding`. The edges stand for the call only when every class's method is the
        repository's (else the call keeps its own effect, unless a caller's binding says
        which class runs: :meth:`Sequences.path_of`)."""
        parameter, classes = self.passed.classes(ref, definition, variable, call.line)
        targets = [(cls, self.graph.class_member(cls, method)) for cls in classes]
        complete = all(target is not None for _, target in targets)
        found: list[Edge] = []
        for cls, target in targets:
            if target is None or target == ref:
                continue
            edge = self._edge(ref, target, call, PASSED, stands=complete)
            self.bindings[edge] = Binding(parameter, cls, call.name)
            found.append(edge)
        return found

    def _edge(self, caller: FunctionRef, callee: FunctionRef, call: CallSite, kind: str, stands: bool = True) -> Edge:
        edge = Edge(caller, callee, call.line, True)
        self.kinds[edge] = kind
        if stands:
            self.call_names[edge] = call.name
        return edge

    # -- properties ---------------------------------------------------------------------

    def _property_edges(self, ref: FunctionRef, definition: Definition) -> list[Edge]:
        """Reads of a repository ``@property``/``@cached_property`` on ``self`` or a typed
        variable (``asset.snapshot``, no call): the getter's body runs."""
        names = self._property_names()
        if self._property_read is None:
            return []
        lines = self.types.text_lines(ref.path)
        last = min(definition.end_line, len(lines))
        if not self._property_read.search("\n".join(lines[definition.body_start_line - 1 : last])):
            return []  # most functions read no property name at all
        nested = [
            (item.start_line, item.end_line)
            for item in self.indexes[ref.path].definitions
            if item.qualname.startswith(ref.qualname + ".")
        ]
        found: list[Edge] = []
        for number in range(definition.body_start_line, last + 1):
            text = lines[number - 1]
            if "." not in text or any(start <= number <= end for start, end in nested):
                continue
            for match in _ATTRIBUTE.finditer(text):
                receiver, name = match.group(1), match.group(2)
                if name not in names:
                    continue
                if receiver in SELF_RECEIVERS:
                    cls = FunctionRef(ref.path, definition.parent) if definition.parent is not None else None
                else:
                    cls = self.types.variable_class(ref.path, definition, receiver, number)
                getter = self.graph.class_member(cls, name) if cls is not None else None
                if getter is not None and getter != ref and self.types.is_property(getter) and self._getter_runs_code(getter):
                    found.append(self._read_edge(ref, getter, number))
        return found

    def _getter_runs_code(self, getter: FunctionRef) -> bool:
        """Whether a property's getter (the ``@property`` definition itself, not a
        ``@name.setter`` of the same name, whose writes share its qualified name) makes a
        call or reads another property: else reading it runs nothing that could write."""
        known = self._getters.get(getter)
        if known is None:
            self._getters[getter] = False  # a getter reading itself, or two reading each other
            index = self.indexes[getter.path]
            getters = [
                item for item in index.definitions
                if item.qualname == getter.qualname and any(GETTER.match(decorator) for decorator in item.decorators)
            ]  # fmt: skip
            known = any(item.body_start_line <= call.line <= item.end_line for call in index.calls for item in getters) or any(
                self._property_edges(getter, item) for item in getters
            )
            self._getters[getter] = known
        return known

    def _read_edge(self, caller: FunctionRef, getter: FunctionRef, line: int) -> Edge:
        edge = Edge(caller, getter, line, True)
        self.kinds[edge] = PROPERTY
        return edge

    def _method_names(self) -> frozenset[str]:
        """Names of the repository's Python methods: a call by any other name reaches none."""
        if self._methods is None:
            self._methods = frozenset(
                definition.name
                for index in self.indexes.values()
                if traits(index.language).receivers
                for definition in index.definitions
                if definition.kind == "method"
            )
        return self._methods

    def _property_names(self) -> frozenset[str]:
        if self._properties is None:
            self._properties = frozenset(
                definition.name
                for path in sorted(self.indexes)
                if traits(self.indexes[path].language).receivers
                for definition in self.indexes[path].definitions
                if definition.kind == "method" and any(GETTER.match(decorator) for decorator in definition.decorators)
            )
            if self._properties:
                alternatives = "|".join(re.escape(name) for name in sorted(self._properties))
                self._property_read = re.compile(rf"\.(?:{alternatives})\b")
        return self._properties

    # -- models' managers ----------------------------------------------------------------

    def _manager_edges(self, ref: FunctionRef, call: CallSite, model_text: str, method: str) -> list[Edge]:
        model = self.types.class_named(ref.path, model_text)
        if model is None:
            return []
        for manager in self._manager_classes(model):
            target = self.graph.class_member(manager, method)
            if target is not None:
                return [self._edge(ref, target, call, MANAGER)] if target != ref else []
        if method in _CREATES:
            save = self.graph.class_member(model, "save")
            if save is not None and save != ref:
                edge = self._edge(ref, save, call, CREATED)
                self.classes[edge] = model  # the manager builds an instance of the model itself
                return [edge]
        return []

    def _manager_classes(self, model: FunctionRef) -> tuple[FunctionRef, ...]:
        """The repository classes named where ``objects`` is assigned in the model or its
        nearest repository base that assigns it (manager first, then its queryset)."""
        found = self._managers.get(model)
        if found is not None:
            return found
        result: list[FunctionRef] = []
        queue, seen = [model], set()
        while queue and not result:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            expression = self._manager_expression(current)
            if expression is not None:
                for name in _CLASS_NAME.findall(expression):
                    cls = self.types.class_named(current.path, name)
                    if cls is not None and cls not in result:
                        result.append(cls)
                break
            queue.extend(self.graph.base_classes(current))
        found = self._managers[model] = tuple(result)
        return found

    def _manager_expression(self, cls: FunctionRef) -> str | None:
        definition = self.graph.definition(cls)
        index = self.indexes.get(cls.path)
        if definition is None or index is None:
            return None
        lines = self.types.text_lines(cls.path)
        for number in range(definition.body_start_line, min(definition.end_line, len(lines)) + 1):
            match = _MANAGER_LINE.match(lines[number - 1])
            if match and index.enclosing_definition(number, ("class", "function", "method")) is definition:
                return match.group(1)
        return None

    # -- lookups -------------------------------------------------------------------------

    def _function_calls(self, path: str) -> dict[str, list[CallSite]]:
        table = self._calls.get(path)
        if table is None:
            table = {}
            for call in self.indexes[path].calls:
                if call.enclosing is not None:
                    table.setdefault(call.enclosing, []).append(call)
            self._calls[path] = table
        return table
