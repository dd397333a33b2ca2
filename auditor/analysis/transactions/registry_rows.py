"""Registry rows: get-or-create writes of one row keyed by constants, set aside from the
business writes a sequence counts.

A registry row is found or made by an idempotent get-or-create whose every
argument is a constant (a literal, a module or class constant): every call finds or makes
the same row, and nothing in it comes from the request. A failure after it leaves a row
the next call would have made anyway, so it neither counts in a title's write count nor
makes a multi-write sequence. Two shapes are recognised, from what the code says:

- Django's ``M.objects.get_or_create(...)`` whose keyword arguments (``defaults`` too) are
  all constants (``update_or_create`` is none: it rewrites an existing row's state on every
  call, so a failure after it leaves that change behind);
- a get-or-create helper: ``x = M.<lookup>(k=v, ...)`` (or a singleton's ``M.query.first()``), then ``if x is None:`` (or ``if not
  x:``) and ``x = M.create(k=v, ...)`` (or ``return M.create(...)``) with the lookup's keys
  among the create's, every value a constant or a parameter of the helper. A function whose
  every effect is such a create, or a call into a registry helper whose parameters it
  passes constants or its own parameters, is itself one (``type_named(name)`` ->
  ``shot_type()`` calling ``type_named("Shot")``).

A call into a helper is a registry row where every parameter its keys depend on receives a
constant. Anything else stays a business write: a key or value from a form, a user, a
variable, an f-string; a related manager's ``get_or_create`` (the row belongs to its owner);
a helper with any other effect.

Inputs: the call graph, the per-file facts, reachability (callees and their call sites) and
call arguments. Output: :meth:`RegistryRows.site` and :meth:`RegistryRows.call`, and the
reason a finding's explanation gives (:data:`REASON`), with the rows set aside along a
path (:meth:`RegistryRows.set_aside_along`, noted by the ``sets_aside_*`` forms).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.facts import FileFacts, Site
from auditor.analysis.transactions.grading import Step
from auditor.analysis.transactions.reach import Reach
from auditor.analysis.transactions.set_aside import SetAside
from auditor.index.model import CallSite

REASON = "registry rows (an idempotent get-or-create keyed by constants only: the same row on every call, holding no request data)"
"""Why a finding's explanation sets the registry rows on its path aside."""

_GET_OR_CREATE = "get_or_create"
# A constant value: a literal (no f-string), or a module or class constant (``KIND``, ``Kind.CODE``).
_CONSTANT = re.compile(
    r"""[-+]?\d[\d_.]*|True|False|None|[bru]?'[^'\\]*'|[bru]?"[^"\\]*"|(?:[A-Za-z_]\w*\.)*[A-Z][A-Z0-9_]*[A-Z0-9]"""
)
# ``x = M.get_by(k=v)`` (``get``, ``filter_by``, ``filter``; ``.first()``...), or a singleton's ``x = M.query.first()``.
_LOOKUP = re.compile(
    r"^\s*(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<model>[A-Z]\w*)\.(?:objects\.|query\.)?"
    r"(?:(?:get_by|get|filter_by|filter)\((?P<keys>.*)\)(?:\.(?:first|one_or_none|one)\(\))?|first\(\))\s*$"
)
_GUARD = r"^\s*if\s+(?:not\s+{var}|{var}\s+is\s+None)\s*:\s*$"
_CREATE = r"^\s*(?:{var}\s*=|return)\s*{model}\.(?:objects\.)?create\((?P<values>.*)\)\s*$"
_ARM_LINES = 3  # lines of the guarded arm read for the create


class RegistryRows:
    """Which effects of the analysed code are registry rows, decided once per function."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], reach: Reach, arguments: Arguments) -> None:
        self.graph = graph
        self.facts = facts
        self.reach = reach
        self.arguments = arguments
        self._keys: dict[FunctionRef, frozenset[str] | None] = {}
        self._creates: dict[FunctionRef, dict[int, frozenset[str]]] = {}
        self._active: set[FunctionRef] = set()
        self._set_aside = SetAside()

    def sets_aside_site(self, ref: FunctionRef, site: Site, text: str) -> bool:
        """:meth:`site`, noting the site (as ``text``) when it is set aside."""
        found = self.site(ref, site)
        if found:
            self._set_aside.note(ref, site.call.line, text)
        return found

    def sets_aside_call(self, edge: Edge, call: CallSite | None) -> bool:
        """:meth:`call`, noting the call in its caller when it is set aside."""
        found = self.call(edge, call)
        if found:
            self._set_aside.note(edge.caller, edge.line, f"calls {edge.callee.qualname}")
        return found

    def set_aside_along(self, ref: FunctionRef, steps: tuple[Step, ...]) -> tuple[str, ...]:
        """The registry rows set aside in ``ref`` and along its path ``steps`` (:meth:`.SetAside.along`)."""
        return self._set_aside.along(ref, steps)

    def site(self, ref: FunctionRef, site: Site) -> bool:
        """Whether ``ref``'s own effect ``site`` is a registry row: a Django get-or-create
        whose arguments are all constants, or a helper's guarded create with constant values."""
        if site.effect is Effect.UPSERT and site.call.name == _GET_OR_CREATE and site.orm == "rows":
            return self._constant_arguments(site.call.arguments, frozenset()) is not None
        return self._creates_of(ref).get(site.call.line) == frozenset()

    def call(self, edge: Edge, call: CallSite | None) -> bool:
        """Whether the call behind ``edge`` writes only a registry row: it is the guarded
        create of a constant row, or a call into a registry helper that passes a constant
        to every parameter the helper's keys depend on. A callee with no effect is none."""
        if not self.reach.reaches_effect(edge.callee):
            return False
        if self._creates_of(edge.caller).get(edge.line) == frozenset():
            return True
        return call is not None and self._bound(edge.callee, call, frozenset()) == frozenset()

    def keys(self, ref: FunctionRef) -> frozenset[str] | None:
        """The parameters of ``ref`` that, all passed constants, make every effect it has a
        registry row (empty: every call is one); None when ``ref`` is no registry helper."""
        if ref in self._keys:
            return self._keys[ref]
        if ref in self._active:
            return None  # recursion: not the shape of a helper
        self._active.add(ref)
        try:
            found = self._compute_keys(ref)
        finally:
            self._active.discard(ref)
        self._keys[ref] = found
        return found

    def _compute_keys(self, ref: FunctionRef) -> frozenset[str] | None:
        facts = self.facts.get(ref.path)
        if facts is None or not self.reach.reaches_effect(ref):
            return None
        parameters = frozenset(name for name, _ in self.arguments.parameters(ref))
        creates = self._creates_of(ref)
        keys: set[str] = set()
        effects = 0
        # A site an edge into a function with effects stands for (same line, same name) is
        # judged through that edge.
        through_edges = {
            (edge.line, edge.callee.qualname.rsplit(".", 1)[-1]) for edge in self.reach.callees(ref) if self.reach.reaches_effect(edge.callee)
        }
        for site in facts.sites.get(ref, ()):
            line = site.call.line
            if line in creates:
                keys |= creates[line]
            elif site.effect is Effect.UPSERT and site.call.name == _GET_OR_CREATE and site.orm == "rows":
                used = self._constant_arguments(site.call.arguments, parameters)
                if used is None:
                    return None
                keys |= used
            elif (line, site.call.name) not in through_edges:
                return None  # an effect of another kind: not a helper
            effects += 1
        for edge in self.reach.callees(ref):
            if not self.reach.reaches_effect(edge.callee):
                continue
            effects += 1
            if edge.line in creates:
                keys |= creates[edge.line]
                continue
            call = self.reach.call_for(edge)
            used = self._bound(edge.callee, call, parameters) if call is not None else None
            if used is None:
                return None
            keys |= used
        return frozenset(keys) if effects else None

    def _bound(self, callee: FunctionRef, call: CallSite, parameters: frozenset[str]) -> frozenset[str] | None:
        """The caller's ``parameters`` a call into a registry helper passes to the helper's
        keys (empty: all constants); None when ``callee`` is no helper or a key receives
        anything else."""
        keys = self.keys(callee)
        if keys is None:
            return None
        if not keys:
            return keys
        passed = self.arguments.passed(call.arguments)
        if passed is None:
            return None
        keywords, positional = passed
        values = [argument.strip() for argument in split_arguments(call.arguments) if argument.strip()][:positional]
        used: set[str] = set()
        for position, (name, default) in enumerate(self.arguments.parameters(callee)):
            if name not in keys:
                continue
            value = values[position] if position < len(values) else keywords.get(name, default)
            if value is None:
                return None
            if value in parameters:
                used.add(value)
            elif not _CONSTANT.fullmatch(value):
                return None
        return frozenset(used)

    def _creates_of(self, ref: FunctionRef) -> dict[int, frozenset[str]]:
        """The lines of ``ref`` that create the row a lookup just missed (the helper shape),
        each with the parameters its values use; kept per function."""
        found = self._creates.get(ref)
        if found is None:
            found = self._creates[ref] = self._find_creates(ref)
        return found

    def _find_creates(self, ref: FunctionRef) -> dict[int, frozenset[str]]:
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        if facts is None or definition is None:
            return {}
        parameters = frozenset(name for name, _ in self.arguments.parameters(ref))
        creates: dict[int, frozenset[str]] = {}
        for number in range(definition.body_start_line, definition.end_line):
            lookup = _LOOKUP.match(facts.line_text(number))
            if lookup is None or not re.match(_GUARD.format(var=lookup["var"]), facts.line_text(number + 1)):
                continue
            create = re.compile(_CREATE.format(var=lookup["var"], model=lookup["model"]))
            for line in range(number + 2, min(number + 2 + _ARM_LINES, definition.end_line + 1)):
                matched = create.match(facts.line_text(line))
                if matched is None:
                    continue
                used = self._same_row(lookup["keys"] or "", matched["values"], parameters)
                if used is not None:
                    creates[line] = used
                break
        return creates

    def _same_row(self, lookup: str, values: str, parameters: frozenset[str]) -> frozenset[str] | None:
        """The ``parameters`` a create's values use when it makes the row the lookup looked
        for (every lookup key among its keyword arguments, with the same value; no key: a
        table's one row) from constants and those parameters only; None otherwise."""
        looked = self.arguments.passed(lookup)
        created = self.arguments.passed(values)
        if looked is None or created is None or looked[1] or created[1] or (lookup.strip() and not looked[0]):
            return None  # unpacked, positional (``filter(M.name == x)``): which row is not known
        if any(created[0].get(key) != value for key, value in looked[0].items()):
            return None
        return self._constant_arguments(values, parameters)

    def _constant_arguments(self, arguments: str, parameters: frozenset[str]) -> frozenset[str] | None:
        """The ``parameters`` keyword ``arguments`` use when each value is a constant, a
        dict of constants (``defaults={...}``) or one of ``parameters``; None when any is
        something else or an argument is positional or unpacked."""
        passed = self.arguments.passed(arguments)
        if passed is None or passed[1] or not passed[0]:
            return None
        used: set[str] = set()
        for value in passed[0].values():
            for item in _values(value):
                if item in parameters:
                    used.add(item)
                elif not _CONSTANT.fullmatch(item):
                    return None
        return frozenset(used)


def _values(value: str) -> list[str]:
    """The values of a dict literal's items (keys must be constants too), or ``[value]``."""
    if not (value.startswith("{") and value.endswith("}")):
        return [value]
    items: list[str] = []
    for item in split_arguments(value[1:-1]):
        key, colon, inner = item.partition(":")
        if not colon:
            return [value]  # a set literal or ``**spread``: not a dict of constants
        items += [key.strip(), inner.strip()]
    return items
