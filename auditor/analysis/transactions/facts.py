"""Per-file facts of the transaction analysis, computed once per file: the effect sites of
every function (each call a model classifies, with its effect) and the regions of lines a
transaction boundary covers (a ``with atomic()`` block, a callback, a transaction handle).

Inputs: a file's index and text, the rule's compiled patterns (:class:`RulePatterns`), its
write SQL and the repository's related-manager names: nothing else of other files, so a
file's facts can be kept by those inputs (:mod:`.facts_cache`). Output: :class:`FileFacts`
(``sites`` per function, ``regions``, :meth:`FileFacts.covered`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import starmap

from tree_sitter import Node

from auditor.callgraph.graph import FunctionRef
from auditor.callgraph.names import MAIN_FUNCTION, MODULE_FUNCTION, strip_arguments
from auditor.analysis.entrypoints import compile_patterns, split_arguments
from auditor.analysis.transactions.base import CallContext, Effect
from auditor.analysis.transactions.context_variables import opens_through_variable
from auditor.analysis.transactions.effects import (
    EXECUTE_NAMES,
    MODEL_NAMES,
    Verdicts,
    classify,
    counted_effect,
    worth_classifying,
)
from auditor.analysis.transactions.grading import SIDE_EFFECTS
from auditor.analysis.transactions.languages import traits
from auditor.analysis.transactions.scanning import (
    ASSIGNED_NAME,
    IDENTIFIER,
    NAME_ASSIGNMENT,
    STRING_START,
    FileLines,
    assigned_name,
    closing_bracket,
)
from auditor.index.model import CallSite, ContextBlock, FileIndex
from auditor.languages.grammars import parser_for
from auditor.rules.patterns import LinearPattern

_ENQUEUE = frozenset({"delay", "apply_async"})
_EXTENT_LINES = 400
_EXTENT_QUOTES = "\"'`"


@dataclass(frozen=True)
class Region:
    """Lines of one function covered by a boundary, and the transaction variable if any."""

    enclosing: str | None
    start_line: int
    end_line: int
    variable: str | None


@dataclass(frozen=True)
class Site:
    """One classified effect at a call site."""

    call: CallSite
    effect: Effect
    reason: str
    orm: str = ""


class PatternSet:
    """Compiled fnmatch patterns over callee/decorator text, with a cheap pre-check on the
    last name (most calls in a repository cannot match any pattern)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.regex = compile_patterns(patterns)
        last_names = [pattern.rsplit(".", 1)[-1] for pattern in patterns]
        heads = [name.removesuffix("*") for name in last_names]
        self.names = frozenset(name for name in last_names if not name.endswith("*"))
        self.prefixes = tuple(sorted({head for name, head in zip(last_names, heads, strict=True) if name.endswith("*")}))
        # Only a wildcard other than a trailing ``*`` (``*``, ``get?``) lets any name match.
        self.any_name = any(not head or any(char in head for char in "*?[") for head in heads)
        self._matched: dict[str, bool] = {}

    def may_match(self, name: str) -> bool:
        """Whether a call with this last name can match a pattern at all."""
        return self.any_name or name in self.names or (bool(self.prefixes) and name.startswith(self.prefixes))

    def matches(self, text: str, name: str | None = None) -> bool:
        """True when ``text`` with argument lists dropped matches a pattern; ``name`` is the
        call's last name when known."""
        if self.regex is None:
            return False
        if name is not None and not self.may_match(name):
            return False
        found = self._matched.get(text)
        if found is None:  # the same callee text recurs across a repository's files
            stripped = strip_arguments(text)
            found = self._matched[text] = bool(stripped) and self.regex.match(stripped) is not None
        return found


@dataclass(frozen=True)
class RulePatterns:
    """The sink and boundary patterns (the rule's and the framework facts'), the decorators
    that opt a view out of ``ATOMIC_REQUESTS`` and the calls whose callbacks run after the
    commit (``transaction.on_commit``), compiled once."""

    sinks: PatternSet
    boundaries: PatternSet
    non_atomic: PatternSet
    after_commit: PatternSet
    lookups: PatternSet = field(default_factory=lambda: PatternSet(()))
    """Calls that look up or create a framework registry row: no effect of the path."""
    in_request: PatternSet = field(default_factory=lambda: PatternSet(()))
    """Decorators whose function a framework's own Django view runs (a pyhermes subscriber)."""

    @cached_property
    def call_names(self) -> frozenset[str] | None:
        """Every last name of a call a file's facts may look at beyond the sink and
        boundary patterns' own (an ``on_commit``, an execute-like call, a name a model
        claims), or None when a pattern's last name is a wildcard and any call may match."""
        if self.sinks.any_name or self.boundaries.any_name or self.after_commit.any_name:
            return None
        return self.sinks.names | self.boundaries.names | EXECUTE_NAMES | MODEL_NAMES | self.after_commit.names

    @cached_property
    def claim_prefixes(self) -> tuple[str, ...]:
        """The sink, boundary and after-commit patterns' last-name prefixes (``send_*``):
        beside :attr:`call_names`, a call whose last name starts with one may matter too."""
        return self.sinks.prefixes + self.boundaries.prefixes + self.after_commit.prefixes


FactsRecord = tuple[tuple[tuple[str | None, int, int, str | None], ...], tuple[tuple[int, str, str, str], ...]]
"""A file's facts as plain values (what :class:`FileFacts` computes from the file alone):
its regions ``(enclosing, start line, end line, variable)`` and its sites ``(position of
the call in the index's calls, effect, reason, orm)``, in the order they were found."""


class FileFacts:
    """Per-file effects and boundary regions, computed once (:meth:`computed`) or restored
    from their :meth:`record` (:meth:`restored`); ``regions`` grows later by
    :meth:`add_wrapped_regions`, which reads other files."""

    def __init__(
        self, path: str, index: FileIndex, text: str, related_managers: frozenset[str],
        regions: list[Region], sites: dict[FunctionRef, list[Site]],
    ) -> None:  # fmt: skip
        self.path = path
        self.index = index
        self.text = text
        self.related_managers = related_managers
        self._contexts: dict[bool, CallContext] = {}
        self.regions = regions
        self.sites = sites

    @classmethod
    def computed(
        cls,
        path: str,
        index: FileIndex,
        text: str,
        patterns: RulePatterns,
        sql_write: LinearPattern | None,
        related_managers: frozenset[str],
    ) -> FileFacts:
        """The facts of one file, from the file alone: its index and text, the compiled
        patterns, the rule's write SQL and the repository's related-manager names (the
        models' verdicts are kept per call text within the file)."""
        facts = cls(path, index, text, related_managers, [], {})
        facts._find(patterns, sql_write)
        return facts

    @classmethod
    def restored(
        cls, path: str, index: FileIndex, text: str, related_managers: frozenset[str], record: FactsRecord
    ) -> FileFacts:
        """The facts :meth:`computed` gave for the same inputs, rebuilt from their
        :meth:`record` (raises IndexError, ValueError or TypeError on a record that is not one
        of this index's)."""
        regions, found = record
        calls = index.calls
        sites: dict[FunctionRef, list[Site]] = {}
        for position, effect, reason, orm in found:
            if not 0 <= position < len(calls):
                raise IndexError(f"call {position} of {len(calls)}")
            call = calls[position]
            sites.setdefault(ref_for(path, index, call), []).append(Site(call, Effect(effect), reason, orm))
        return cls(path, index, text, related_managers, list(starmap(Region, regions)), sites)

    def record(self) -> FactsRecord:
        """The facts as plain values (before any :meth:`add_wrapped_regions`), for
        :meth:`restored`."""
        position = {id(call): number for number, call in enumerate(self.index.calls)}
        sites = [site for found in self.sites.values() for site in found]
        sites.sort(key=lambda site: position[id(site.call)])
        return (
            tuple((region.enclosing, region.start_line, region.end_line, region.variable) for region in self.regions),
            tuple((position[id(site.call)], site.effect.value, site.reason, site.orm) for site in sites),
        )

    def _find(self, patterns: RulePatterns, sql_write: LinearPattern | None) -> None:
        index, path, related_managers = self.index, self.path, self.related_managers
        verdicts: Verdicts = {}
        for block in index.context_blocks:
            if patterns.boundaries.matches(block.expression):
                self.regions.append(Region(block.enclosing, block.start_line, block.end_line, None))
        block_lines = {(block.start_line, block.enclosing) for block in index.context_blocks}
        on_commit: list[Region] = []
        # Most calls of a file can match no pattern and interest no model: drop them at once.
        names, prefixes = patterns.call_names, patterns.claim_prefixes
        calls = index.calls if names is None else [call for call in index.calls if call.name in names or call.name.startswith(prefixes)]
        for call in calls:
            if patterns.boundaries.matches(call.callee, call.name) and (call.line, call.enclosing) not in block_lines:
                self.regions.append(self._call_region(call))
            elif patterns.after_commit.matches(call.callee, call.name):
                on_commit.append(self._extent(call))
        for call in calls:
            if patterns.lookups.matches(call.callee, call.name):
                continue  # a registry row (ContentType, Permission...): not a business write
            is_sink = patterns.sinks.matches(call.callee, call.name) or self._writes_sql(call, sql_write)
            if not is_sink and not worth_classifying(call, related_managers):
                continue
            classification = classify(call, self._context(is_sink), verdicts)
            if classification is None or classification.effect is None:
                continue
            effect = counted_effect(call, classification)
            if effect is Effect.SIDE_EFFECT and call.name in _ENQUEUE and call.enclosing is not None:
                if strip_arguments(call.callee).rsplit(".", 2)[-2] == call.enclosing.rsplit(".", 1)[-1]:
                    continue  # a task re-enqueueing itself for its next batch
            if effect in SIDE_EFFECTS and any(
                region.enclosing == call.enclosing and region.start_line <= call.line <= region.end_line for region in on_commit
            ):
                continue
            self.sites.setdefault(ref_for(path, index, call), []).append(Site(call, effect, classification.reason, classification.orm))

    def add_wrapped_regions(self, is_boundary: Callable[[str], bool]) -> int:
        """Add ``with`` blocks whose expression ``is_boundary`` accepts beyond the rule's own
        patterns (a repository function wrapping a transaction, or a variable bound to a
        boundary: :func:`~.context_variables.opens_through_variable`); returns how many."""
        if not self.index.context_blocks:
            return 0
        known = {(region.start_line, region.end_line, region.enclosing) for region in self.regions}
        added = 0
        for block in self.index.context_blocks:
            key = (block.start_line, block.end_line, block.enclosing)
            if key in known:
                continue
            if is_boundary(block.expression) or self._through_variable(block, is_boundary):
                self.regions.append(Region(block.enclosing, block.start_line, block.end_line, None))
                known.add(key)
                added += 1
        return added

    def _through_variable(self, block: ContextBlock, is_boundary: Callable[[str], bool]) -> bool:
        """Whether a Python ``with NAME:`` opens a transaction bound to ``NAME`` above it."""
        return self.index.language == "python" and opens_through_variable(block, self.index, self.lines, is_boundary)

    @cached_property
    def lines(self) -> list[str]:
        """The file's lines."""
        return self._file_lines.lines

    @cached_property
    def _file_lines(self) -> FileLines:
        return FileLines(self.text)

    def _context(self, is_rule_sink: bool) -> CallContext:
        """What a model sees of this file; its lines are split from the text when a model
        first reads one (most verdicts never do)."""
        context = self._contexts.get(is_rule_sink)
        if context is None:
            lines = self._file_lines
            context = self._contexts[is_rule_sink] = CallContext(self.path, self.index, lines, is_rule_sink, self.related_managers)
        return context

    @cached_property
    def source(self) -> bytes:
        """The text as UTF-8 bytes, as tree-sitter reads it."""
        return self.text.encode("utf-8", "surrogatepass")

    @cached_property
    def tree(self) -> Node | None:
        """The whole file's syntax tree (None for a language with no grammar)."""
        parser = parser_for(self.index.language)
        return parser.parse(self.source).root_node if parser is not None else None

    def line_text(self, line: int) -> str:
        """The text of a 1-based line ("" outside the file)."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def set_aside(self, drop: Callable[[Site], bool]) -> None:
        """Drop the sites ``drop`` accepts (a decision that needs the whole project: a
        :meth:`record` taken before keeps them)."""
        for ref in list(self.sites):
            kept = [site for site in self.sites[ref] if not drop(site)]
            if kept:
                self.sites[ref] = kept
            else:
                del self.sites[ref]

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

    def _extent(self, call: CallSite) -> Region:
        line_text = self.line_text(call.line)
        position = line_text.find(call.name + "(")
        end_line = self._closing_line(call.line, position + len(call.name)) if position >= 0 else call.line
        return Region(call.enclosing, call.line, end_line, None)

    def _call_region(self, call: CallSite) -> Region:
        """A boundary opened by a plain call: a callback's extent, or a transaction variable."""
        extent = self._extent(call)
        if extent.end_line > call.line:
            return extent
        assigned = ASSIGNED_NAME.match(self.line_text(call.line))
        variable = assigned.group(1) if assigned else None
        scope_end = self._scope_end(call.enclosing)
        return Region(call.enclosing, call.line + 1, scope_end, variable) if variable else Region(call.enclosing, call.line, call.line, None)

    def _closing_line(self, line: int, column: int) -> int:
        """The line holding the parenthesis that closes the one at ``line``:``column`` (the
        line itself when none closes within the next lines)."""
        text = "\n".join(self.lines[line - 1 : min(line + _EXTENT_LINES, len(self.lines))])
        comment = traits(self.index.language).line_comment
        end = closing_bracket(text, column, quotes=_EXTENT_QUOTES, line_comment=comment, strings_end_at_newline=True)
        return line if end is None else line + text.count("\n", 0, end)

    def _scope_end(self, enclosing: str | None) -> int:
        for definition in self.index.definitions:
            if definition.qualname == enclosing:
                return definition.end_line
        return len(self.lines)

    def _writes_sql(self, call: CallSite, sql_write: LinearPattern | None) -> bool:
        if sql_write is None or call.name not in EXECUTE_NAMES:
            return False
        statement = self._sql_text(call)
        return statement is not None and bool(sql_write.search(statement))

    def _sql_text(self, call: CallSite) -> str | None:
        """The SQL an execute-like call runs: its first argument that is a string literal
        or a name holding one (``db.QueryRow(query, "x")`` runs ``query``); failing that,
        any named string among its arguments."""
        for argument in split_arguments(call.arguments):
            literal = STRING_START.match(argument)
            if literal:
                return argument[literal.end() :]
            value = self._named_string(argument, call.line) if IDENTIFIER.fullmatch(argument) else None
            if value is not None:
                return value
        for name in IDENTIFIER.findall(call.arguments):
            value = self._named_string(name, call.line)
            if value is not None:
                return value
        return None

    def _named_string(self, name: str, before_line: int) -> str | None:
        """The start of the string literal last assigned to ``name`` earlier in the same
        function, or by a module-level string assignment."""
        scope = self.index.enclosing_definition(before_line)
        first_line = scope.start_line if scope is not None else before_line
        candidates = [number for number in range(before_line - 1, first_line - 1, -1) if assigned_name(self.line_text(number)) == name]
        candidates += [line for found, line in self.index.string_assignments if found == name]
        for number in candidates:
            line = self.line_text(number)
            match = NAME_ASSIGNMENT.match(line)
            rest = line[match.end() :] if match and match.group(1) == name else line
            rest = "\n".join([rest, *self.lines[number : number + 5]])
            literal = STRING_START.match(rest)
            if literal:
                return rest[literal.end() :]
        return None


def enclosing_of(ref: FunctionRef) -> str | None:
    """The ``enclosing`` a call site of ``ref`` carries (None at module level and in ``<main>``)."""
    return None if ref.qualname in (MAIN_FUNCTION, MODULE_FUNCTION) else ref.qualname


def ref_for(path: str, index: FileIndex, call: CallSite) -> FunctionRef:
    """The graph node a call belongs to (a function, ``<main>`` or ``<module>``)."""
    if call.enclosing is not None:
        return FunctionRef(path, call.enclosing)
    if index.main_block is not None and index.main_block[0] <= call.line <= index.main_block[1]:
        return FunctionRef(path, MAIN_FUNCTION)
    return FunctionRef(path, MODULE_FUNCTION)
