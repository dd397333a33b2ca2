"""Fields unchanged since the object was built: a model that snapshots a field in its
``__init__`` (``self.__original_media_file = self.media_file``) and compares the two in its
``save`` (``if self.media_file != self.__original_media_file:``) runs that arm only when
something set the field in between.

Django builds every instance through the model's ``__init__``: ``QuerySet.create`` with
``obj = self.model(**kwargs)`` before ``obj.save(force_insert=True)``
(django/db/models/query.py), a read with ``Model.from_db`` -> ``cls(*values)``
(django/db/models/base.py). Right after either, each snapshot equals its field. So on a
call into ``save``

- from a manager's ``create(...)``, or
- on an object the caller read from the database (its save site is an update) and bound
  once, with no line between the binding and the save assigning the field, calling through
  it (``x.media_file.save(...)``), calling a method on the object, handing the object on or
  calling ``setattr``,

every such comparison is false, unless ``save`` (or a method it calls on ``self``) sets the
field itself. A local of ``save`` bound once to a disjunction of those comparisons
(``changed = (self.a != self.__a or self.b != self.__b)``) is false too.

Inputs: the call graph and per-file facts. Output: :meth:`Snapshots.unchanged`, markers
for a path's ``off`` set (:func:`unchanged_marker` of a comparison or of such a local),
which the path walk reads on each term of an ``and`` chain (:mod:`.paths`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.index.model import CallSite
from auditor.analysis.transactions.dispatch import class_of, lineage_has_line
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.paths import EXISTING_ROW, FRESH_ROW, UNCHANGED
from auditor.analysis.transactions.scanning import python_code
from auditor.analysis.transactions.serializer_bindings import bindings

_SETS = re.compile(r"\s*(?:\[[^\]]*\]\s*)?(?:=(?!=)|\.\w+\s*\(|(?:[-+*/%@&|^]|//|\*\*|>>|<<)=)")
"""What follows an attribute its statement sets: ``=``, any augmented operator, or a call
on it (a file field's ``save``)."""
_ASSIGNMENT = re.compile(r"(?<![=!<>:])=(?!=)")
_TARGET_LINE = re.compile(r"^\s*[(\[]?\s*$")


def _in_targets(code: str, start: int) -> bool:
    """Whether the text at ``start`` of the line ``code`` may sit in an assignment's target
    list (``a.x, a.y = ...``, ``for a.x in ...``, a target list carried over lines): before
    the line's first ``=`` outside brackets, or the line opens with it followed by a comma
    or a closing bracket. Read generously: a doubtful place counts as a target."""
    depth = 0
    for index, character in enumerate(code):
        if character in "([{":
            depth += 1
        elif character in ")]}":
            depth -= 1
        elif depth <= 0 and character == "=" and _ASSIGNMENT.match(code, index) and index > start:
            return True
    if re.match(r"\s*for\b", code) and " in " in code[start:]:
        return True
    return bool(_TARGET_LINE.match(code[:start])) and re.match(r"[\w.]*\s*[,)\]]", code[start:]) is not None


_SNAPSHOT = re.compile(r"^\s*self\.(\w+)\s*=\s*self\.(\w+)\s*(?:#.*)?$")
_SELF_ASSIGNED = re.compile(r"(?<![\w.])self\.(\w+)\s*(?:\[[^\]]*\])?\s*(?::[^=]+)?=(?!=)")
_SELF_CALL = re.compile(r"(?<![\w.])self\.(\w+)\s*\(")
_LOCAL_BOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(.+)$")
_LOOP = re.compile(r"^\s*(?:for|while)\b")
_KEYED = re.compile(r"(?<![\w.])(?:pk|id)\s*=(?!=)")
_MAX_STATEMENT_LINES = 12


def unchanged_marker(comparison: str) -> str:
    """In a path's ``off`` set: the comparison ``comparison`` (``self.a != self.b``) is false."""
    return UNCHANGED + comparison


class Snapshots:
    """Per model ``save``, the snapshot comparisons a call into it leaves false."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts]) -> None:
        self.graph = graph
        self.facts = facts
        self._pairs: dict[FunctionRef, tuple[tuple[str, str], ...]] = {}

    def row_known(self, edge: Edge, call: CallSite | None, existing: bool, created: bool) -> frozenset[str]:
        """What a call into ``edge.callee`` makes known of the object it saves: a row read from
        the database (``existing``: its "new object only" arms do not run), an instance a
        manager's ``create`` just built (``created``: with no primary key yet, its "existing
        object only" arms do not run, :meth:`_pk_unset`), and the "changed since built"
        tests either leaves false (:meth:`unchanged`)."""
        known = self.unchanged(edge.callee, edge.caller, call, created, existing)
        if existing:
            known |= {EXISTING_ROW}
        if created and call is not None and self._pk_unset(edge, call):
            known |= {FRESH_ROW}
        return known

    def _pk_unset(self, edge: Edge, call: CallSite) -> bool:
        """Whether the instance a manager's ``create`` builds has no primary key before its
        save: no ``pk``/``id`` keyword (nor ``**`` that may hold one) and no field of the
        model or its repository bases declared ``primary_key=True`` (a ``UUIDField`` with a
        default sets one in ``__init__``); only then is ``if self.pk:`` false in its save."""
        if _KEYED.search(call.arguments) or "**" in call.arguments or ".objects." not in call.callee:
            return False
        model = self.graph.resolve(edge.caller.path, call.callee.split(".objects.", 1)[0])
        return model is not None and not lineage_has_line(self.graph, self.facts, [model], lambda text: "primary_key=True" in text)

    def unchanged(self, save: FunctionRef, caller: FunctionRef, call: CallSite | None, created: bool, read: bool) -> frozenset[str]:
        """What is false in ``save`` on this call: the markers of its snapshot comparisons
        and of the locals bound to them (none unless the object was just ``created`` by a
        manager, or ``read`` from the database and left alone until ``call``)."""
        if not (created or read) or save.qualname.rsplit(".", 1)[-1] != "save":
            return frozenset()
        pairs = self._snapshot_pairs(save)
        if not pairs:
            return frozenset()
        fields = {field for field, _ in pairs}
        if read:
            if call is None:
                return frozenset()
            fields &= self._untouched(caller, call, fields)
        found: set[str] = set()
        for field, snapshot in pairs:
            if field in fields:
                found |= {unchanged_marker(f"self.{field} != self.{snapshot}"), unchanged_marker(f"self.{snapshot} != self.{field}")}
        return frozenset(found | self._false_locals(save, found)) if found else frozenset()

    def _snapshot_pairs(self, save: FunctionRef) -> tuple[tuple[str, str], ...]:
        """(field, snapshot) of each ``self.snapshot = self.field`` in the ``__init__`` of
        ``save``'s class, less the fields ``save`` or a method it calls on ``self`` sets."""
        known = self._pairs.get(save)
        if known is not None:
            return known
        cls = class_of(save)
        init = self.graph.class_member(cls, "__init__")
        found: tuple[tuple[str, str], ...] = ()
        if init is not None and class_of(init) == class_of(save) and self.graph.definition(save) is not None:
            pairs = [(match.group(2), match.group(1)) for match in map(_SNAPSHOT.match, self._lines(init)) if match is not None]
            resets = {f"self.{snapshot} = self.{field}" for field, snapshot in pairs}
            assigned = self._assigned(save, resets)
            for match in (_SELF_CALL.search(line) for line in self._lines(save)):
                method = self.graph.class_member(cls, match.group(1)) if match is not None else None
                if method is not None and method != save:
                    assigned |= self._assigned(method, resets)
            snapshots = {snapshot for _, snapshot in pairs}
            found = tuple(sorted(
                (field, snapshot) for field, snapshot in pairs if field not in assigned and snapshot not in assigned and field not in snapshots
            ))  # fmt: skip
        self._pairs[save] = found
        return found

    def _assigned(self, ref: FunctionRef, resets: set[str]) -> set[str]:
        """The ``self`` attributes ``ref`` assigns, on lines other than a snapshot's reset to
        its field (``self.snap = self.field``, which keeps the two equal)."""
        return {name for line in self._lines(ref) if " ".join(line.split()) not in resets for name in _SELF_ASSIGNED.findall(line)}

    def _untouched(self, caller: FunctionRef, call: CallSite, fields: set[str]) -> set[str]:
        """The ``fields`` the caller leaves alone on the object ``call`` saves between its one
        binding and the save (none when it hands the object on or calls a method on it)."""
        root = call.callee.split(".", 1)[0]
        facts = self.facts.get(caller.path)
        definition = self.graph.definition(caller)
        if facts is None or definition is None or call.callee != f"{root}.save" or root in {"self", "cls"}:
            return set()
        if bindings(self.graph, facts, caller, root) != 1:
            return set()
        binding = re.compile(rf"^\s*{re.escape(root)}\s*(?::[^=]+)?=(?!=)")
        lines = range(definition.body_start_line, call.line)
        bound = [line for line in lines if binding.search(facts.line_text(line))]
        if len(bound) != 1:
            return set()
        between = range(bound[0] + 1, call.line)
        if any(_LOOP.match(facts.line_text(line)) for line in between):
            between = range(bound[0] + 1, definition.end_line + 1)  # a later iteration comes back
        use = re.compile(rf"(?<![\w.]){re.escape(root)}\b(\.(\w+))?")
        kept = set(fields)
        for line in between:
            code = python_code(facts.line_text(line))
            if "setattr(" in code:
                return set()
            for match in use.finditer(code):
                attribute = match.group(2)
                rest = code[match.end():]
                if attribute is None or rest.lstrip().startswith("("):
                    return set()  # handed on, rebound or a method called on it
                if attribute in kept and (_SETS.match(rest) or _in_targets(code, match.start())):
                    kept.discard(attribute)  # set, or written through (a file field's save)
        return kept

    def _false_locals(self, save: FunctionRef, markers: set[str]) -> set[str]:
        """The locals of ``save`` bound once to a disjunction of comparisons ``markers`` says false."""
        facts = self.facts.get(save.path)
        definition = self.graph.definition(save)
        if facts is None or definition is None:
            return set()
        found = set()
        for line in range(definition.body_start_line, definition.end_line + 1):
            bound = _LOCAL_BOUND.match(python_code(facts.line_text(line)))
            if bound is None or bound.group(1) == "self" or bindings(self.graph, facts, save, bound.group(1)) != 1:
                continue
            text = bound.group(2)
            for extra in range(line + 1, min(line + _MAX_STATEMENT_LINES, definition.end_line + 1)):
                if text.count("(") <= text.count(")"):
                    break
                text += " " + python_code(facts.line_text(extra)).strip()
            terms = [term.strip(" ()\t") for term in re.split(r"\s+or\s+", text.strip())]
            if terms and all(unchanged_marker(" ".join(term.split())) in markers for term in terms):
                found.add(unchanged_marker(bound.group(1)))  # a marker: the body binds the name, a plain one would be dropped
        return found

    def _lines(self, ref: FunctionRef) -> list[str]:
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is None or definition is None:
            return []
        return [python_code(facts.line_text(line)) for line in range(definition.body_start_line, definition.end_line + 1)]
