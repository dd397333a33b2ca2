"""The key under which a ``x.save(...)`` counts once with another save on its path
(:func:`~.grading.saved_once`): the same object, bound the same number of times above the
save, in the same innermost loop.

Inputs: the call graph (a function's definition lines), a file's facts and the save's call
site. Output: the key, or None when the save counts on its own.
"""

from __future__ import annotations

from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.name_bindings import FunctionBindings, function_bindings
from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.index.model import CallSite


class SavedRows:
    """Save keys per function; each function's bindings are parsed once."""

    def __init__(self, graph: CallGraph) -> None:
        self.graph = graph
        self._bindings: dict[FunctionRef, FunctionBindings | None] = {}
        """Each function's name bindings and loops (:mod:`.name_bindings`)."""

    def key(self, ref: FunctionRef, facts: FileFacts, call: CallSite) -> str | None:
        """The key of ``call`` (a ``x.save(...)`` in ``ref``): the object saved, how many
        times the function bound it (or a prefix of it) above the call, and the innermost
        loop holding the call. A save of one name across a rebinding (``order = Order(...)``
        again: a second row), in two loops (different rows each iteration) or out of a loop
        and in one thus keys apart. None (counts on its own) for a save narrowed by
        ``update_fields``: fields set after it stay unsaved until the next full save
        (django/db/models/base.py ``Model.save``: "only the fields named in update_fields
        are updated"), and where the function's bindings are not known."""
        if "update_fields" in call.arguments:
            return None
        saved = call.callee.rsplit(".", 1)[0] if "." in call.callee else ""
        if not saved or not all(part.isidentifier() for part in saved.split(".")):
            return None
        if ref not in self._bindings:
            definition = self.graph.definition(ref)
            python = facts.index.language == "python" and definition is not None
            lines = facts.lines[definition.start_line - 1 : definition.end_line] if python else []
            self._bindings[ref] = function_bindings(lines, definition.start_line) if python else None
        bindings = self._bindings[ref]
        if bindings is None:
            return None
        return f"{saved}@{bindings.bound_before(saved, call.line)}@{bindings.loop_of(call.line)}"
