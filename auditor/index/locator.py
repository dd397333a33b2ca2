"""The function index as grounding asks it: which function holds a line, and where a named
function is (``auditor.findings.grounding.FunctionLocator``, implemented over ``FileIndex``)."""

from __future__ import annotations

from collections.abc import Mapping

from auditor.index.model import FileIndex


class IndexLocator:
    """FunctionLocator over the tree-sitter index: which function holds a line, and where a function is."""

    def __init__(self, indexes: Mapping[str, FileIndex]):
        self._indexes = indexes

    def enclosing_function(self, path: str, line: int) -> str | None:
        index = self._indexes.get(path)
        definition = index.enclosing_definition(line) if index else None
        return definition.qualname if definition else None

    def function_lines(self, path: str, function: str) -> tuple[int, int] | None:
        index = self._indexes.get(path)
        if index is None:
            return None
        exact = [d for d in index.definitions if d.qualname == function and d.kind != "class"]
        named = exact or [d for d in index.definitions if d.name == function.rsplit(".", 1)[-1] and d.kind != "class"]
        if len(named) != 1:
            return None
        return named[0].start_line, named[0].end_line
