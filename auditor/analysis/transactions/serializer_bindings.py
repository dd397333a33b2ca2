"""Whether the serializer classes read for a save are all it may run
(:mod:`.framework_calls`): a view's ``get_serializer_class`` that returns only class names
(or ``super().get_serializer_class()``), a hand-built serializer variable bound once. Where
they may be incomplete (a dict lookup, ``return cls``, a variable bound in both branches of
an ``if``) the save carries no class and the shared ``save`` reaches every subclass's
``create``/``update`` (:mod:`.serializer_edges`).

Inputs: the call graph and the per-file facts. Output: :func:`getter_names_all` and
:func:`bindings`.
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
