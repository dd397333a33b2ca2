"""Classes whose instances may get any attribute: a method stores on ``self`` by a name
the text does not spell (``setattr(self, key, value)``, ``self.__dict__.update(...)``,
``vars(self).update(...)``, ``self.__dict__[key] = ...``). What :mod:`.stored_flags`
knows of an attribute of ``self`` no longer holds when the object's class, one of its
bases, or a class that shares a subclass with it (a mixin) does this anywhere.

Inputs: the call graph (repository bases) and the per-file facts. Output:
:meth:`DynamicStores.reach`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.transactions.facts import FileFacts

_SELF_DICT = r"(?:\bself\s*\.\s*__dict__|\bvars\(\s*self\s*\))"
_DYNAMIC = re.compile(
    rf"\bsetattr\(\s*self\s*,\s*(?![\s'\"])"  # a name not written as a plain string
    rf"|{_SELF_DICT}\s*\.\s*(?:update|setdefault)\s*\("
    rf"|{_SELF_DICT}\s*\[(?!\s*['\"][^'\"]*['\"]\s*\])[^\]]*\]\s*=(?!=)"
)


class DynamicStores:
    """The classes that store attributes on ``self`` by computed names, read once."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts]) -> None:
        self.graph = graph
        self.facts = facts
        self._classes: frozenset[FunctionRef] | None = None
        self._ancestors: dict[FunctionRef, frozenset[FunctionRef]] = {}
        self._reached: dict[FunctionRef, bool] = {}

    def reach(self, cls: FunctionRef) -> bool:
        """Whether an instance of ``cls`` (or of a subclass) may get an attribute by a
        computed name: a method of one of the classes in that instance's bases does it."""
        if cls not in self._reached:
            dynamic = self._dynamic_classes()
            self._reached[cls] = bool(dynamic) and bool(dynamic & self._relatives(cls))
        return self._reached[cls]

    def _dynamic_classes(self) -> frozenset[FunctionRef]:
        if self._classes is None:
            found: set[FunctionRef] = set()
            for path, facts in self.facts.items():
                if "self" not in facts.text or facts.index.language != "python":
                    continue
                for match in _DYNAMIC.finditer(facts.text):
                    owner = _enclosing_class(facts, facts.text.count("\n", 0, match.start()) + 1)
                    if owner is not None:
                        found.add(FunctionRef(path, owner))
            self._classes = frozenset(found)
        return self._classes

    def _relatives(self, cls: FunctionRef) -> frozenset[FunctionRef]:
        """Every class an instance of ``cls`` or of one of its subclasses is an instance of."""
        related: set[FunctionRef] = set(self._ancestors_of(cls))
        for path, facts in self.facts.items():
            for definition in facts.index.definitions:
                if definition.kind == "class":
                    other = FunctionRef(path, definition.qualname)
                    ancestors = self._ancestors_of(other)
                    if cls in ancestors:
                        related |= ancestors
        return frozenset(related)

    def _ancestors_of(self, cls: FunctionRef) -> frozenset[FunctionRef]:
        """``cls`` and its repository bases, transitively."""
        found = self._ancestors.get(cls)
        if found is None:
            seen = {cls}
            pending = [cls]
            while pending:
                for base in self.graph.base_classes(pending.pop()):
                    if base not in seen:
                        seen.add(base)
                        pending.append(base)
            found = self._ancestors[cls] = frozenset(seen)
        return found


def _enclosing_class(facts: FileFacts, line: int) -> str | None:
    """The qualified name of the class whose method holds ``line``, or None."""
    definition = facts.index.enclosing_definition(line)
    classes = {item.qualname: item for item in facts.index.definitions if item.kind == "class"}
    parent = definition.parent if definition is not None else None
    while parent is not None:
        if parent in classes:
            return parent
        parent = parent.rpartition(".")[0] or None
    return None
