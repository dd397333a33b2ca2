"""Whether the serializer classes read for a save are all it may run
(:mod:`.framework_calls`): a view's ``get_serializer_class`` that returns only class names
(or ``super().get_serializer_class()``), a hand-built serializer variable bound once. Where
they may be incomplete (a dict lookup, ``return cls``, a variable bound in both branches of
an ``if``) the save carries no class and the shared ``save`` reaches every subclass's
``create``/``update`` (:mod:`.serializer_edges`).

Inputs: the call graph and the per-file facts. Output: :func:`view_serializers`,
:func:`getter_names_all` and :func:`bindings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.transactions.facts import FileFacts

_RETURN = re.compile(r"^\s*return\b")
_RETURNED_NAME = re.compile(r"^\s*return\s+([A-Za-z_][\w.]*)\s*(?:#.*)?$")
_RETURNED_SUPER = re.compile(r"^\s*return\s+super\(\)\.get_serializer_class\(\)\s*(?:#.*)?$")
_RETURNED_ATTRIBUTE = re.compile(r"^\s*return\s+self\.serializer_class\s*(?:#.*)?$")
_SERIALIZER_ATTRIBUTE = re.compile(r"^\s+serializer_class\s*=\s*([A-Za-z_][\w.]*)\s*(?:#.*)?$")
_RETURNED_CLASS = re.compile(r"\breturn\s+([A-Za-z_][\w.]*)\s*(?:#.*)?$")


def view_serializers(graph: CallGraph, facts: Mapping[str, FileFacts], view: FunctionRef) -> tuple[tuple[FunctionRef, ...], bool]:
    """The serializer classes a view saves through (its inherited ``serializer_class``, then
    the classes its ``get_serializer_class`` returns by name), and whether they are all it
    may save through (:func:`getter_names_all`)."""
    names: list[tuple[str, str]] = []
    for cls in _lineage(graph, view):
        names += [(cls.path, name) for name in _class_lines(graph, facts, cls, _SERIALIZER_ATTRIBUTE)]
        if names:
            break
    getter = graph.class_member(view, "get_serializer_class")
    if getter is not None:
        names += [(getter.path, name) for name in _class_lines(graph, facts, getter, _RETURNED_CLASS)]
    found: list[FunctionRef] = []
    for path, name in names:
        ref = graph.resolve(path, name)
        definition = graph.definition(ref) if ref is not None else None
        if ref is not None and definition is not None and definition.kind == "class" and ref not in found:
            found.append(ref)
    return tuple(found), getter_names_all(graph, facts, getter)


def _class_lines(graph: CallGraph, facts: Mapping[str, FileFacts], ref: FunctionRef, pattern: re.Pattern[str]) -> list[str]:
    """The names ``pattern`` reads on the lines of a definition."""
    definition = graph.definition(ref)
    file_facts = facts.get(ref.path)
    if definition is None or file_facts is None:
        return []
    matches = (pattern.search(file_facts.line_text(line)) for line in range(definition.start_line, definition.end_line + 1))
    return [match.group(1) for match in matches if match is not None]


def _lineage(graph: CallGraph, cls: FunctionRef) -> list[FunctionRef]:
    """The class, then its repository bases breadth-first (the nearest first)."""
    order, queue = [cls], [cls]
    while queue:
        for base in graph.base_classes(queue.pop(0)):
            if base not in order:
                order.append(base)
                queue.append(base)
    return order


def getter_names_all(graph: CallGraph, facts: Mapping[str, FileFacts], getter: FunctionRef | None) -> bool:
    """Whether every ``return`` of a view's ``get_serializer_class`` (None: it has none)
    is a class name the graph resolves, ``super().get_serializer_class()`` or
    ``self.serializer_class`` (what DRF's own returns: rest_framework/generics.py,
    ``GenericAPIView.get_serializer_class``), or a library's class imported by name (a
    fallback ``return Serializer``: its ``save`` runs the library's ``create``/``update``,
    none of the project's): then the classes it names, with ``serializer_class``, are all
    the project's it may return."""
    definition = graph.definition(getter) if getter is not None else None
    file_facts = facts.get(getter.path) if getter is not None else None
    if getter is None or definition is None or file_facts is None:
        return getter is None
    for line in range(definition.start_line, definition.end_line + 1):
        text = file_facts.line_text(line)
        if not _RETURN.match(text) or _RETURNED_SUPER.match(text) or _RETURNED_ATTRIBUTE.match(text):
            continue
        named = _RETURNED_NAME.match(text)
        ref = graph.resolve(getter.path, named.group(1)) if named else None
        found = graph.definition(ref) if ref is not None else None
        if named and ref is None and _imported(file_facts, named.group(1)):
            continue  # a library's class: no project create/update behind its save
        if found is None or found.kind != "class":
            return False
    return True


def _imported(facts: FileFacts, name: str) -> bool:
    """Whether ``name`` (its first part) is bound by a ``from module import name`` of the file."""
    head = name.split(".", 1)[0]
    return any(item.name is not None and (item.alias or item.name) == head for item in facts.index.imports)


def bindings(graph: CallGraph, facts: FileFacts, function: FunctionRef, name: str) -> int:
    """How many lines of ``function`` bind the variable ``name`` (``name = ...``, a tuple
    target, ``name := ...``, ``as name``, ``for name in``); a keyword argument on a line of
    its own (``name=value,``) is none."""
    definition = graph.definition(function)
    if definition is None:
        return 0
    word = re.escape(name)
    binds = re.compile(
        rf"^\s*(?:[\w.\[\]]+\s*,\s*)*\(?{word}\s*(?:,\s*[\w.\[\]]+\s*)*\)?\s*(?::[^=]+)?=(?!=)"
        rf"|\b{word}\s*:=|\bas\s+{word}\b|\bfor\s+(?:\w+\s*,\s*)*{word}\b"
    )
    lines = (facts.line_text(line) for line in range(definition.start_line, definition.end_line + 1))
    return sum(1 for text in lines if binds.search(text) and not text.rstrip().endswith(","))
