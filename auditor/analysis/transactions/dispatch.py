"""Calls the call graph cannot see from the text alone: dynamic dispatch from a base
class's ``self.method()``/``cls.method()`` to the overrides in its repository subclasses
(a GraphQL mutation base calling ``cls.save``, a view base calling
``self.perform_create``), and ``getattr(self, "handle_%s" % action)`` string dispatch to
the class's methods with that prefix; and, given the file texts, calls on receivers whose class
is read from the text (:mod:`.receivers`). Every such edge is approximate.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.receivers import Binding, Receivers
from auditor.index.model import CallSite, FileIndex

_SELF = frozenset({"self", "cls", "this"})
_PREFIX = re.compile(r"""^[rbuRBU]*[fF]?(['"])([A-Za-z_]\w*?)(?:%|\{|\1)""")
_MIN_PREFIX = 3
OVERRIDE = "dispatch to a subclass override"
"""The kind of a base-class self-call's edge into one subclass's override."""
GETATTR = "getattr string dispatch"
"""The kind of a ``getattr(self, "prefix_%s" % name)`` edge into a method with that prefix."""


class Dispatch:
    """Extra, approximate edges from base-class self-calls and ``getattr`` dispatch."""

    def __init__(self, indexes: dict[str, FileIndex] | object, graph: CallGraph, texts: Mapping[str, str] | None = None) -> None:
        self.indexes = indexes
        self.graph = graph
        self._children: dict[FunctionRef, list[FunctionRef]] | None = None
        self._descendants: dict[FunctionRef, tuple[FunctionRef, ...]] = {}
        self._lineages: dict[FunctionRef, tuple[FunctionRef, ...]] = {}
        self._calls: dict[str, dict[str, list[CallSite]]] = {}
        self.kinds: dict[Edge, str] = {}
        self.receivers = Receivers(indexes, graph, texts, self.kinds) if texts is not None else None  # type: ignore[arg-type]
        self.constructed = self.receivers.constructed if self.receivers is not None else None

    def _children_map(self) -> dict[FunctionRef, list[FunctionRef]]:
        if self._children is None:
            children: dict[FunctionRef, list[FunctionRef]] = defaultdict(list)
            for path in sorted(self.indexes):  # type: ignore[call-overload]
                for definition in self.indexes[path].definitions:  # type: ignore[index]
                    if definition.kind == "class" and definition.bases:
                        ref = FunctionRef(path, definition.qualname)
                        for base in self.graph.base_classes(ref):
                            children[base].append(ref)
            self._children = children
        return self._children

    def descendants(self, cls: FunctionRef) -> tuple[FunctionRef, ...]:
        """Every repository class deriving from ``cls``, directly or not, sorted."""
        if cls not in self._descendants:
            children = self._children_map()
            seen: set[FunctionRef] = set()
            stack = list(children.get(cls, ()))
            while stack:
                child = stack.pop()
                if child not in seen:
                    seen.add(child)
                    stack.extend(children.get(child, ()))
            self._descendants[cls] = tuple(sorted(seen))
        return self._descendants[cls]

    def lineage(self, cls: FunctionRef) -> tuple[FunctionRef, ...]:
        """``cls`` and its repository ancestors, nearest first (breadth-first over bases):
        the order in which a call on ``cls`` finds a method."""
        known = self._lineages.get(cls)
        if known is not None:
            return known
        order: list[FunctionRef] = []
        queue = [cls]
        while queue:
            current = queue.pop(0)
            if current not in order:
                order.append(current)
                queue.extend(self.graph.base_classes(current))
        found = self._lineages[cls] = tuple(order)
        return found

    def override_below(self, cls: FunctionRef, base: FunctionRef, method: str) -> FunctionRef | None:
        """The definition of ``method`` a call on ``cls`` finds before reaching ``base``
        (nearest in ``cls``'s lineage below ``base``), or None when ``cls`` inherits it."""
        lineage = self.lineage(cls)
        below_base = lineage[: lineage.index(base)] if base in lineage else lineage
        for item in below_base:
            override = FunctionRef(item.path, f"{item.qualname}.{method}")
            if self.graph.definition(override) is not None:
                return override
        return None

    def nearest(self, cls: FunctionRef, method: str) -> FunctionRef | None:
        """The definition of ``method`` a call on ``cls`` finds (its MRO, nearest first)."""
        for item in self.lineage(cls):
            found = FunctionRef(item.path, f"{item.qualname}.{method}")
            if self.graph.definition(found) is not None:
                return found
        return None

    def receiver_after(self, edge: Edge, callee_text: str | None, receiver: FunctionRef | None) -> FunctionRef | None:
        """The class ``self`` has inside ``edge.callee`` (it or a subclass of it) when the
        caller's ``self`` has class ``receiver`` (None: unknown): the subclass an override
        edge enters, the caller's class (or ``receiver``) for a ``self.m()``/``cls.m()``/
        ``super().m()`` call, the class a ``Class.m()`` call names. None when the call says
        nothing of it; for ``x.m()``, the class of the object ``x`` holds (the class a
        receiver edge was resolved by, :attr:`.Receivers.classes`, else
        :meth:`_variable_class`). Along a chain, a base method's self-calls then resolve by
        this class's MRO (:meth:`nearest`) or to its subclasses' overrides, never a sibling's."""
        callee_class = class_of(edge.callee)
        if self.kinds.get(edge) == OVERRIDE:
            return receiver if receiver is not None and callee_class in self.lineage(receiver) else callee_class
        if callee_text is None or self.graph.definition(callee_class) is None:
            return None
        head = strip_arguments(callee_text).split(".")[0]
        typed = self.receivers.classes.get(edge) if self.receivers is not None else None
        if typed is not None:
            found = typed  # the receiver class the edge was resolved by (``x = M.objects.get(...)``)
        elif head in _SELF or head == "super":
            caller_class = class_of(edge.caller) if self.graph.definition(class_of(edge.caller)) is not None else None
            found = receiver or caller_class
        elif "." in callee_text and head[:1].isupper():
            found = self.graph.resolve(edge.caller.path, strip_arguments(callee_text).rsplit(".", 1)[0])
        elif strip_arguments(callee_text).count(".") == 1:
            found = self._variable_class(edge, head)
        else:
            return None
        return found if found is not None and found != callee_class and callee_class in self.lineage(found) else None

    def _variable_class(self, edge: Edge, variable: str) -> FunctionRef | None:
        """The class of what ``variable`` holds at ``edge``'s call, in a Python file: bound
        once to a constructor call, locally or at module level (:mod:`.constructed_names`)."""
        definition = self.graph.definition(edge.caller)
        index = self.indexes.get(edge.caller.path)  # type: ignore[attr-defined]
        if self.constructed is None or definition is None or index is None or index.language != "python" or variable in _SELF:
            return None  # receivers are read from Python text only
        return self.constructed.class_at(edge.caller.path, definition, variable, edge.line)

    def _function_calls(self, path: str) -> dict[str, list[CallSite]]:
        table = self._calls.get(path)
        if table is None:
            table = defaultdict(list)
            for call in self.indexes[path].calls:  # type: ignore[index]
                if call.enclosing is not None:
                    table[call.enclosing].append(call)
            self._calls[path] = table
        return table

    def edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """The extra edges out of ``ref``: dispatch edges (methods only), then receiver edges."""
        typed = self.receivers.edges(ref) if self.receivers is not None else ()
        return tuple(sorted(set(self._class_edges(ref)) | set(typed)))

    def stands_for(self, edge: Edge) -> str | None:
        """The last name of the call a receiver edge replaces at its line (its callee's path
        counts there instead of the call's own effect), or None for other edges."""
        return self.receivers.call_names.get(edge) if self.receivers is not None else None

    def binding(self, edge: Edge) -> Binding | None:
        """The parameter and class a receiver edge out of ``s = parameter(...); s.m()`` runs for."""
        return self.receivers.bindings.get(edge) if self.receivers is not None else None

    def passed_at(self, callee: FunctionRef, caller: FunctionRef, arguments: str, parameter: str) -> FunctionRef | None:
        """The repository class a call (its ``arguments``) passes for ``callee``'s ``parameter``."""
        return self.receivers.passed.passed_at(callee, caller, arguments, parameter) if self.receivers is not None else None

    def _class_edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        definition = self.graph.definition(ref)
        if definition is None or definition.parent is None:
            return ()
        owner = FunctionRef(ref.path, definition.parent)
        owner_definition = self.graph.definition(owner)
        if owner_definition is None or owner_definition.kind != "class":
            return ()
        found: list[Edge] = []
        for call in self._function_calls(ref.path).get(ref.qualname, ()):
            parts = strip_arguments(call.callee).split(".")
            if len(parts) == 2 and parts[0] in _SELF:
                for target in self._overrides(owner, parts[1]):
                    found.append(self._edge(ref, target, call.line, OVERRIDE))
            elif parts == ["getattr"]:
                for target in self._prefixed(owner, call):
                    found.append(self._edge(ref, target, call.line, GETATTR))
        return tuple(sorted(set(found)))

    def _edge(self, caller: FunctionRef, callee: FunctionRef, line: int, kind: str) -> Edge:
        edge = Edge(caller, callee, line, True)
        self.kinds[edge] = kind
        return edge

    def _overrides(self, owner: FunctionRef, name: str) -> list[FunctionRef]:
        targets = []
        for cls in self.descendants(owner):
            member = FunctionRef(cls.path, f"{cls.qualname}.{name}")
            if self.graph.definition(member) is not None:
                targets.append(member)
        return targets

    def _prefixed(self, owner: FunctionRef, call: CallSite) -> list[FunctionRef]:
        arguments = split_arguments(call.arguments)
        if len(arguments) < 2 or arguments[0] not in _SELF:
            return []
        match = _PREFIX.match(arguments[1])
        if match is None or len(match.group(2)) < _MIN_PREFIX:
            return []
        prefix = match.group(2)
        targets = []
        for cls in (owner, *self.descendants(owner)):
            for definition in self.indexes[cls.path].definitions:  # type: ignore[index]
                if definition.parent == cls.qualname and definition.kind == "method" and definition.name.startswith(prefix):
                    targets.append(FunctionRef(cls.path, definition.qualname))
        return targets


def class_of(method: FunctionRef) -> FunctionRef:
    """The class a method is defined in (its qualname less the last name)."""
    return FunctionRef(method.path, method.qualname.rsplit(".", 1)[0])


def lineage_has_line(
    graph: CallGraph, facts: Mapping[str, FileFacts], classes: Iterable[FunctionRef], test: Callable[[str], bool]
) -> bool:
    """Whether a line of one of ``classes`` or of their repository bases, at any depth,
    passes ``test``."""
    pending, seen = list(classes), set()
    while pending:
        cls = pending.pop()
        definition = graph.definition(cls)
        file_facts = facts.get(cls.path)
        if cls in seen or definition is None or file_facts is None:
            continue
        seen.add(cls)
        if any(test(file_facts.line_text(line)) for line in range(definition.start_line, definition.end_line + 1)):
            return True
        pending.extend(graph.base_classes(cls))
    return False
