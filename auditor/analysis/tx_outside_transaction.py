"""Static tx-outside-transaction analysis: database writes an entry point reaches with no
transaction boundary on the way.

Inputs: the index (``FileIndex`` per path), the file texts, a rule (its ``sinks``,
``boundaries``, ``entry_points`` and ``sql_write`` patterns) and optionally a prebuilt
:class:`~auditor.analysis.callgraph.CallGraph`. Output: a :class:`StaticResult` holding grounded
findings in the same shape as model findings (``found_by=("static",)``) and counters.

What counts:

- A **sink** is a call whose callee text matches ``rule.sinks`` (fnmatch, argument lists
  dropped), or an ``execute``-like call whose SQL (a string literal argument, or a string
  assigned to a name the call passes) matches ``rule.sql_write``. Not sinks: calls on a
  file storage or cache (``default_storage.delete``, ``cache.delete``), a file field's
  ``save(..., save=False)``, and calls that resolve exactly to a repository function
  (``cls.save(...)`` of a mutation class): the writes inside that function are judged
  there, under its own boundaries.
- A **boundary** is a decorator matching ``rule.boundaries`` on a function of the path
  (Java: ignored when the call into it is a self-invocation, because Spring's proxy never
  sees it), a ``with`` block matching ``rule.boundaries`` around the sink or around a call
  on the path, a boundary call whose result is assigned to a variable (Go
  ``tx, err := db.BeginTx(...)``) when the sink runs on that variable or the call on the
  path passes it, a boundary call taking a callback (``db.transaction(trx => ...)``)
  around the sink or call, and Django ``ATOMIC_REQUESTS = True`` for Django/DRF views
  (unless decorated ``non_atomic_requests``).
- A sink is reported when some path from an entry point reaches its function with no
  boundary covering the sink or any call on that path. One finding per function, with the
  shortest such path as its chain (breadth-first from all entry points, so ties break
  deterministically by sorted order).

Severity: one uncovered write gets the rule's severity; several uncovered writes in one
function (partial state on failure) get one level more (``high`` -> ``critical``), and the
title counts them, so they sort first under ``Finding.sort_key``.
Suppression comments are not interpreted here; that is the findings stage's job.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, partial

from auditor.analysis.callgraph import (
    MAIN_FUNCTION,
    MODULE_FUNCTION,
    CallGraph,
    Edge,
    FunctionRef,
    strip_arguments,
)
from auditor.analysis.entrypoints import (
    EntryPoint,
    compile_patterns,
    find_entry_points,
    split_arguments,
)
from auditor.findings.model import SEVERITY_ORDER, ChainStep, Finding, fingerprint
from auditor.index.model import CallSite, FileIndex
from auditor.rules.loader import Rule

FOUND_BY = ("static",)

_EXECUTE_NAMES = frozenset({"execute", "executemany", "executescript", "exec_driver_sql", "query", "raw", "run", "exec"})
_NON_ATOMIC = ("transaction.non_atomic_requests", "non_atomic_requests")
_ATOMIC_REQUESTS = re.compile(r"""(?m)^[^#\n]*['"]?ATOMIC_REQUESTS['"]?\s*[:=]\s*True\b""")
_ASSIGNED_NAME = re.compile(r"^\s*(?:(?:var|let|const|final)\s+)?(?:[\w.<>\[\]]+\s+)?([A-Za-z_]\w*)\s*(?:,\s*\w+\s*)*(?::=|=)(?!=)")
_STRING_START = re.compile(r"""^\s*[rRbBuUfF]{0,2}("{3}|'{3}|"|'|`)""")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_WRAPPER_DEPTH = 4
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_SEVERITIES = tuple(sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.__getitem__))
# Generic sink patterns (``*.save``, ``*.delete``) also match calls that never touch the
# database: file storages (``default_storage.delete``, ``storage.bucket.Object(k).delete``)
# and caches (``cache.delete``), and a Django ``FieldFile.save``/``delete`` told
# ``save=False`` (a model's own ``save`` takes no ``save`` argument).
_NON_DATABASE_RECEIVER = re.compile(r"(?:^|\.)(?:\w*storage|cache|caches|\w+_cache)\.")
_NO_MODEL_SAVE = re.compile(r"\bsave\s*=\s*False\b")
_LANGUAGE_FAMILY = {"tsx": "typescript"}


@dataclass(frozen=True)
class StaticResult:
    """Findings of the static pass and what it looked at.

    ``sinks`` counts every write call found in the rule's languages; ``covered_sinks``
    counts those a boundary covers: inside a boundary in their own function, or in a
    function every entry-point path reaches only through a boundary. Writes no entry
    point reaches count in neither ``covered_sinks`` nor the findings.
    """

    findings: tuple[Finding, ...]
    entry_points: int
    sinks: int
    covered_sinks: int


@dataclass(frozen=True)
class _Region:
    """Lines of one function covered by a boundary, and the transaction variable if any."""

    enclosing: str | None
    start_line: int
    end_line: int
    variable: str | None


class _PatternSet:
    """Compiled fnmatch patterns over callee/decorator text, with a cheap pre-check on the
    last name (most calls in a repository cannot match any pattern)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.regex = compile_patterns(patterns)
        last_names = [pattern.rsplit(".", 1)[-1] for pattern in patterns]
        self.names = frozenset(last_names)
        self.any_name = any(char in name for name in last_names for char in "*?[")

    def matches(self, text: str, name: str | None = None) -> bool:
        """True when ``text`` with argument lists dropped matches a pattern; ``name`` is the
        call's last name when known."""
        if self.regex is None:
            return False
        if name is not None and not self.any_name and name not in self.names:
            return False
        stripped = strip_arguments(text)
        return bool(stripped) and self.regex.match(stripped) is not None


def _escalate(severity: str) -> str:
    position = _SEVERITIES.index(severity) if severity in _SEVERITIES else len(_SEVERITIES) - 1
    return _SEVERITIES[max(position - 1, 0)]


@dataclass(frozen=True)
class _RulePatterns:
    """A rule's sink, boundary and non-atomic-request patterns, compiled once."""

    sinks: _PatternSet
    boundaries: _PatternSet
    non_atomic: _PatternSet


class _FileFacts:
    """Per-file sinks and boundary regions, computed once."""

    def __init__(
        self, path: str, index: FileIndex, text: str, patterns: _RulePatterns, sql_write: re.Pattern[str] | None
    ) -> None:
        self.index = index
        self.text = text
        self.regions: list[_Region] = []
        for block in index.context_blocks:
            if patterns.boundaries.matches(block.expression):
                self.regions.append(_Region(block.enclosing, block.start_line, block.end_line, None))
        block_lines = {(block.start_line, block.enclosing) for block in index.context_blocks}
        for call in index.calls:
            if patterns.boundaries.matches(call.callee, call.name) and (call.line, call.enclosing) not in block_lines:
                self.regions.append(self._call_region(call))
        self.sinks: dict[FunctionRef, list[CallSite]] = {}
        for call in index.calls:
            if self._is_sink(call, patterns, sql_write):
                self.sinks.setdefault(_ref_for(path, index, call), []).append(call)

    def add_wrapped_regions(self, is_boundary: Callable[[str], bool]) -> int:
        """Add ``with`` blocks whose expression ``is_boundary`` accepts beyond the rule's own
        patterns (a repository function wrapping a transaction); returns how many."""
        known = {(region.start_line, region.end_line, region.enclosing) for region in self.regions}
        added = 0
        for block in self.index.context_blocks:
            key = (block.start_line, block.end_line, block.enclosing)
            if key not in known and is_boundary(block.expression):
                self.regions.append(_Region(block.enclosing, block.start_line, block.end_line, None))
                known.add(key)
                added += 1
        return added

    @cached_property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def _call_region(self, call: CallSite) -> _Region:
        """A boundary opened by a plain call: a callback's extent, or a transaction variable."""
        line_text = self.line_text(call.line)
        position = line_text.find(call.name + "(")
        end_line = self._closing_line(call.line, position + len(call.name)) if position >= 0 else call.line
        if end_line > call.line:
            return _Region(call.enclosing, call.line, end_line, None)
        assigned = _ASSIGNED_NAME.match(line_text)
        variable = assigned.group(1) if assigned else None
        scope_end = self._scope_end(call.enclosing)
        return _Region(call.enclosing, call.line + 1, scope_end, variable) if variable else _Region(call.enclosing, call.line, call.line, None)

    def _closing_line(self, line: int, column: int) -> int:
        """The line holding the parenthesis that closes the one at ``line``:``column``."""
        depth = 0
        quote = ""
        for number in range(line, min(line + 400, len(self.lines)) + 1):
            text = self.line_text(number)
            start = column if number == line else 0
            index = start
            while index < len(text):
                char = text[index]
                if quote:
                    if char == "\\":
                        index += 1
                    elif char == quote:
                        quote = ""
                elif char in "\"'`":
                    quote = char
                elif char == "#" and self.index.language == "python":
                    break
                elif char in "([{":
                    depth += 1
                elif char in ")]}":
                    depth -= 1
                    if depth == 0:
                        return number
                index += 1
            if quote != "`":
                quote = ""
        return line

    def _scope_end(self, enclosing: str | None) -> int:
        for definition in self.index.definitions:
            if definition.qualname == enclosing:
                return definition.end_line
        return len(self.lines)

    def _is_sink(self, call: CallSite, patterns: _RulePatterns, sql_write: re.Pattern[str] | None) -> bool:
        if patterns.sinks.matches(call.callee, call.name):
            return not _non_database_call(call)
        if sql_write is None or call.name not in _EXECUTE_NAMES:
            return False
        statement = self._sql_text(call)
        return statement is not None and bool(sql_write.search(statement))

    def _sql_text(self, call: CallSite) -> str | None:
        """The SQL an execute-like call runs: its first string literal, or a named string's."""
        for argument in split_arguments(call.arguments):
            literal = _STRING_START.match(argument)
            if literal:
                return argument[literal.end() :]
        for name in _IDENTIFIER.findall(call.arguments):
            value = self._named_string(name, call.line)
            if value is not None:
                return value
        return None

    def _named_string(self, name: str, before_line: int) -> str | None:
        """The start of the string literal last assigned to ``name`` earlier in the same
        function, or by a module-level string assignment."""
        assignment = re.compile(rf"^\s*{re.escape(name)}\s*(?::[^=]+)?=\s*")
        scope = self.index.enclosing_definition(before_line)
        first_line = scope.start_line if scope is not None else before_line
        candidates = [number for number in range(before_line - 1, first_line - 1, -1) if assignment.match(self.line_text(number))]
        candidates += [line for found, line in self.index.string_assignments if found == name]
        for number in candidates:
            rest = assignment.sub("", self.line_text(number), count=1)
            rest = "\n".join([rest, *self.lines[number : number + 5]])
            literal = _STRING_START.match(rest)
            if literal:
                return rest[literal.end() :]
        return None

    def covered(self, enclosing: str | None, line: int, callee: str = "", arguments: str = "") -> bool:
        """True when a boundary in function ``enclosing`` covers the call at ``line``."""
        receiver = callee.split(".")[0] if "." in callee else ""
        for region in self.regions:
            if region.enclosing != enclosing or not region.start_line <= line <= region.end_line:
                continue
            if region.variable is None:
                return True
            if receiver == region.variable or re.search(rf"\b{re.escape(region.variable)}\b", arguments):
                return True
        return False


class _Analysis:
    """One run of the analysis over a repository."""

    def __init__(self, indexes: Mapping[str, FileIndex], texts: Mapping[str, str], rule: Rule, graph: CallGraph) -> None:
        self.indexes = indexes
        self.rule = rule
        self.graph = graph
        sql_write = re.compile(rule.sql_write) if rule.sql_write else None
        languages = {_LANGUAGE_FAMILY.get(language, language) for language in rule.languages}
        self.patterns = _RulePatterns(_PatternSet(rule.sinks), _PatternSet(rule.boundaries), _PatternSet(_NON_ATOMIC))
        self._calls_by_line: dict[str, dict[tuple[str | None, int], list[CallSite]]] = {}
        self.facts: dict[str, _FileFacts] = {}
        for path in sorted(indexes):
            index = indexes[path]
            if languages and _LANGUAGE_FAMILY.get(index.language, index.language) not in languages:
                continue
            self.facts[path] = _FileFacts(path, index, texts.get(path, ""), self.patterns, sql_write)
        self._wrappers: dict[tuple[str, str], bool] = {}
        # Wrappers can wrap wrappers (saleor: transaction_with_commit_on_errors ->
        # traced_atomic_transaction -> transaction.atomic): widen until nothing changes.
        for _ in range(_WRAPPER_DEPTH):
            self._wrappers.clear()
            added = 0
            for path in sorted(self.facts):
                added += self.facts[path].add_wrapped_regions(partial(self._is_boundary, path))
            if not added:
                break
        self._wrappers.clear()
        self.atomic_requests = any(
            _ATOMIC_REQUESTS.search(texts.get(path, ""))
            for path, index in indexes.items()
            if index.language == "python" and "settings" in path
        )

    # -- boundaries on functions ---------------------------------------------------------

    def _decorators(self, ref: FunctionRef) -> tuple[str, ...]:
        definition = self.graph.definition(ref)
        if definition is None:
            return ()
        decorators = definition.decorators
        if definition.parent is not None:
            owner = self.graph.definition(FunctionRef(ref.path, definition.parent))
            if owner is not None and owner.kind == "class":
                decorators = (*decorators, *owner.decorators)
        return decorators

    def _decorated_boundary(self, ref: FunctionRef) -> bool:
        return any(self._is_boundary(ref.path, decorator) for decorator in self._decorators(ref))

    def _is_boundary(self, path: str, expression: str) -> bool:
        """Whether a decorator or ``with`` expression written in ``path`` opens a transaction:
        it matches the rule's boundaries, or it names a repository function that itself
        opens one (a wrapper such as ``@traced_atomic`` around ``transaction.atomic``)."""
        if self.patterns.non_atomic.matches(expression):
            return False
        if self.patterns.boundaries.matches(expression):
            return True
        key = (path, strip_arguments(expression))
        if key not in self._wrappers:
            self._wrappers[key] = self._opens_transaction(self.graph.resolve(path, key[1]) if _DOTTED.match(key[1]) else None)
        return self._wrappers[key]

    def _opens_transaction(self, target: FunctionRef | None) -> bool:
        facts = self.facts.get(target.path) if target is not None else None
        if target is None or facts is None:
            return False
        return any(region.enclosing == target.qualname for region in facts.regions)

    def _entry_covered(self, entry: EntryPoint) -> bool:
        if self._decorated_boundary(entry.ref):
            return True
        django_view = entry.kind == "http" and entry.detail.startswith(("django", "drf"))
        if django_view and self.atomic_requests:
            return not any(self.patterns.non_atomic.matches(decorator) for decorator in self._decorators(entry.ref))
        return False

    def _edge_blocked(self, edge: Edge, call: CallSite | None) -> bool:
        facts = self.facts.get(edge.caller.path)
        enclosing = _enclosing_of(edge.caller)
        callee, arguments = (call.callee, call.arguments) if call is not None else ("", "")
        if facts is not None and facts.covered(enclosing, edge.line, callee, arguments):
            return True
        if not self._decorated_boundary(edge.callee):
            return False
        index = self.indexes.get(edge.callee.path)
        if index is not None and index.language == "java" and self._self_invocation(edge, call):
            return False
        return True

    def _self_invocation(self, edge: Edge, call: CallSite | None) -> bool:
        """A call from a method to another method of the same class through ``this`` or bare."""
        if edge.caller.path != edge.callee.path or call is None:
            return False
        caller = self.graph.definition(edge.caller)
        callee = self.graph.definition(edge.callee)
        if caller is None or callee is None or caller.parent is None or caller.parent != callee.parent:
            return False
        return "." not in call.callee or call.callee.startswith("this.")

    # -- search --------------------------------------------------------------------------

    def run(self, entries: tuple[EntryPoint, ...]) -> tuple[list[Finding], int, int]:
        reached: dict[FunctionRef, tuple[EntryPoint, tuple[Edge, ...]]] = {}
        queue: deque[FunctionRef] = deque()
        for entry in entries:
            if entry.ref not in reached and not self._entry_covered(entry):
                reached[entry.ref] = (entry, ())
                queue.append(entry.ref)
        while queue:
            node = queue.popleft()
            entry, trail = reached[node]
            for edge in self.graph.callees(node):
                if edge.callee not in reached and not self._edge_blocked(edge, self._call_for(edge)):
                    reached[edge.callee] = (entry, (*trail, edge))
                    queue.append(edge.callee)
        reachable_any = self._reachable_ignoring_boundaries(entries)

        findings: list[Finding] = []
        total = covered_count = 0
        for path in sorted(self.facts):
            facts = self.facts[path]
            for ref in sorted(facts.sinks):
                sinks = self._writes(ref, facts.sinks[ref])
                if not sinks:
                    continue
                enclosing = _enclosing_of(ref)
                uncovered = [call for call in sinks if not facts.covered(enclosing, call.line, call.callee, call.arguments)]
                total += len(sinks)
                covered_count += len(sinks) - len(uncovered)
                if ref in reached and uncovered:
                    entry, trail = reached[ref]
                    findings.append(self._finding(ref, entry, trail, uncovered, facts))
                elif ref in reachable_any:
                    covered_count += len(uncovered)
        findings.sort(key=Finding.sort_key)
        return findings, total, covered_count

    def _writes(self, ref: FunctionRef, sinks: list[CallSite]) -> list[CallSite]:
        """``sinks`` less the calls that resolve exactly to a repository function (a
        mutation's own ``cls.save(...)``, a model's ``save`` override): those are calls, not
        writes, and the writes inside them are judged in the callee, boundaries included."""
        calls_into_repository = {
            (edge.line, edge.callee.qualname.rsplit(".", 1)[-1])
            for edge in self.graph.callees(ref)
            if not edge.approximate
        }
        if not calls_into_repository:
            return sinks
        return [call for call in sinks if (call.line, call.name) not in calls_into_repository]

    def _call_for(self, edge: Edge) -> CallSite | None:
        """The call site behind an edge (same caller and line, preferring the callee's name)."""
        by_line = self._calls_by_line.get(edge.caller.path)
        if by_line is None:
            by_line = {}
            index = self.indexes.get(edge.caller.path)
            for call in index.calls if index is not None else ():
                by_line.setdefault((call.enclosing, call.line), []).append(call)
            self._calls_by_line[edge.caller.path] = by_line
        candidates = by_line.get((_enclosing_of(edge.caller), edge.line), [])
        short = edge.callee.qualname.split(".")[-1]
        return next((call for call in candidates if call.name == short), candidates[0] if candidates else None)

    def _reachable_ignoring_boundaries(self, entries: tuple[EntryPoint, ...]) -> set[FunctionRef]:
        seen = {entry.ref for entry in entries}
        queue = deque(sorted(seen))
        while queue:
            for edge in self.graph.callees(queue.popleft()):
                if edge.callee not in seen:
                    seen.add(edge.callee)
                    queue.append(edge.callee)
        return seen

    # -- findings ------------------------------------------------------------------------

    def _finding(
        self, ref: FunctionRef, entry: EntryPoint, trail: tuple[Edge, ...], writes: list[CallSite], facts: _FileFacts
    ) -> Finding:
        rule = self.rule
        first = writes[0]
        count = len(writes)
        severity = rule.severity if count == 1 else _escalate(rule.severity)
        chain: list[ChainStep] = []
        steps = [entry.ref, *(edge.callee for edge in trail)]
        for position, step in enumerate(steps):
            if position == len(steps) - 1:
                line, note = first.line, ""
            else:
                edge = trail[position]
                line = edge.line  # where this function calls the next step (docs/answer-contract.md)
                note = f"calls {edge.callee.qualname} at line {edge.line}" + (" (resolved by name)" if edge.approximate else "")
            if position == 0:
                note = f"entry point: {entry.detail}" + (f"; {note}" if note else "")
            chain.append(ChainStep(path=step.path, line=line, function=step.qualname, verified=True, note=note))
        writes_text = "; ".join(f"line {call.line}: {_call_text(call, facts.line_text(call.line))}" for call in writes)
        hops = len(trail)
        route = " -> ".join(f"{step.path}:{step.qualname}" for step in steps)
        reach = (
            f"reaches {ref.qualname} through {hops} call{'s' if hops != 1 else ''} ({route})"
            if hops
            else f"writes in its own body ({route})"
        )
        title = (
            f"{count} database writes outside a transaction in {ref.qualname}"
            if count > 1
            else f"Database write outside a transaction in {ref.qualname}"
        )
        explanation = (
            f"{entry.kind} entry point {entry.ref.qualname} ({entry.detail}) {reach}, and no transaction boundary "
            f"(decorator, with-block or transaction handle) covers the path or the "
            f"write{'s' if count > 1 else ''}. Uncovered write{'s' if count > 1 else ''}: {writes_text}."
        )
        if count > 1:
            explanation += " A failure between these writes leaves partial state."
        return Finding(
            rule=rule.id,
            severity=severity,
            title=title,
            path=ref.path,
            line=first.line,
            function=ref.qualname,
            chain=tuple(chain),
            explanation=explanation,
            found_by=FOUND_BY,
            fingerprint=fingerprint(rule.id, ref.path, ref.qualname, facts.line_text(first.line)),
        )


def _non_database_call(call: CallSite) -> bool:
    """True for a sink-shaped call that writes no database row: a file storage or cache
    receiver, or a file field's ``save``/``delete`` with ``save=False``."""
    stripped = strip_arguments(call.callee)
    receiver = stripped.rsplit(".", 1)[0] + "." if "." in stripped else ""
    if receiver and _NON_DATABASE_RECEIVER.search(receiver):
        return True
    return call.name in ("save", "delete") and _NO_MODEL_SAVE.search(call.arguments) is not None


def _enclosing_of(ref: FunctionRef) -> str | None:
    return None if ref.qualname in (MAIN_FUNCTION, MODULE_FUNCTION) else ref.qualname


def _ref_for(path: str, index: FileIndex, call: CallSite) -> FunctionRef:
    """The graph node a call belongs to (a function, ``<main>`` or ``<module>``)."""
    if call.enclosing is not None:
        return FunctionRef(path, call.enclosing)
    if index.main_block is not None and index.main_block[0] <= call.line <= index.main_block[1]:
        return FunctionRef(path, MAIN_FUNCTION)
    return FunctionRef(path, MODULE_FUNCTION)


def analyze_tx_outside_transaction(
    indexes: Mapping[str, FileIndex], texts: Mapping[str, str], rule: Rule, graph: CallGraph | None = None
) -> StaticResult:
    """Find database writes that an entry point reaches outside any transaction.

    One finding per function holding uncovered writes, carrying the shortest uncovered
    chain from an entry point; findings are sorted by ``Finding.sort_key``. The result is
    deterministic for the same inputs.
    """
    graph = graph if graph is not None else CallGraph.build(indexes)
    entries = find_entry_points(indexes, graph, rule, texts)
    analysis = _Analysis(indexes, texts, rule, graph)
    findings, sinks, covered = analysis.run(entries)
    return StaticResult(findings=tuple(findings), entry_points=len(entries), sinks=sinks, covered_sinks=covered)


def _call_text(call: CallSite, line_text: str) -> str:
    """The call as a reader can search for it: ``Product.objects.filter(...).update(...)``
    where the index keeps ``Product.objects.filter.update`` (argument lists dropped).

    Walks the callee's dotted parts through the source line, writing each argument list as
    ``(...)``; falls back to ``callee(...)`` when the line does not hold the call as written.
    """
    parts = call.callee.split(".")
    start = line_text.find(parts[0])
    while start != -1:
        shown = _follow_parts(line_text, start, parts)
        if shown is not None:
            return shown
        start = line_text.find(parts[0], start + 1)
    return f"{call.callee}(...)"


def _follow_parts(text: str, position: int, parts: list[str]) -> str | None:
    shown: list[str] = []
    for number, part in enumerate(parts):
        if not text.startswith(part, position):
            return None
        shown.append(part)
        position += len(part)
        position = _skip_spaces(text, position)
        if position < len(text) and text[position] == "(":
            end = _closing_paren(text, position)
            shown.append("(...)")
            if end is None:  # the call runs on past this line: nothing more can be matched
                return "".join(shown) + ("." + ".".join(parts[number + 1 :]) + "(...)" if number + 1 < len(parts) else "")
            position = _skip_spaces(text, end + 1)
        if number + 1 < len(parts):
            if position >= len(text) or text[position] != ".":
                return None
            shown.append(".")
            position = _skip_spaces(text, position + 1)
    if not shown or shown[-1] != "(...)":
        shown.append("(...)")
    return "".join(shown)


def _skip_spaces(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def _closing_paren(text: str, position: int) -> int | None:
    """The index of the ``)`` closing the ``(`` at ``position`` (strings skipped), or None."""
    depth = 0
    quote: str | None = None
    index = position
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None
