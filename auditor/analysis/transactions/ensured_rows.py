"""Ensured rows: a helper with no parameters that makes sure one constant row exists in one
constant state, called again on a path, writes nothing the second time.

The helper's shape (librephotos's ``get_deleted_user``): it binds a registry row
(:mod:`.registry_rows`: ``x = M.objects.get_or_create(k=CONSTANT, ...)[0]``), and its
only database effects are saves of that row each guarded by a test of one field against a
constant, whose arm sets that field to that constant and saves
(``if x.is_active is not False: x.is_active = False; x.save()``). It has no other effect
site, in any arm (an ``else``/``elif`` arm's write is one), and no call it makes (graph,
framework or dispatch edge: ``else: note()``) reaches an effect
(:meth:`~.reach.Reach.reaches_effect`, every edge below followed): what the second call
runs instead of the guarded arm then writes nothing either. Django's
``get_or_create`` reads the row from the database on every call (django/db/models/query.py
``QuerySet.get_or_create``: ``self.get(**kwargs)``, a create only on ``DoesNotExist``), and
``save()`` writes the field's new value (django/db/models/base.py ``Model.save``). Once a
first call has returned, the row exists with the field at the constant, so a second call
with no database write between the two (none on the path; none in a loop around the
second call) finds it and skips the arm: it writes nothing.

Input: a function's path of :class:`~.grading.Step`, its facts and parsed body, the call
graph, every file's facts and the registry rows. Output: :meth:`EnsuredRows.without_repeats`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.transactions import paths
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.grading import DB_EFFECTS, Step
from auditor.analysis.transactions.paths import Body
from auditor.analysis.transactions.reach import Reach
from auditor.analysis.transactions.registry_rows import RegistryRows
from auditor.analysis.transactions.scanning import def_parameters, python_code

# ``x = M.objects.get_or_create(...)[0]``, ``x: M = ...[0]``, ``x, created = ...``.
_REGISTRY_BINDING = re.compile(
    r"^\s*([A-Za-z_]\w*)\s*(?::\s*[\w.]+\s*)?(?:,\s*[A-Za-z_]\w*\s*)?=\s*[\w.]+\.get_or_create\(.*\)\s*(\[\s*0\s*\])?\s*$"
)
_CONSTANT = r"(?:True|False|None|[-+]?\d+|'[^'\\]*'|\"[^\"\\]*\"|[A-Z][\w.]*)"
# The guard of one field against a constant: ``if x.f is not C:``, ``if x.f != C:``, ``if x.f:``, ``if not x.f:``.
_GUARD = re.compile(
    rf"^\s*if\s+(?:(?P<not>not\s+)?(?P<bare>[A-Za-z_]\w*)\.(?P<bare_field>\w+)|(?P<var>[A-Za-z_]\w*)\.(?P<field>\w+)\s*(?:is\s+not|!=)\s*(?P<value>{_CONSTANT}))\s*:\s*$"
)
_ASSIGNMENT = re.compile(rf"^\s*([A-Za-z_]\w*)\.(\w+)\s*=\s*({_CONSTANT})\s*$")
_SAVE = re.compile(r"^\s*([A-Za-z_]\w*)\.save\(\s*(?:update_fields\s*=\s*[\[(]\s*(['\"])(\w+)\2\s*,?\s*[\])])?\s*\)\s*$")
_SAVE_EFFECTS = frozenset({Effect.WRITE, Effect.UPDATE})


class EnsuredRows:
    """Which helpers ensure a constant row's constant state, decided once per helper."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], registry: RegistryRows, reach: Reach) -> None:
        self.graph = graph
        self.reach = reach
        self.facts = facts
        self.registry = registry
        self._ensures: dict[FunctionRef, bool] = {}

    def without_repeats(self, steps: tuple[Step, ...], facts: FileFacts, body: Body | None) -> tuple[Step, ...]:
        """``steps`` less each call into an ensuring helper, made with no arguments, whose
        previous database step on the path is a call into the same helper, when no other
        database step sits in a loop around it."""
        if facts.index.language != "python" or len(steps) < 2:
            return steps
        node = body[0] if body is not None else None
        offset = body[2] if body is not None else 0
        loops = paths.loop_lines(node) if node is not None else []
        kept: list[Step] = []
        last_db: Step | None = None
        for step in steps:
            if not any(effect in DB_EFFECTS for effect in step.effects):
                kept.append(step)
                continue
            repeat = (
                last_db is not None
                and step.callee is not None
                and last_db.callee == step.callee
                and last_db.line < step.line
                and _called_bare(facts, last_db)
                and _called_bare(facts, step)
                and self.ensures(step.callee)
                and not _other_writes_in_loop(step, steps, loops, offset)
            )
            if not repeat:
                kept.append(step)
                last_db = step
        return tuple(kept)

    def ensures(self, ref: FunctionRef) -> bool:
        """Whether ``ref`` takes no parameters, binds a registry row, its only database
        effects are guarded constant saves of that row, and no call it makes (graph,
        framework or dispatch edge, in any arm: ``else``/``elif`` included) reaches an
        effect (:meth:`~.reach.Reach.reaches_effect`)."""
        found = self._ensures.get(ref)
        if found is None:
            found = self._ensures[ref] = self._compute_ensures(ref)
        return found

    def _compute_ensures(self, ref: FunctionRef) -> bool:
        definition = self.graph.definition(ref)
        facts = self.facts.get(ref.path)
        if definition is None or facts is None:
            return False
        header = "\n".join(facts.line_text(line) for line in range(definition.start_line, definition.body_start_line))
        if def_parameters(header[header.find("def ") :]).strip():
            return False  # a parameter may key another row or state
        if any(self.reach.reaches_effect(edge.callee) for edge in self.reach.callees(ref)):
            return False  # a project function it calls (an ``else: note()``) may write on every call
        rows: set[str] = set()
        guarded_saves = 0
        for site in facts.sites.get(ref, ()):
            text = facts.line_text(site.call.line)
            binding = _REGISTRY_BINDING.match(text)
            if binding is not None and self.registry.site(ref, site):
                if not (binding.group(2) or "," in text.split("=", 1)[0]):
                    return False  # the (row, created) pair itself, not the row
                rows.add(binding.group(1))
                continue
            if site.effect not in _SAVE_EFFECTS or not _guarded_save(facts, site.call.line, rows):
                return False
            guarded_saves += 1
        return bool(rows) and guarded_saves > 0


def _guarded_save(facts: FileFacts, line: int, rows: set[str]) -> bool:
    """Whether the save at ``line`` is ``x.save()`` of a row in ``rows`` inside an ``if`` that
    tests one field of ``x`` against a constant, whose arm only sets that field to that
    constant and saves."""
    save = _SAVE.match(facts.line_text(line))
    if save is None or save.group(1) not in rows:
        return False
    indent = _indent(facts.line_text(line))
    number = line - 1
    while number > 0 and (not facts.line_text(number).strip() or _indent(facts.line_text(number)) >= indent):
        number -= 1
    guard = _GUARD.match(python_code(facts.line_text(number))) if number > 0 else None
    if guard is None:
        return False
    if guard.group("bare") is not None:
        variable, field, value = guard.group("bare"), guard.group("bare_field"), "True" if guard.group("not") else "False"
    else:
        variable, field, value = guard.group("var"), guard.group("field"), guard.group("value")
    if variable != save.group(1) or (save.group(3) is not None and save.group(3) != field):
        return False
    arm: list[int] = []
    for number_in_arm in range(number + 1, len(facts.lines) + 1):
        text = facts.line_text(number_in_arm)
        if text.strip() and _indent(text) < indent:
            break
        if text.strip():
            arm.append(number_in_arm)
    for n in arm:
        text = python_code(facts.line_text(n))
        if n == line:
            continue
        assigned = _ASSIGNMENT.match(text)
        if assigned is None or assigned.groups() != (variable, field, value):
            return False
    return True


def _called_bare(facts: FileFacts, step: Step) -> bool:
    """Whether ``step``'s line calls its callee with no arguments."""
    assert step.callee is not None
    name = re.escape(step.callee.qualname.rsplit(".", 1)[-1])
    return re.search(rf"(?<![\w.]){name}\(\s*\)", python_code(facts.line_text(step.line))) is not None


def _other_writes_in_loop(step: Step, steps: tuple[Step, ...], loops: list[tuple[int, int]], offset: int) -> bool:
    """Whether a loop around ``step`` holds another database step of the path (it would run
    between one iteration's call and the next)."""
    around = [(low, high) for low, high in loops if low <= step.line - offset <= high]
    return any(
        other is not step and any(e in DB_EFFECTS for e in other.effects) and any(low <= other.line - offset <= high for low, high in around)
        for other in steps
    )


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())
