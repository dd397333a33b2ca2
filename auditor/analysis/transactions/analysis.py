"""The static tx-outside-transaction analysis: sequences of database effects that an entry
point reaches with no transaction boundary around them.

Inputs: the index (``FileIndex`` per path), the file texts, the rule (its ``sinks``,
``boundaries`` and ``sql_write`` patterns), optionally a prebuilt call graph, and
:class:`TxOptions`. Output: a :class:`StaticResult` of grounded findings
(``found_by=("static",)``), each listing the effects of its sequence where they happen (a
helper's writes at their own lines), and counters.

1. **Effects.** Every call that matches the rule's sinks (or runs write SQL), and every call
   a framework model knows, is classified by the first model that claims it (see
   :mod:`.base`; models in :data:`MODELS`): an autocommit write, a commit, a repository call
   that is its own transaction, an irreversible side effect, or nothing. Effects a
   boundary covers in their own function (a ``with atomic()`` block, a ``tx`` handle, a
   callback) are covered; side effects inside ``transaction.on_commit(...)`` run after the
   commit and are dropped.
2. **Reachability.** Breadth-first from the entry points (tests, fixtures and dev-data
   commands excluded unless ``include_tests``) over the call graph plus approximate
   dispatch edges (:mod:`.dispatch`), never through a boundary: a boundary-decorated
   callee (Spring: unless self-invoked), a call inside a boundary, an entry point Django
   wraps in ``ATOMIC_REQUESTS``; and never through a call whose constant arguments switch
   off every effect of the callee.
3. **Sequences.** Each function's events are its uncovered effects and its unblocked calls
   into functions with effects (the callee's heaviest path counted at the call site). The
   heaviest feasible path through the function (:mod:`.paths`) is its sequence; a
   base-class method's self-calls into subclass overrides are taken per concrete class
   (the heaviest class counts, never a sum of different classes' overrides). A
   function is reported where the sequence is formed: two or more events on its path; a
   helper with one write folds into the caller that sequences it.
4. **Severity** (:mod:`.grading`). ``critical``: two or more autocommit writes, or an autocommit write and a
   commit or repository call, or an irreversible side effect between writes, on one path.
   ``high``: several commits or repository transactions on one path (a call into a function
   that opens its own transaction is one), or a side effect between commits (partial state
   of lower impact: each piece is consistent on its own). ``medium``: a sequence whose
   partial state is harmless or re-runnable: one real write with only bookkeeping around it
   (event rows, search vectors, rate-limit counters, derived-data recalculations), only
   deletes (a cleanup a retry finishes), only idempotent writes (upserts, many-to-many
   links, queryset updates to constant values), upserts or links and then one other write
   (a re-run finds what they left), every write to one object's row and its own links
   (``x.save()`` then ``x.tags.add(...)``: the object is valid and editable), Django
   updates and deletes of rows that exist, to the values given (``x.save()`` of an object
   known to be a row read here, ``update(...)`` with no ``F()`` or arithmetic; no new row,
   no link, no ``x.n += 1``: a re-run with the same input writes the same), or a mail,
   HTTP call or task after the last write (the right order; a file stored after the row
   that names it still counts). The retry-based ones (deletes, idempotent writes, upserts
   then a write, one object) do not apply when a write after the first sits in a ``try``
   whose handler catches a database error and carries on, here or in a callee: the code
   goes on after that failure, nobody retries. The reason ends the finding's explanation.
   ``low``: a single autocommit write. Findings below ``min_severity`` are counted, not
   returned.

Suppression comments are not interpreted here; that is the findings stage's job.
"""

from __future__ import annotations

import re
import textwrap
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import overload

from tree_sitter import Node

from auditor.analysis.callgraph import (
    _PYTHON_BUILTINS,
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
    is_test_path,
    split_arguments,
)
from auditor.analysis.transactions import django, paths
from auditor.analysis.transactions.base import DOTTED, CallContext, Classification, Effect, TransactionModel
from auditor.analysis.transactions.dispatch import OVERRIDE, Dispatch
from auditor.analysis.transactions.generic import GenericModel
from auditor.analysis.transactions.go_sql import GoSqlModel
from auditor.analysis.transactions.grading import (
    DB_EFFECTS,
    RERUNNABLE,
    SIDE_EFFECTS,
    WRITES,
    Step,
    bookkeeping,
    caught,
    caught_later,
    derived,
    grade,
    idempotent,
    weight,
)
from auditor.analysis.transactions.grading import (
    receiver as receiver_of,
)
from auditor.analysis.transactions.grading import (
    subject as subject_of,
)
from auditor.analysis.transactions.side_effects import SideEffectModel
from auditor.analysis.transactions.spring import SpringModel
from auditor.analysis.transactions.sqlalchemy import SqlAlchemyModel
from auditor.errors import UsageError
from auditor.findings.model import SEVERITY_ORDER, ChainStep, EffectSite, Finding, fingerprint
from auditor.index.indexer import collection_paused
from auditor.index.model import CallSite, FileIndex
from auditor.languages.grammars import parser_for
from auditor.rules.loader import Rule
from auditor.rules.patterns import LinearPattern

FOUND_BY = ("static",)

MODELS: tuple[TransactionModel, ...] = (
    SideEffectModel(), SqlAlchemyModel(), django.DjangoModel(), SpringModel(), GoSqlModel(), GenericModel()
)  # fmt: skip
"""The transaction models, in the order they are asked about a call."""

_EXECUTE_NAMES = frozenset({"execute", "executemany", "executescript", "exec_driver_sql", "query", "raw", "run", "exec", "Query", "QueryContext", "QueryRow", "QueryRowContext"})
_NON_ATOMIC = ("transaction.non_atomic_requests", "non_atomic_requests")
_ON_COMMIT = compile_patterns(("on_commit", "*.on_commit"))
_ASSIGNED_NAME = re.compile(r"^\s*(?:(?:var|let|const|final)\s+)?(?:[\w.<>\[\]]+\s+)?([A-Za-z_]\w*)\s*(?:,\s*\w+\s*)*(?::=|=)(?!=)")
_STRING_START = re.compile(r"""^\s*[rRbBuUfF]{0,2}("{3}|'{3}|"|'|`)""")
# ``name = ...``, ``name: T = ...`` or ``name := ...`` at a line's start: one pattern for
# every name (the analysis asks about many).
_NAME_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?:?=\s*")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_MAYBE_FALSE = re.compile(r"=\s*(?:False|None|0|false|nil)\b")
# A line between two commits that may leave something pending: a call, or an assignment.
_PENDING = re.compile(r"\w\s*\(|[^=!<>]=(?!=)")
_FALSE_DEFAULT = re.compile(r"^(?:False|None|0)$")
_FALSE_KEYWORD = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(False|None|0|false|nil)$")
_WRAPPER_DEPTH = 4
# What can change the state of a scan over an argument list: quotes, escapes, brackets.
_PAREN_STOPS = re.compile(r"""[\\'"()\[\]{}]""")
_LANGUAGE_FAMILY = {"tsx": "typescript"}
_DEV_DATA_COMMAND = re.compile(r"(?:^|/)management/commands/(?:populate\w*|seed\w*|clear\w*|\w*fake\w*|\w*demo\w*|\w*sample\w*|load_?\w*data)\.py$")
# A dev-data script sits at the top of the tree or in scripts/, tools/ or bin/; deeper
# (an app's tasks/populate_balances.py, say), the name says nothing.
_DEV_DATA_SCRIPT = re.compile(r"^(?:(?:scripts?|tools|bin)/)?(?:populate\w*|seed\w*|\w*fake\w*)\.py$")
_FIXTURE_DIRECTORIES = frozenset({"fixtures", "fixture", "testdata", "test_data", "examples", "example"})
_SELF_RECEIVERS = frozenset({"self", "cls", "this"})
_MAX_DEPTH = 60
_BOOKKEEPING_WRITE = re.compile(r"(?:^|\.)(?:\w*Event|\w*Log|\w*History|events|\w*Bucket|\w*RateLimit\w*|\w*Throttle\w*)\.")
# Rate limiting: counters of attempts, whatever the method is called.
_BOOKKEEPING_CLASS = re.compile(r"(?i)(token_?bucket|rate_?limit|throttl)")
_READS_ASSIGNMENT = frozenset({"update", "delete", "Exec", "ExecContext"})
_ENQUEUE = frozenset({"delay", "apply_async"})
_DELETES = frozenset({"delete", "delete_node"})


class InvalidSeverityError(UsageError):
    """A ``min_severity`` that is not a known severity."""


def _assigned_name(line: str) -> str | None:
    """The name a line assigns at its start (:data:`_NAME_ASSIGNMENT`), if any."""
    match = _NAME_ASSIGNMENT.match(line)
    return match.group(1) if match else None


@dataclass(frozen=True)
class TxOptions:
    """Choices for one run of the analysis.

    ``min_severity``: the lowest severity returned (``"low"`` shows single autocommit
    writes); ``include_tests``: treat test code, fixtures, dev-data management commands
    (``populatedb``, ``seed_*``...) and dev-data scripts (``populate.py``...) as entry points too.
    """

    min_severity: str = "low"
    include_tests: bool = False

    def __post_init__(self) -> None:
        if self.min_severity not in SEVERITY_ORDER:
            known = ", ".join(sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.__getitem__))
            raise InvalidSeverityError(f"unknown severity {self.min_severity!r} (known: {known})")


@dataclass(frozen=True)
class StaticResult:
    """Findings of the static pass and what it looked at.

    ``sinks`` counts every database effect found in the rule's languages; ``covered_sinks``
    those a boundary covers (inside a boundary in their own function, or in a function
    every entry-point path reaches only through a boundary). ``unresolved_calls`` counts
    calls in entry-reachable functions the graph could not resolve (``self.x()``/bare
    names with no repository target): a missed chain may run through one of them.
    ``hidden_findings`` counts findings below ``min_severity``.
    """

    findings: tuple[Finding, ...]
    entry_points: int
    sinks: int
    covered_sinks: int
    unresolved_calls: int = 0
    hidden_findings: int = 0


@dataclass(frozen=True)
class _Region:
    """Lines of one function covered by a boundary, and the transaction variable if any."""

    enclosing: str | None
    start_line: int
    end_line: int
    variable: str | None


@dataclass(frozen=True)
class _Site:
    """One classified effect at a call site."""

    call: CallSite
    effect: Effect
    reason: str
    orm: str = ""


class _PatternSet:
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
class _RulePatterns:
    """A rule's sink, boundary and non-atomic-request patterns, compiled once."""

    sinks: _PatternSet
    boundaries: _PatternSet
    non_atomic: _PatternSet

    @cached_property
    def call_names(self) -> frozenset[str] | None:
        """Every last name of a call a file's facts may look at beyond the sink and
        boundary patterns' own (an ``on_commit``, an execute-like call, a name a model
        claims), or None when a pattern's last name is a wildcard and any call may match."""
        if self.sinks.any_name or self.boundaries.any_name:
            return None
        return self.sinks.names | self.boundaries.names | _EXECUTE_NAMES | _MODEL_NAMES | {"on_commit"}

    @cached_property
    def claim_prefixes(self) -> tuple[str, ...]:
        """The sink and boundary patterns' last-name prefixes (``send_*``): beside
        :attr:`call_names`, a call whose last name starts with one may matter too."""
        return self.sinks.prefixes + self.boundaries.prefixes


_MODEL_NAMES = frozenset().union(*(model.names for model in MODELS))
# Names shared with sets, dicts and lists: a call that is not a rule sink only matters when
# its receiver is a related manager (``order.tags.add``) or a variable (``qs.update``).
_CONTAINER_NAMES = frozenset({"add", "set", "remove", "clear", "update", "create"})


def _worth_classifying(call: CallSite, related_managers: frozenset[str]) -> bool:
    if call.name not in _MODEL_NAMES:
        return False
    if call.name not in _CONTAINER_NAMES:
        return True
    receiver = call.callee[: -len(call.name) - 1] if call.callee.endswith("." + call.name) else ""
    if not receiver:
        return False
    attribute = receiver.rsplit(".", 1)[-1]
    return "." not in receiver or attribute in related_managers or attribute.endswith("_set")


class _FileFacts:
    """Per-file effects and boundary regions, computed once."""

    def __init__(
        self,
        path: str,
        index: FileIndex,
        text: str,
        patterns: _RulePatterns,
        sql_write: LinearPattern | None,
        related_managers: frozenset[str],
        verdicts: dict[tuple[object, ...], Classification | None],
    ) -> None:
        self.path = path
        self.index = index
        self.text = text
        self.related_managers = related_managers
        self._contexts: dict[bool, CallContext] = {}
        self.regions: list[_Region] = []
        for block in index.context_blocks:
            if patterns.boundaries.matches(block.expression):
                self.regions.append(_Region(block.enclosing, block.start_line, block.end_line, None))
        block_lines = {(block.start_line, block.enclosing) for block in index.context_blocks}
        on_commit: list[_Region] = []
        # Most calls of a file can match no pattern and interest no model: drop them at once.
        names, prefixes = patterns.call_names, patterns.claim_prefixes
        calls = index.calls if names is None else [call for call in index.calls if call.name in names or call.name.startswith(prefixes)]
        for call in calls:
            if patterns.boundaries.matches(call.callee, call.name) and (call.line, call.enclosing) not in block_lines:
                self.regions.append(self._call_region(call))
            elif call.name == "on_commit" and _ON_COMMIT is not None and _ON_COMMIT.match(strip_arguments(call.callee)):
                on_commit.append(self._extent(call))
        self.sites: dict[FunctionRef, list[_Site]] = {}
        for call in calls:
            is_sink = patterns.sinks.matches(call.callee, call.name) or self._writes_sql(call, sql_write)
            if not is_sink and not _worth_classifying(call, related_managers):
                continue
            classification = _classify(call, self._context(is_sink), verdicts)
            if classification is None or classification.effect is None:
                continue
            effect = classification.effect
            if effect is Effect.WRITE and _BOOKKEEPING_WRITE.search(strip_arguments(call.callee)):
                effect = Effect.AUDIT
            elif effect is Effect.WRITE and call.name in _DELETES:
                effect = Effect.DELETE
            elif effect is Effect.WRITE:
                effect = idempotent(call, classification.orm) or (Effect.UPDATE if classification.rewrite else effect)
            if effect is Effect.SIDE_EFFECT and call.name in _ENQUEUE and call.enclosing is not None:
                if strip_arguments(call.callee).rsplit(".", 2)[-2] == call.enclosing.rsplit(".", 1)[-1]:
                    continue  # a task re-enqueueing itself for its next batch
            if effect in SIDE_EFFECTS and any(
                region.enclosing == call.enclosing and region.start_line <= call.line <= region.end_line for region in on_commit
            ):
                continue
            self.sites.setdefault(_ref_for(path, index, call), []).append(_Site(call, effect, classification.reason, classification.orm))

    def add_wrapped_regions(self, is_boundary: Callable[[str], bool]) -> int:
        """Add ``with`` blocks whose expression ``is_boundary`` accepts beyond the rule's own
        patterns (a repository function wrapping a transaction); returns how many."""
        if not self.index.context_blocks:
            return 0
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
        return self._file_lines.lines

    @cached_property
    def _file_lines(self) -> _FileLines:
        return _FileLines(self.text)

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
        return self.text.encode("utf-8", "surrogatepass")

    @cached_property
    def tree(self) -> Node | None:
        parser = parser_for(self.index.language)
        return parser.parse(self.source).root_node if parser is not None else None

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def _extent(self, call: CallSite) -> _Region:
        line_text = self.line_text(call.line)
        position = line_text.find(call.name + "(")
        end_line = self._closing_line(call.line, position + len(call.name)) if position >= 0 else call.line
        return _Region(call.enclosing, call.line, end_line, None)

    def _call_region(self, call: CallSite) -> _Region:
        """A boundary opened by a plain call: a callback's extent, or a transaction variable."""
        extent = self._extent(call)
        if extent.end_line > call.line:
            return extent
        assigned = _ASSIGNED_NAME.match(self.line_text(call.line))
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

    def _writes_sql(self, call: CallSite, sql_write: LinearPattern | None) -> bool:
        if sql_write is None or call.name not in _EXECUTE_NAMES:
            return False
        statement = self._sql_text(call)
        return statement is not None and bool(sql_write.search(statement))

    def _sql_text(self, call: CallSite) -> str | None:
        """The SQL an execute-like call runs: its first argument that is a string literal
        or a name holding one (``db.QueryRow(query, "x")`` runs ``query``); failing that,
        any named string among its arguments."""
        for argument in split_arguments(call.arguments):
            literal = _STRING_START.match(argument)
            if literal:
                return argument[literal.end() :]
            value = self._named_string(argument, call.line) if _IDENTIFIER.fullmatch(argument) else None
            if value is not None:
                return value
        for name in _IDENTIFIER.findall(call.arguments):
            value = self._named_string(name, call.line)
            if value is not None:
                return value
        return None

    def _named_string(self, name: str, before_line: int) -> str | None:
        """The start of the string literal last assigned to ``name`` earlier in the same
        function, or by a module-level string assignment."""
        scope = self.index.enclosing_definition(before_line)
        first_line = scope.start_line if scope is not None else before_line
        candidates = [number for number in range(before_line - 1, first_line - 1, -1) if _assigned_name(self.line_text(number)) == name]
        candidates += [line for found, line in self.index.string_assignments if found == name]
        for number in candidates:
            line = self.line_text(number)
            match = _NAME_ASSIGNMENT.match(line)
            rest = line[match.end() :] if match and match.group(1) == name else line
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


class _FileLines(Sequence[str]):
    """A file's lines, split from its text on first use (shared by its facts and the
    contexts models see; it holds no reference back, so a file's facts are freed as soon as
    the analysis drops them)."""

    def __init__(self, text: str) -> None:
        self._text = text

    @cached_property
    def lines(self) -> list[str]:
        return self._text.split("\n")

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.lines[index]


def _classify(call: CallSite, context: CallContext, memo: dict[tuple[object, ...], Classification | None]) -> Classification | None:
    """The first model's verdict on a call. Verdicts are kept by call text (``memo``)
    except for those that read earlier lines (a queryset or query variable's
    ``update``/``delete``, a Go statement variable's ``Exec``); a ``self.`` call's verdict is
    kept per class (a manager's ``self.create`` writes). A kept Django ``save`` verdict is
    told anew whether the save rewrites an existing row: that reads the lines above it."""
    key: tuple[object, ...] | None = None
    if not (call.name in _READS_ASSIGNMENT and call.callee.count(".") == 1):
        owner = None
        if call.enclosing and call.name in django.MANAGER_SELF_WRITES and call.callee.startswith("self."):
            owner = (context.path, call.enclosing.rsplit(".", 1)[0])
        if owner is None and context.index.language in ("go", "java"):
            owner = context.path  # imports and field declarations are read from the file
        key = (context.index.language, context.is_rule_sink, call.callee, call.name, call.arguments, owner)
        if key in memo:
            kept = memo[key]
            if call.name == "save" and kept is not None and kept.orm == "rows":
                return replace(kept, rewrite=django.saves_existing(call, context))
            return kept
    found = _first_verdict(call, context)
    if key is not None:
        memo[key] = found
    return found


def _first_verdict(call: CallSite, context: CallContext) -> Classification | None:
    for model in MODELS:
        classification = model.classify(call, context)
        if classification is not None:
            return classification
    return None


class _Analysis:
    """One run of the analysis over a repository."""

    def __init__(
        self, indexes: Mapping[str, FileIndex], texts: Mapping[str, str], rule: Rule, graph: CallGraph, options: TxOptions
    ) -> None:
        self.indexes = indexes
        self.texts = texts
        self.rule = rule
        self.graph = graph
        self.options = options
        sql_write = rule.sql_write_pattern()
        languages = {_LANGUAGE_FAMILY.get(language, language) for language in rule.languages}
        self.patterns = _RulePatterns(_PatternSet(rule.sinks), _PatternSet(rule.boundaries), _PatternSet(_NON_ATOMIC))
        self._calls_by_line: dict[str, dict[tuple[str | None, int], list[CallSite]]] = {}
        related = django.related_managers(texts)
        verdicts: dict[tuple[object, ...], Classification | None] = {}
        self.facts: dict[str, _FileFacts] = {}
        for path in sorted(indexes):
            index = indexes[path]
            if languages and _LANGUAGE_FAMILY.get(index.language, index.language) not in languages:
                continue
            self.facts[path] = _FileFacts(path, index, texts.get(path, ""), self.patterns, sql_write, related, verdicts)
        self._wrappers: dict[tuple[str, str], bool] = {}
        self._pattern_verdicts: dict[str, bool | None] = {}
        self._wrapper_targets: dict[tuple[str, str], FunctionRef | None] = {}
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
        self.atomic_requests = django.atomic_requests(indexes, texts)
        self.dispatch = Dispatch(indexes, graph, texts)
        self._callees: dict[FunctionRef, tuple[Edge, ...]] = {}
        self._paths: dict[tuple[FunctionRef, frozenset[str]], tuple[Step, ...]] = {}
        self._active: set[tuple[FunctionRef, frozenset[str]]] = set()
        self._dispatch_into: dict[FunctionRef, list[Edge]] | None = None
        self._blocked: dict[Edge, bool] = {}
        self._supers: dict[FunctionRef, bool] = {}
        self._signatures: dict[FunctionRef, tuple[tuple[str, str | None], ...]] = {}
        self._offs: dict[tuple[FunctionRef, CallSite | None, frozenset[str]], frozenset[str]] = {}
        self._bodies: dict[FunctionRef, tuple[Node | None, bytes, int]] = {}
        self._passed_arguments: dict[str, tuple[dict[str, str], int] | None] = {}
        self._edge_calls: dict[Edge, CallSite | None] = {}
        self._entry_refs: frozenset[FunctionRef] = frozenset()
        self._site_refs = frozenset(ref for facts in self.facts.values() for ref in facts.sites)
        self._effectful: dict[FunctionRef, bool] = {}

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
        opens one (a wrapper such as ``@traced_atomic`` around ``transaction.atomic``, or a
        decorator whose inner wrapper runs the function in such a block)."""
        by_pattern = self._boundary_by_pattern(expression)
        if by_pattern is not None:
            return by_pattern
        key = (path, strip_arguments(expression))
        if key not in self._wrappers:
            self._wrappers[key] = self._opens_transaction(self._wrapper_target(*key))
        return self._wrappers[key]

    def _boundary_by_pattern(self, expression: str) -> bool | None:
        """False for a non-atomic expression, True for one the rule's boundaries match, None
        when only a repository function behind it can tell (kept per expression: the
        wrapper search asks again on every widening round)."""
        if expression not in self._pattern_verdicts:
            verdict = False if self.patterns.non_atomic.matches(expression) else True if self.patterns.boundaries.matches(expression) else None
            self._pattern_verdicts[expression] = verdict
        return self._pattern_verdicts[expression]

    def _wrapper_target(self, path: str, name: str) -> FunctionRef | None:
        """The repository function a decorator or ``with`` expression's dotted name written
        in ``path`` resolves to (resolved once: the graph does not change between rounds)."""
        key = (path, name)
        if key not in self._wrapper_targets:
            self._wrapper_targets[key] = self.graph.resolve(path, name) if DOTTED.match(name) else None
        return self._wrapper_targets[key]

    def _opens_transaction(self, target: FunctionRef | None) -> bool:
        facts = self.facts.get(target.path) if target is not None else None
        if target is None or facts is None:
            return False
        if any(region.enclosing == target.qualname for region in facts.regions):
            return True
        # A decorator's wrapper opens the transaction only if the decorated function runs
        # inside it: the region must hold the call to the decorator's function parameter.
        nested = target.qualname + "."
        parameters = self._signature_names(target, facts)
        calls = [re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(") for name in parameters]
        if not calls:
            return False
        wrappers = [d for d in facts.index.definitions if d.qualname.startswith(nested)]
        call_lines = {
            line for d in wrappers for line in range(d.start_line, d.end_line + 1)
            if any(call.search(facts.line_text(line)) for call in calls)
        }
        covered = {
            line for region in facts.regions if (region.enclosing or "").startswith(nested)
            for line in range(region.start_line, region.end_line + 1)
        }
        # Every run of the decorated function is inside the transaction (a wrapper that also
        # calls it outside, e.g. on one branch only, is no boundary).
        return bool(call_lines) and call_lines <= covered

    def _signature_names(self, target: FunctionRef, facts: _FileFacts) -> tuple[str, ...]:
        """The parameter names of a function, read from its signature line(s)."""
        definition = self.graph.definition(target)
        if definition is None:
            return ()
        signature = " ".join(facts.line_text(line) for line in range(definition.start_line, definition.body_start_line + 1))
        found = re.search(r"\bdef\s+\w+\s*\(([^)]*)\)", signature)
        if found is None:
            return ()
        names = (part.split(":")[0].split("=")[0].strip().lstrip("*") for part in found.group(1).split(","))
        return tuple(name for name in names if name and name not in ("self", "cls"))

    def _entry_covered(self, entry: EntryPoint) -> bool:
        if self._decorated_boundary(entry.ref):
            return True
        django_view = entry.kind == "http" and entry.detail.startswith(("django", "drf"))
        if django_view and self.atomic_requests:
            return not any(self.patterns.non_atomic.matches(decorator) for decorator in self._decorators(entry.ref))
        return False

    def _edge_blocked(self, edge: Edge, call: CallSite | None) -> bool:
        blocked = self._blocked.get(edge)
        if blocked is None:
            blocked = self._blocked[edge] = self._compute_blocked(edge, call)
        return blocked

    def _compute_blocked(self, edge: Edge, call: CallSite | None) -> bool:
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

    # -- graph ---------------------------------------------------------------------------

    def callees(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Graph edges out of ``ref`` plus dispatch edges, the graph's first."""
        found = self._callees.get(ref)
        if found is None:
            graph_edges = self.graph.callees(ref)
            known = {(edge.callee, edge.line) for edge in graph_edges}
            extra = tuple(
                edge for edge in self.dispatch.edges(ref)
                if (edge.callee, edge.line) not in known and self._base_runs_for(edge)
            )
            found = self._callees[ref] = graph_edges + extra
        return found

    def _base_runs_for(self, edge: Edge) -> bool:
        """Whether the class of a subclass override that a base method dispatches to runs
        that base method at all: not when the class (below the base) overrides the base
        method itself without calling ``super()`` outside its own transaction (saleor's
        ``perform_mutation`` overrides that open ``atomic`` and call ``cls.save``)."""
        if self.dispatch.kinds.get(edge) != OVERRIDE:
            return True
        base = _class_of(edge.caller)
        method = edge.caller.qualname.rsplit(".", 1)[-1]
        lineage = self.dispatch.lineage(_class_of(edge.callee))
        below_base = lineage[: lineage.index(base)] if base in lineage else lineage
        for item in below_base:
            override = FunctionRef(item.path, f"{item.qualname}.{method}")
            if self.graph.definition(override) is not None:
                return self._calls_super(override, method)
        return True

    def _call_for(self, edge: Edge) -> CallSite | None:
        """The call site behind an edge (same caller and line, preferring the callee's name)."""
        if edge in self._edge_calls:
            return self._edge_calls[edge]
        found = self._edge_calls[edge] = self._find_call(edge)
        return found

    def _find_call(self, edge: Edge) -> CallSite | None:
        candidates = self._calls_at(edge.caller.path).get((_enclosing_of(edge.caller), edge.line), [])
        short = edge.callee.qualname.split(".")[-1]
        return next((call for call in candidates if call.name == short), candidates[0] if candidates else None)

    def _calls_at(self, path: str) -> dict[tuple[str | None, int], list[CallSite]]:
        by_line = self._calls_by_line.get(path)
        if by_line is None:
            by_line = {}
            index = self.indexes.get(path)
            for call in index.calls if index is not None else ():
                by_line.setdefault((call.enclosing, call.line), []).append(call)
            self._calls_by_line[path] = by_line
        return by_line

    # -- sequences -----------------------------------------------------------------------

    def path_of(self, ref: FunctionRef, off: frozenset[str] = frozenset(), depth: int = 0) -> tuple[Step, ...]:
        """The heaviest feasible sequence of uncovered effects through ``ref`` (callees'
        effects counted at their call sites), with the parameters ``off`` false."""
        key = (ref, off)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        if not self._reaches_effect(ref):
            return ()  # no effect anywhere below: nothing to sequence
        if key in self._active or depth > _MAX_DEPTH:
            return ()  # recursion: the cycle adds nothing new
        self._active.add(key)
        try:
            result = self._compute_path(ref, off, depth)
        finally:
            self._active.discard(key)
        self._paths[key] = result
        return result

    def _reaches_effect(self, ref: FunctionRef) -> bool:
        """Whether any effect site lies in ``ref`` or below it (over every edge, blocked or
        not): a function with none has an empty path whatever is switched off, and most
        functions an entry point reaches are such. Answered for a whole strongly connected
        component at once (Tarjan's algorithm, iterative), so recursion needs no special case."""
        known = self._effectful.get(ref)
        if known is not None:
            return known
        order: dict[FunctionRef, int] = {}
        low: dict[FunctionRef, int] = {}
        reaches: dict[FunctionRef, bool] = {}
        stack: list[FunctionRef] = []
        work: list[tuple[FunctionRef, Iterator[Edge]]] = []

        def enter(node: FunctionRef) -> None:
            order[node] = low[node] = len(order)
            reaches[node] = node in self._site_refs
            stack.append(node)
            work.append((node, iter(self.callees(node))))

        enter(ref)
        while work:
            node, edges = work[-1]
            for edge in edges:
                callee = edge.callee
                done = self._effectful.get(callee)
                if done is not None:
                    reaches[node] = reaches[node] or done
                elif callee not in order:
                    enter(callee)
                    break
                else:  # on the stack: the same component
                    low[node] = min(low[node], order[callee])
            else:
                work.pop()
                if low[node] == order[node]:
                    start = stack.index(node)
                    members = stack[start:]
                    del stack[start:]
                    value = any(reaches[member] for member in members)
                    for member in members:
                        self._effectful[member] = value
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                    if node in self._effectful:
                        reaches[parent] = reaches[parent] or self._effectful[node]
        return self._effectful[ref]

    def _compute_path(self, ref: FunctionRef, off: frozenset[str], depth: int) -> tuple[Step, ...]:
        facts = self.facts.get(ref.path)
        enclosing = _enclosing_of(ref)
        events: dict[int, list[Step]] = defaultdict(list)
        exact_calls = {(edge.line, edge.callee.qualname.rsplit(".", 1)[-1]) for edge in self.graph.callees(ref) if not edge.approximate}
        exact_calls |= {(edge.line, name) for edge in self.callees(ref) if (name := self.dispatch.stands_for(edge)) is not None}
        if facts is not None:
            saved: set[str] = set()
            for site in facts.sites.get(ref, ()):
                call = site.call
                if (call.line, call.name) in exact_calls or facts.covered(enclosing, call.line, call.callee, call.arguments):
                    continue
                if call.name == "save" and site.effect in (Effect.WRITE, Effect.UPDATE):
                    if call.callee in saved:
                        continue  # the same row saved again: one row's state, not a second row
                    saved.add(call.callee)
                text = _call_text(call, facts.line_text(call.line))
                events[call.line].append(Step(call.line, text, (site.effect,), subject=subject_of(call, site.orm)))
        by_line: dict[int, list[Edge]] = defaultdict(list)
        for edge in self.callees(ref):
            by_line[edge.line].append(edge)
        calls: dict[int, Step] = {}
        overrides: dict[int, dict[FunctionRef, Step]] = defaultdict(dict)
        for line, edges in sorted(by_line.items()):
            for edge in edges:
                step = self._edge_step(edge, off, depth)
                if step is None:
                    continue
                if edge.approximate and self.dispatch.kinds.get(edge) == OVERRIDE:
                    overrides[line][edge.callee] = step
                elif line not in calls or len(step.effects) > len(calls[line].effects):
                    calls[line] = step
        body: tuple[Node | None, bytes, int] | None = None
        heaviest: tuple[Step, ...] = ()
        for chosen in self._override_variants(ref, overrides):
            variant: dict[int, list[Step]] = {line: list(steps) for line, steps in events.items()}
            for line, step in sorted({**calls, **chosen}.items()):
                variant.setdefault(line, []).append(step)
            if not variant:
                continue
            if not off and sum(len(steps) for steps in variant.values()) == 1:
                found = tuple(variant[next(iter(variant))])
            else:
                if body is None:
                    body = self._body(ref, facts)
                node, source, offset = body
                shifted = {line - offset: steps for line, steps in variant.items()}
                found = tuple(paths.heaviest_path(node, source, shifted, weight, off, caught))
            if facts is not None:
                found = _without_idle_commits(found, facts, body)
            if sum(map(weight, found)) > sum(map(weight, heaviest)):
                heaviest = found
        return heaviest

    def _edge_step(self, edge: Edge, off: frozenset[str], depth: int) -> Step | None:
        """The event a call into ``edge.callee`` adds at its line (its heaviest path), or
        None when the call is blocked or the callee has no effect."""
        call = self._call_for(edge)
        if self._edge_blocked(edge, call):
            return self._own_transaction_step(edge, call, off, depth)
        if not self._reaches_effect(edge.callee):
            return None
        steps = self.path_of(edge.callee, self._off(edge.callee, call, off), depth + 1)
        effects = tuple(effect for step in steps for effect in step.effects)
        owner = edge.callee.qualname.rpartition(".")[0]
        if bookkeeping(edge.callee) or (owner and _BOOKKEEPING_CLASS.search(owner)):
            effects = tuple(Effect.AUDIT if effect in WRITES else effect for effect in effects)
        if not effects:
            return None
        target = None  # the callee's self, seen from here, when it writes only that
        if call is not None and {step.subject for step in steps if any(e in WRITES for e in step.effects)} == {"self"}:
            target = receiver_of(call.callee)
        return Step(
            edge.line, f"calls {edge.callee.qualname}", effects, edge.callee, edge.approximate, target,
            carries_on=caught_later(steps), inner=steps,
        )

    def _own_transaction_step(self, edge: Edge, call: CallSite | None, off: frozenset[str], depth: int) -> Step | None:
        """A call from outside any transaction into a function that opens its own (a
        boundary decorator: ``@atomic``, ``@Transactional``): one committed unit at the call
        site when the callee writes, like a Spring Data repository call. None when the
        call itself runs inside a boundary."""
        facts = self.facts.get(edge.caller.path)
        callee, arguments = (call.callee, call.arguments) if call is not None else ("", "")
        if facts is not None and facts.covered(_enclosing_of(edge.caller), edge.line, callee, arguments):
            return None
        inner = self.path_of(edge.callee, self._off(edge.callee, call, off), depth + 1)
        if not any(effect in DB_EFFECTS for step in inner for effect in step.effects):
            return None
        return Step(edge.line, f"calls {edge.callee.qualname} (its own transaction)", (Effect.REPOSITORY,), edge.callee)

    def _override_variants(
        self, ref: FunctionRef, overrides: Mapping[int, Mapping[FunctionRef, Step]]
    ) -> list[dict[int, Step]]:
        """The overrides one concrete class runs at each dispatching line, per class that
        defines one (nearest definition in its lineage), plus the base's own (none): the
        alternatives a base-class path has. Never a mix no single class runs. A class that
        overrides ``ref`` itself enters it only through its own override (``super()``,
        perhaps inside a transaction): its variant is that override's to count."""
        if not overrides:
            return [{}]
        base = _class_of(ref)
        method = ref.qualname.rsplit(".", 1)[-1]
        classes = sorted({_class_of(target) for targets in overrides.values() for target in targets})
        by_line = {line: {_class_of(target): step for target, step in targets.items()} for line, targets in overrides.items()}
        variants: list[dict[int, Step]] = [{}]
        seen: set[tuple[tuple[int, FunctionRef], ...]] = {()}
        for cls in classes:
            lineage = self.dispatch.lineage(cls)
            below_base = lineage[: lineage.index(base)] if base in lineage else lineage
            override = next((FunctionRef(item.path, f"{item.qualname}.{method}") for item in below_base
                             if self.graph.definition(FunctionRef(item.path, f"{item.qualname}.{method}"))), None)
            if override is not None and not self._calls_super(override, method):
                continue
            chosen: dict[int, Step] = {}
            for line, by_class in by_line.items():
                nearest = next((by_class[item] for item in lineage if item in by_class), None)
                if nearest is not None:
                    chosen[line] = nearest
            key = tuple(sorted((line, step.callee) for line, step in chosen.items() if step.callee is not None))
            if key not in seen:
                seen.add(key)
                variants.append(chosen)
        return variants

    def _calls_super(self, override: FunctionRef, method: str) -> bool:
        """Whether an override runs the base method too (``super().method(...)``) outside a
        transaction of its own: then the class's other overrides still shape the base
        method's path (kept per override: every dispatching base method asks)."""
        known = self._supers.get(override)
        if known is None:
            known = self._supers[override] = self._compute_calls_super(override, method)
        return known

    def _compute_calls_super(self, override: FunctionRef, method: str) -> bool:
        definition = self.graph.definition(override)
        facts = self.facts.get(override.path)
        if definition is None or facts is None:
            return False
        call = re.compile(rf"\bsuper\s*\([^)]*\)\s*\.\s*{re.escape(method)}\s*\(")
        lines = [line for line in range(definition.start_line, definition.end_line + 1) if call.search(facts.line_text(line))]
        # A super() call inside the override's own transaction is that override's to count.
        inside = [region for region in facts.regions if region.enclosing == override.qualname]
        return any(not any(r.start_line <= line <= r.end_line for r in inside) for line in lines)

    def _body(self, ref: FunctionRef, facts: _FileFacts | None) -> tuple[Node | None, bytes, int]:
        """:meth:`_parse_body`, once per function (its paths with different parameters off
        walk the same body)."""
        found = self._bodies.get(ref)
        if found is None:
            found = self._bodies[ref] = self._parse_body(ref, facts)
        return found

    def _parse_body(self, ref: FunctionRef, facts: _FileFacts | None) -> tuple[Node | None, bytes, int]:
        """The function's body node, the source it was parsed from and the number of lines
        before that source. A Python function is parsed on its own (dedented): most files
        are far longer than the functions that need their branches."""
        if facts is None:
            return None, b"", 0
        if ref.qualname == MAIN_FUNCTION and facts.index.main_block is not None:
            if facts.tree is None:
                return None, b"", 0
            start, _ = facts.index.main_block
            node = next((node for node in facts.tree.named_children if paths.first_line(node) == start), None)
            return (node.child_by_field_name("consequence") if node is not None else None), facts.source, 0
        definition = self.graph.definition(ref)
        if definition is None:
            return None, b"", 0
        if facts.index.language == "python":
            parser = parser_for("python")
            text = textwrap.dedent("\n".join(facts.lines[definition.start_line - 1 : definition.end_line]))
            source = text.encode("utf-8", "surrogatepass")
            if parser is None:
                return None, b"", 0
            root = parser.parse(source).root_node
            offset = definition.start_line - 1
            return paths.function_body(root, 1, definition.end_line - offset), source, offset
        if facts.tree is None:
            return None, b"", 0
        return paths.function_body(facts.tree, definition.start_line, definition.end_line), facts.source, 0

    def _switched_off(self, edge: Edge, call: CallSite | None) -> bool:
        """A call whose constant false keyword arguments leave the callee no effect."""
        if not self._reaches_effect(edge.callee):
            return False  # no effect to switch off
        off = self._off(edge.callee, call)
        return bool(off) and not self.path_of(edge.callee, off) and bool(self.path_of(edge.callee))

    def _off(self, callee: FunctionRef, call: CallSite | None, caller_off: frozenset[str] = frozenset()) -> frozenset[str]:
        """:meth:`_compute_off`, once per callee, call and caller's false parameters (asked
        again for every path through the caller and by the reachability search)."""
        key = (callee, call, caller_off)
        found = self._offs.get(key)
        if found is None:
            found = self._offs[key] = self._compute_off(callee, call, caller_off)
        return found

    def _compute_off(self, callee: FunctionRef, call: CallSite | None, caller_off: frozenset[str]) -> frozenset[str]:
        """The callee's parameters that are false on this call: passed a false constant,
        passed a parameter of the caller that is itself false (``save=save``), or omitted
        where the parameter's default is false (``def f(order, save=False)`` called as
        ``f(order)``)."""
        off = set(_false_keywords(call))
        if call is None:
            return frozenset(off)
        parameters = self._parameters(callee)
        if not caller_off and not any(default is not None and _FALSE_DEFAULT.match(default) for _, default in parameters):
            return frozenset(off)  # nothing below could add a name
        passed = self._passed(call.arguments)
        if passed is None:
            return frozenset(off)  # *args/**kwargs: what is passed is not known
        keywords, positional = passed
        off.update(name for name, value in keywords.items() if value in caller_off)
        for position, (name, default) in enumerate(parameters):
            if name not in keywords and position >= positional and default is not None and _FALSE_DEFAULT.match(default):
                off.add(name)
        return frozenset(off)

    def _passed(self, arguments: str) -> tuple[dict[str, str], int] | None:
        """A call's keyword arguments (name to value text) and its number of positional
        ones, or None when it unpacks ``*args``/``**kwargs``; kept per argument text (the
        same call is asked about for every callee and caller's false parameters)."""
        if arguments in self._passed_arguments:
            return self._passed_arguments[arguments]
        split = split_arguments(arguments)
        found: tuple[dict[str, str], int] | None = None
        if not any(argument.startswith("*") for argument in split):
            keywords: dict[str, str] = {}
            positional = 0
            for argument in split:
                name, equals, value = argument.partition("=")
                if equals and _IDENTIFIER.fullmatch(name.strip()) and not value.startswith("="):
                    keywords[name.strip()] = value.strip()
                elif argument.strip():
                    positional += 1
            found = (keywords, positional)
        self._passed_arguments[arguments] = found
        return found

    def _parameters(self, ref: FunctionRef) -> tuple[tuple[str, str | None], ...]:
        """A Python function's parameters after ``self``/``cls`` as (name, default text or
        None), in order; keyword-only parameters follow the positional ones."""
        found = self._signatures.get(ref)
        if found is not None:
            return found
        facts = self.facts.get(ref.path)
        definition = self.graph.definition(ref)
        parameters: list[tuple[str, str | None]] = []
        if facts is not None and definition is not None and facts.index.language == "python":
            text = "\n".join(facts.lines[definition.start_line - 1 : min(definition.end_line, definition.start_line + 30)])
            start = text.find("def " + definition.name)
            opening = text.find("(", start) if start >= 0 else -1
            closing = _closing_paren(text, opening) if opening >= 0 else None
            if closing is not None:
                for parameter in split_arguments(text[opening + 1 : closing]):
                    name, _, default = parameter.partition("=")
                    name = name.split(":", 1)[0].strip()
                    if not name or name.startswith("*") or name == "/":
                        continue
                    parameters.append((name, default.strip() or None))
                if parameters and parameters[0][0] in _SELF_RECEIVERS and definition.parent is not None:
                    parameters = parameters[1:]
        result = self._signatures[ref] = tuple(parameters)
        return result

    # -- search --------------------------------------------------------------------------

    def entries(self) -> tuple[EntryPoint, ...]:
        found = find_entry_points(self.indexes, self.graph, self.rule, self.texts, include_tests=self.options.include_tests)
        if self.options.include_tests:
            return found
        return tuple(entry for entry in found if not _dev_or_fixture_path(entry.ref.path))

    def run(self, entries: tuple[EntryPoint, ...]) -> tuple[list[Finding], int, int, int, int]:
        reached: dict[FunctionRef, tuple[EntryPoint, tuple[Edge, ...]]] = {}
        self._entry_refs = frozenset(entry.ref for entry in entries)
        queue: deque[FunctionRef] = deque()
        for entry in entries:
            if entry.ref not in reached and not self._entry_covered(entry):
                reached[entry.ref] = (entry, ())
                queue.append(entry.ref)
        while queue:
            node = queue.popleft()
            entry, trail = reached[node]
            for edge in self.callees(node):
                if edge.callee in reached:
                    continue
                call = self._call_for(edge)
                if not self._edge_blocked(edge, call) and not self._switched_off(edge, call):
                    reached[edge.callee] = (entry, (*trail, edge))
                    queue.append(edge.callee)
        reachable_any = self._reachable_ignoring_boundaries(entries)

        findings: list[Finding] = []
        hidden = total = covered_count = 0
        threshold = SEVERITY_ORDER[self.options.min_severity]
        for path in sorted(self.facts):
            facts = self.facts[path]
            for ref in sorted(facts.sites):
                enclosing = _enclosing_of(ref)
                sites = [site for site in facts.sites[ref] if site.effect in DB_EFFECTS]
                uncovered = [site for site in sites if not facts.covered(enclosing, site.call.line, site.call.callee, site.call.arguments)]
                total += len(sites)
                covered_count += len(sites) - len(uncovered)
                if ref not in reached and ref in reachable_any:
                    covered_count += len(uncovered)
        candidates: dict[FunctionRef, str] = {}
        reasons: dict[FunctionRef, str] = {}
        for ref in sorted(reached):
            graded = grade(self.path_of(ref))
            # The name says more than "re-runnable" does: the function rebuilds derived data.
            if graded is not None and (graded[0] in ("critical", "high") or graded[1] == RERUNNABLE) and derived(ref):
                graded = "medium", "by its name the function rebuilds derived data, which the next run rewrites"
            if graded is not None:
                candidates[ref], reasons[ref] = graded
        for ref, severity in candidates.items():
            if self._folded(ref, candidates, reached):
                continue
            if SEVERITY_ORDER[severity] > threshold:
                hidden += 1
                continue
            entry, trail = reached[ref]
            findings.append(self._finding(ref, entry, trail, self.path_of(ref), severity, reasons[ref]))
        findings.sort(key=Finding.sort_key)
        return findings, total, covered_count, self._unresolved(reached), hidden

    def _folded(self, ref: FunctionRef, candidates: Mapping[FunctionRef, str], reached: Mapping[FunctionRef, object]) -> bool:
        """Whether every uncovered call into ``ref`` comes from a reported function whose
        own sequence runs through that call: the finding then sits at the callers, where
        one transaction would cover both (an entry point is never folded)."""
        callers = [edge for edge in self.graph.callers(ref) if edge.caller in reached]
        callers += [edge for edge in self._dispatch_callers(ref) if edge.caller in reached]
        if not callers or ref in self._entry_refs or any(edge.caller == ref for edge in callers):
            return False
        for edge in callers:
            if self._edge_blocked(edge, self._call_for(edge)):
                continue
            if edge.caller not in candidates:
                return False
            if not any(step.callee == ref and step.line == edge.line for step in self.path_of(edge.caller)):
                return False
        return True

    def _dispatch_callers(self, ref: FunctionRef) -> list[Edge]:
        if self._dispatch_into is None:
            self._dispatch_into = defaultdict(list)
            for edge in sorted(self.dispatch.kinds):
                self._dispatch_into[edge.callee].append(edge)
        return self._dispatch_into.get(ref, [])

    def _reachable_ignoring_boundaries(self, entries: tuple[EntryPoint, ...]) -> set[FunctionRef]:
        seen = {entry.ref for entry in entries}
        queue = deque(sorted(seen))
        while queue:
            for edge in self.callees(queue.popleft()):
                if edge.callee not in seen:
                    seen.add(edge.callee)
                    queue.append(edge.callee)
        return seen

    def _unresolved(self, reached: Mapping[FunctionRef, object]) -> int:
        """Calls in reached functions through ``self``/``cls``/``this`` or a bare name that
        resolve to nothing in the repository (imports and builtins excluded)."""
        by_function: dict[str, dict[str, list[CallSite]]] = {}
        imported_names: dict[str, set[str]] = {}
        count = 0
        for ref in sorted(reached):
            index = self.indexes.get(ref.path)
            if index is None or ref.qualname in (MAIN_FUNCTION, MODULE_FUNCTION):
                continue
            if ref.path not in by_function:
                table: dict[str, list[CallSite]] = defaultdict(list)
                for call in index.calls:
                    if call.enclosing is not None:
                        table[call.enclosing].append(call)
                by_function[ref.path] = table
                imported_names[ref.path] = {record.alias or record.name or record.module.split(".")[0] for record in index.imports}
            calls = by_function[ref.path].get(ref.qualname, ())
            if not calls:
                continue
            resolved = {edge.line for edge in self.callees(ref)}
            imported = imported_names[ref.path]
            for call in calls:
                if call.line in resolved:
                    continue
                parts = call.callee.split(".")
                bare = len(parts) == 1 and parts[0] not in _PYTHON_BUILTINS and parts[0] not in imported
                if bare or (len(parts) == 2 and parts[0] in _SELF_RECEIVERS):
                    count += 1
        return count

    # -- findings ------------------------------------------------------------------------

    def _finding(
        self, ref: FunctionRef, entry: EntryPoint, trail: tuple[Edge, ...], steps: tuple[Step, ...], severity: str, graded: str
    ) -> Finding:
        rule = self.rule
        facts = self.facts[ref.path]
        first = steps[0]
        effects = [effect for step in steps for effect in step.effects]
        chain: list[ChainStep] = []
        hops = [entry.ref, *(edge.callee for edge in trail)]
        for position, hop in enumerate(hops):
            if position == len(hops) - 1:
                line, note = first.line, ""
            else:
                edge = trail[position]
                line = edge.line  # where this function calls the next step (docs/answer-contract.md)
                how = self.dispatch.kinds.get(edge, "resolved by name") if edge.approximate else ""
                note = f"calls {edge.callee.qualname} at line {edge.line}" + (f" ({how})" if how else "")
            if position == 0:
                note = f"entry point: {entry.detail}" + (f"; {note}" if note else "")
            chain.append(ChainStep(path=hop.path, line=line, function=hop.qualname, verified=True, note=note))
        steps_text = "; ".join(f"line {step.line}: {step.text}" + _effects_note(step) for step in steps)
        route = " -> ".join(f"{hop.path}:{hop.qualname}" for hop in hops)
        title = _title(ref, effects)
        reach = (
            f"reaches {ref.qualname} through {len(trail)} call{'s' if len(trail) != 1 else ''} ({route})"
            if trail
            else f"writes in its own body ({route})"
        )
        explanation = (
            f"{entry.kind} entry point {entry.ref.qualname} ({entry.detail}) {reach}, and no transaction boundary "
            f"(decorator, with-block or transaction handle) covers the path. On one path: {steps_text}."
        )
        if len(steps) > 1:
            explanation += _consequence(effects)
        if graded:
            explanation += f" Graded {severity}: {graded}."
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
            sequence=_sequence(ref, steps),
        )


def _sequence(ref: FunctionRef, steps: tuple[Step, ...]) -> tuple[EffectSite, ...]:
    """Every effect on ``ref``'s path where it happens: a call's effects at their own lines
    in the callee, each of the kind the call site counts it as (a bookkeeping callee's
    writes are bookkeeping)."""
    sites: list[EffectSite] = []
    for step in steps:
        if step.callee is not None and step.inner:
            inner = _sequence(step.callee, step.inner)
            sites += [EffectSite(site.path, site.line, site.function, effect.value) for site, effect in zip(inner, step.effects, strict=True)]
        else:
            sites += [EffectSite(ref.path, step.line, ref.qualname, effect.value) for effect in step.effects]
    return tuple(sites)


def _without_idle_commits(
    steps: tuple[Step, ...], facts: _FileFacts, body: tuple[Node | None, bytes, int] | None = None
) -> tuple[Step, ...]:
    """``steps`` less each direct commit with nothing pending since the commit just before
    it on the path: no call, assignment or other statement between the two (a callee that
    commits, then ``session.commit()`` again) outside the if/elif/else arms the path does
    not take (read from ``body``, the function's parsed body as :meth:`_body` gives it). An
    attribute assignment in between (``team.captain_id = user.id``) is a pending write and
    keeps the commit."""
    node, _, offset = body if body is not None else (None, b"", 0)
    kept: list[Step] = []
    for step in steps:
        previous = kept[-1] if kept else None
        idle = (
            previous is not None
            and step.callee is None
            and step.effects == (Effect.COMMIT,)
            and previous.effects[-1] is Effect.COMMIT
            and previous.line < step.line
            and not _pending_between(previous.line, step.line, facts, node, offset)
        )
        if not idle:
            kept.append(step)
    return tuple(kept)


def _pending_between(first: int, last: int, facts: _FileFacts, body: Node | None, offset: int) -> bool:
    """Whether a statement between lines ``first`` and ``last`` (both on one path) may
    leave something for the second commit: a call or an assignment in an arm the path takes."""
    pending = [line for line in range(first + 1, last) if _PENDING.search(facts.line_text(line))]
    if not pending or body is None:
        return bool(pending)
    untaken = paths.untaken_arms(body, first - offset) + paths.untaken_arms(body, last - offset)
    return any(not any(start <= line - offset <= end for start, end in untaken) for line in pending)


def _title(ref: FunctionRef, effects: list[Effect]) -> str:
    writes = sum(effect in DB_EFFECTS for effect in effects)
    side_effects = sum(effect in SIDE_EFFECTS for effect in effects)
    commits = effects.count(Effect.COMMIT) + effects.count(Effect.REPOSITORY)
    if writes == 1 and not side_effects:
        return f"Database write outside a transaction in {ref.qualname}"
    if commits == writes == 1:
        text = f"A commit and then an irreversible side effect in {ref.qualname}"
    elif commits == writes:
        noun = "commits" if Effect.COMMIT in effects else "separately committed repository writes"
        text = f"{writes} {noun} on one path in {ref.qualname}"
    elif writes == 1:
        text = f"Database write outside a transaction in {ref.qualname}"
    else:
        text = f"{writes} database writes outside a transaction in {ref.qualname}"
    if side_effects and not text.startswith("A commit"):
        text += f", with {side_effects} irreversible side effect{'s' if side_effects > 1 else ''}"
    return text


def _consequence(effects: list[Effect]) -> str:
    if any(effect in WRITES for effect in effects):
        return " Each write commits on its own: a failure between them leaves partial state."
    if any(effect in SIDE_EFFECTS for effect in effects):
        return " What is committed stays when the side effect after it fails, and the side effect cannot be undone."
    return " Each commit stands on its own: a failure after the first leaves it in place."


def _effects_note(step: Step) -> str:
    if step.callee is None:
        return f" ({step.effects[0].value})"
    counts = {effect: step.effects.count(effect) for effect in step.effects}
    return " (" + ", ".join(f"{count} {effect.value}{'s' if count > 1 else ''}" for effect, count in counts.items()) + ")"


def _false_keywords(call: CallSite | None) -> frozenset[str]:
    """Keyword parameters a call passes as a false constant (``save=False``)."""
    if call is None or "=" not in call.arguments or not _MAYBE_FALSE.search(call.arguments):
        return frozenset()
    names = set()
    for argument in split_arguments(call.arguments):
        match = _FALSE_KEYWORD.match(argument)
        if match:
            names.add(match.group(1))
    return frozenset(names)


def _dev_or_fixture_path(path: str) -> bool:
    """Code that is not how production is entered: tests, fixtures, dev-data commands and
    scripts (``populate.py``, ``seed_*.py``, ``*fake*.py``)."""
    directories = path.split("/")[:-1]
    dev_data = _DEV_DATA_COMMAND.search(path) or _DEV_DATA_SCRIPT.search(path)
    return is_test_path(path) or bool(dev_data) or any(part in _FIXTURE_DIRECTORIES for part in directories)


def _class_of(method: FunctionRef) -> FunctionRef:
    """The class a method is defined in (its qualname less the last name)."""
    return FunctionRef(method.path, method.qualname.rsplit(".", 1)[0])


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
    indexes: Mapping[str, FileIndex],
    texts: Mapping[str, str],
    rule: Rule,
    graph: CallGraph | None = None,
    options: TxOptions | None = None,
) -> StaticResult:
    """Find sequences of database effects that an entry point reaches outside any
    transaction (see the module docstring for what counts and how severe it is).

    One finding per function that sequences the effects, carrying the shortest uncovered
    chain from an entry point; findings are sorted by ``Finding.sort_key``. The result is
    deterministic for the same inputs.
    """
    graph = graph if graph is not None else CallGraph.build(indexes)
    options = options if options is not None else TxOptions()
    # The analysis keeps nearly everything it allocates until it returns: young collections
    # in between would only re-scan its live tables.
    with collection_paused():
        analysis = _Analysis(indexes, texts, rule, graph, options)
        entries = analysis.entries()
        findings, sinks, covered, unresolved, hidden = analysis.run(entries)
    return StaticResult(
        findings=tuple(findings),
        entry_points=len(entries),
        sinks=sinks,
        covered_sinks=covered,
        unresolved_calls=unresolved,
        hidden_findings=hidden,
    )


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
    while True:
        stop = _PAREN_STOPS.search(text, index)  # no other character changes the state
        if stop is None:
            return None
        index = stop.start()
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


