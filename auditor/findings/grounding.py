"""Grounding: every claim checked against the repository the model was shown. A claim's
path, lines, function and each call edge are resolved against the packed files, the
tree-sitter function index and the call graph; the result is a grounded ``Finding`` or a
``Rejected`` claim with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fnmatch import translate
from functools import lru_cache
from types import MappingProxyType
from typing import Final, Protocol

from auditor.findings.answer import ParsedAnswer
from auditor.findings.fingerprints import finding_fingerprint
from auditor.findings.model import (
    ChainStep,
    Claim,
    ClaimedStep,
    Finding,
    Rejected,
)
from auditor.rules.loader import Rule
from auditor.rules.severity import Severity


class EdgeOracle(Protocol):
    """The static call graph, asked whether one function can call another."""

    def plausible_edge(self, caller_path: str, caller_function: str, callee_path: str, callee_function: str) -> bool:
        """True when the caller can plausibly call the callee."""
        ...


class FunctionLocator(Protocol):
    """The function index (tree-sitter): which function holds a line, where a function is."""

    def enclosing_function(self, path: str, line: int) -> str | None:
        """Qualified name of the innermost function or method containing ``line``, or None."""
        ...

    def function_lines(self, path: str, function: str) -> tuple[int, int] | None:
        """First and last line of a function named by qualname or unique bare name, or None."""
        ...


VIRTUAL_FILE_REASON: Final = "cites a recall-probe virtual file"


UNCONFIRMED_CHAIN_NOTE: Final = "no edge of this chain is confirmed by the call graph"


MODULE_LEVEL: Final = "<module>"


# The longest chain grounded (docs/answer-contract.md, "Output limits"); real call chains
# are a few dozen steps, and each step costs a lookup in its file.
MAX_CHAIN_STEPS: Final = 1_000


@dataclass(frozen=True)
class RepositoryView:
    """What grounding checks claims against: the packed files (path -> text, the set the
    model was shown), the function index, the call graph, and the canaries' virtual paths."""

    files: Mapping[str, str]
    locator: FunctionLocator | None = None
    edges: EdgeOracle | None = None
    virtual_paths: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
        object.__setattr__(self, "virtual_paths", frozenset(self.virtual_paths))


@dataclass(frozen=True)
class _Step:
    """A chain step after resolution, before edge checks."""

    path: str
    line: int
    function: str
    located: bool
    notes: tuple[str, ...] = ()


_SEVERITY_SYNONYMS: Final = MappingProxyType(
    {
        "blocker": Severity.CRITICAL,
        "severe": Severity.CRITICAL,
        "error": Severity.HIGH,
        "major": Severity.HIGH,
        "moderate": Severity.MEDIUM,
        "warning": Severity.MEDIUM,
        "minor": Severity.LOW,
        "note": Severity.INFO,
        "informational": Severity.INFO,
        "information": Severity.INFO,
    }
)


# A callee expression before "(": dotted names, possibly chained through earlier calls.
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*(?:\.[\w$]+)*(?:\([^()]*\)(?:\.[\w$]+)+)*)\s*\(")


_STRING_LITERAL = re.compile(r"(['\"`])(.*?)(?<!\\)\1")


_ANY_CALL = re.compile(r"[\w$]\s*\(")


_FUNCTION_SEPARATORS = re.compile(r"::|#|->")


def normalise_path(path: str) -> str:
    """A claimed path in the packed form: forward slashes, no '.' segments or empty ones
    (``shop/./a.py``, ``shop//a.py``, a leading './' or '/'), and no word joiners (the packer
    breaks control-token text in paths with them). '..' is kept: such a path is rejected."""
    cleaned = path.strip().replace("\\", "/").replace("\u2060", "")
    return "/".join(segment for segment in cleaned.split("/") if segment not in ("", "."))


def normalise_severity(severity: str, rule: Rule) -> Severity:
    """A severity from a model's text; common synonyms mapped, anything unknown -> the rule's severity."""
    cleaned = severity.strip().lower()
    return _SEVERITY_SYNONYMS.get(cleaned) or Severity.parse(cleaned) or rule.severity


def file_lines(text: str) -> list[str]:
    """The lines of a file as editors and the function index number them (split on newline only)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


@lru_cache(maxsize=64)
def _lines_of(text: str) -> tuple[str, ...]:
    """``file_lines`` of a packed file, computed once per text (chains revisit files)."""
    return tuple(file_lines(text))


def is_sink_line(line_text: str, rule: Rule) -> bool:
    """Whether a line holds a call the rule counts as a sink.

    Callee expressions are matched against the rule's ``sinks`` patterns (fnmatch) and
    string literals against ``sql_write``. A rule with neither accepts any call.
    """
    if not rule.sinks and not rule.sql_write:
        return _ANY_CALL.search(line_text) is not None
    sinks = _sink_pattern(rule.sinks)
    for match in _CALL.finditer(line_text):
        expression = match.group(1)
        # In a chained call "a.filter(x).update" both "a.filter" and the whole chain are callees.
        callees = [expression[:index] for index, character in enumerate(expression) if character == "("]
        if any(sinks.match(callee) for callee in (*callees, expression)):
            return True
    if rule.sql_write:
        sql = rule.sql_write_pattern()
        assert sql is not None
        return any(sql.search(match.group(2)) for match in _STRING_LITERAL.finditer(line_text))
    return False


@lru_cache(maxsize=64)
def _sink_pattern(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex equivalent to fnmatchcase against any of the patterns (never matches when empty)."""
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{translate(pattern)})" for pattern in patterns))


def same_function(claimed: str, qualname: str | None) -> bool:
    """Whether a function name as the model wrote it designates ``qualname``.

    Accepts the qualname itself, a bare or partly qualified suffix of it ("save" or
    "OrderService.save" for "OrderService.save"), a longer dotted prefix ending in it
    ("app.orders.save_order"), "::"/"#" separators and a trailing "()".
    """
    if qualname is None:
        return False
    name = _clean_function_name(claimed)
    if not name:
        return False
    return name == qualname or qualname.endswith("." + name) or name.endswith("." + qualname)


def names_enclosing_scope(claimed: str, qualname: str | None) -> bool:
    """Whether ``claimed`` designates ``qualname`` itself or a class (or outer function)
    that contains it: a model naming the class "Order" for a line inside
    "Order.mark_shipped" points at that method."""
    if same_function(claimed, qualname):
        return True
    if qualname is None or "." not in qualname:
        return False
    scope = qualname.rsplit(".", 1)[0]
    return names_enclosing_scope(claimed, scope)


def _clean_function_name(name: str) -> str:
    cleaned = _FUNCTION_SEPARATORS.sub(".", name.strip())
    if "(" in cleaned:
        cleaned = cleaned.split("(", 1)[0]
    for prefix in ("def ", "async def ", "func ", "function "):
        cleaned = cleaned.removeprefix(prefix)
    return cleaned.strip().strip(".")


def ground_claim(
    claim: Claim,
    repo: RepositoryView,
    rules: Mapping[str, Rule],
    window: int | None = None,
) -> Finding | Rejected:
    """Check one claim against the repository; a grounded Finding or a Rejected with its reason.

    The sink must be in the packed set, its line in range, and (with a function index)
    inside the named function. When the line lies outside that function, or on a line
    that is not a sink of the rule, the sink is relocated to the nearest sink line of the
    named function (noted on the last chain step); with no such line, a line outside the
    function is rejected. Chain steps are checked for existence and call-graph edges and
    marked ``verified`` accordingly; unconfirmed steps stay in the chain with a note.
    """

    def reject(reason: str) -> Rejected:
        return Rejected(reason=reason, claim=claim, window=window)

    rule = rules.get(claim.rule) or rules.get(claim.rule.strip().lower())
    if rule is None:
        return reject(f"unknown rule: {claim.rule}")
    cited = [claim.sink.path, *(step.path for step in claim.chain)]
    if any(normalise_path(path) in repo.virtual_paths for path in cited):
        return reject(VIRTUAL_FILE_REASON)
    path = normalise_path(claim.sink.path)
    text = repo.files.get(path)
    if text is None:
        return reject(f"path not in the packed repository: {claim.sink.path}")
    lines = file_lines(text)
    located = _locate_sink(claim.sink, path, lines, repo.locator, rule)
    if isinstance(located, str):
        return reject(located)
    line, function, sink_note = located
    chain = _ground_chain(claim.chain, path, line, function, sink_note, repo)
    finding = Finding(
        rule=rule.id,
        severity=normalise_severity(claim.severity, rule),
        title=claim.title or rule.title,
        path=path,
        line=line,
        function=function,
        chain=chain,
        explanation=claim.explanation,
        found_by=("model",),
        fingerprint="",
        window=window,
    )
    return replace(finding, fingerprint=finding_fingerprint(finding, lambda _: lines))


def ground_answer(
    answer: ParsedAnswer,
    repo: RepositoryView,
    rules: Mapping[str, Rule],
    window: int | None = None,
) -> tuple[tuple[Finding, ...], tuple[Rejected, ...]]:
    """Ground every claim of a parsed answer: (findings, rejected), in the answer's order."""
    findings: list[Finding] = []
    rejected: list[Rejected] = []
    for claim in answer.claims:
        outcome = ground_claim(claim, repo, rules, window)
        if isinstance(outcome, Finding):
            findings.append(outcome)
        else:
            rejected.append(outcome)
    return tuple(findings), tuple(rejected)


def _locate_sink(
    sink: ClaimedStep,
    path: str,
    lines: list[str],
    locator: FunctionLocator | None,
    rule: Rule,
) -> tuple[int, str, str] | str:
    """(line, qualname, note) of the sink, or the reason it cannot be located.

    The sink is anchored on the line where its call starts, as the static pass anchors it,
    so a write whose SQL sits on a continuation line has one fingerprint however it is cited.
    """
    located = _locate_sink_line(sink, path, lines, locator, rule)
    if isinstance(located, str):
        return located
    line, qualname, note = located
    start = call_start_line(lines, line)
    if start == sink.line:
        note = ""
    elif start != line:
        note = f"sink moved from line {sink.line} to {start}" if sink.line is not None else note
    return start, qualname, note


def call_start_line(lines: list[str], line: int, reach: int = 8) -> int:
    """The line where a call still open at ``line`` starts (``line`` itself when none is open).

    Counts parentheses backwards over at most ``reach`` lines; strings are not parsed, so a
    stray parenthesis inside a literal can only make the search stop early.
    """
    balance = 0
    for number in range(line - 1, max(line - 1 - reach, 0), -1):
        text = lines[number - 1]
        balance += text.count("(") - text.count(")")
        if balance > 0:
            return number
    return line


def _locate_sink_line(
    sink: ClaimedStep,
    path: str,
    lines: list[str],
    locator: FunctionLocator | None,
    rule: Rule,
) -> tuple[int, str, str] | str:
    """(line, qualname, note) of the sink, or the reason it cannot be located."""
    line = sink.line
    if line is not None and not 1 <= line <= len(lines):
        return f"line {line} out of range (file has {len(lines)} lines)"
    claimed = _clean_function_name(sink.function)
    if locator is None:
        if line is None:
            return "sink has no line number"
        if not claimed:
            return "sink names no function and no function index is available"
        return line, claimed, ""

    enclosing = locator.enclosing_function(path, line) if line is not None else None
    if line is not None and (not claimed or names_enclosing_scope(claimed, enclosing)):
        if enclosing is None:
            return line, MODULE_LEVEL, ""
        span = locator.function_lines(path, enclosing)
        if span is None or is_sink_line(lines[line - 1], rule):
            return line, enclosing, ""
        nearest = _nearest_sink_line(lines, span, rule, line)
        if nearest is None:
            # The model may know a write the rule's patterns do not list: keep its line.
            return line, enclosing, ""
        return nearest, locator.enclosing_function(path, nearest) or enclosing, f"sink moved from line {line} to {nearest}"

    if not claimed:
        return "sink has no line number and names no function"
    span = locator.function_lines(path, claimed)
    if span is None:
        if line is None:
            return f"function {sink.function} not found in {path}"
        return f"function {sink.function} does not contain line {line}"
    nearest = _nearest_sink_line(lines, span, rule, line if line is not None else span[0])
    if nearest is None:
        if line is None:
            return f"no sink of rule {rule.id} found in function {sink.function}"
        return f"function {sink.function} does not contain line {line}"
    qualname = locator.enclosing_function(path, nearest) or claimed
    moved_from = f"line {line}" if line is not None else "no line"
    return nearest, qualname, f"sink moved from {moved_from} to {nearest} inside {sink.function}"


def _nearest_sink_line(lines: list[str], span: tuple[int, int], rule: Rule, near: int) -> int | None:
    """The sink line of the rule inside ``span`` nearest to ``near`` (earlier line on ties)."""
    first, last = max(span[0], 1), min(span[1], len(lines))
    candidates = [number for number in range(first, last + 1) if is_sink_line(lines[number - 1], rule)]
    if not candidates:
        return None
    return min(candidates, key=lambda number: (abs(number - near), number))


def _ground_chain(
    claimed_chain: tuple[ClaimedStep, ...],
    sink_path: str,
    sink_line: int,
    sink_function: str,
    sink_note: str,
    repo: RepositoryView,
) -> tuple[ChainStep, ...]:
    """Resolve each step, make the last step the sink's function, then check every edge.

    A chain that returns to a function already on it has the loop left out, noted on that
    function's step (see ``_without_cycles``). A chain over ``MAX_CHAIN_STEPS`` keeps its
    first steps and its last; the step before the cut notes how many were left out."""
    claimed_chain, loops = _without_cycles(claimed_chain)
    left_out = len(claimed_chain) - MAX_CHAIN_STEPS
    if left_out > 0:
        claimed_chain = (*claimed_chain[: MAX_CHAIN_STEPS - 1], claimed_chain[-1])
    steps = [_resolve_step(step, repo) for step in claimed_chain]
    if left_out > 0:
        cut = steps[MAX_CHAIN_STEPS - 2]
        steps[MAX_CHAIN_STEPS - 2] = replace(cut, notes=(*cut.notes, f"{left_out:,} chain steps left out (chains are capped at {MAX_CHAIN_STEPS:,} steps)"))
    for index, looped in loops.items():
        if index < len(steps):
            note = f"the chain came back to this function: a cycle of {looped:,} step(s) left out"
            steps[index] = replace(steps[index], notes=(*steps[index].notes, note))
    sink_notes = (sink_note,) if sink_note else ()
    last_claimed = claimed_chain[-1] if claimed_chain else None
    if last_claimed is not None and normalise_path(last_claimed.path) == sink_path and (
        same_function(last_claimed.function, sink_function) or steps[-1].function == sink_function
    ):
        # The last step's line is the sink (docs/answer-contract.md, "Chain lines").
        steps[-1] = _Step(sink_path, sink_line, sink_function, True, sink_notes)
    else:
        if not claimed_chain:
            sink_notes = (*sink_notes, "no call chain given")
        else:
            sink_notes = (*sink_notes, "the chain did not end at the sink's function; step added")
        steps.append(_Step(sink_path, sink_line, sink_function, True, sink_notes))

    steps = [*(_at_call(steps[index], steps[index + 1], repo) for index in range(len(steps) - 1)), steps[-1]]
    edge_ok = [_edge_confirmed(steps[index], steps[index + 1], repo) for index in range(len(steps) - 1)]
    grounded: list[ChainStep] = []
    for index, step in enumerate(steps):
        notes = list(step.notes)
        verified = step.located
        if index > 0:
            confirmed, why = edge_ok[index - 1]
            if not confirmed:
                verified = False
                notes.append(why)
        elif len(steps) > 1 and not edge_ok[0][0]:
            verified = False
        grounded.append(ChainStep(step.path, step.line, step.function, verified, "; ".join(notes)))
    if len(grounded) > 1 and not any(confirmed for confirmed, _ in edge_ok):
        last = grounded[-1]
        note = f"{last.note}; {UNCONFIRMED_CHAIN_NOTE}" if last.note else UNCONFIRMED_CHAIN_NOTE
        grounded[-1] = replace(last, note=note)
    return tuple(grounded)


def _without_cycles(chain: tuple[ClaimedStep, ...]) -> tuple[tuple[ClaimedStep, ...], dict[int, int]]:
    """``chain`` with every loop cut out: where a step names a function (path and name)
    already on the chain, the steps since that function's first appearance are dropped and
    the later appearance takes its place (its line is the call onward). Also returns, per
    kept step's index, how many steps were dropped after it."""
    kept: list[ClaimedStep] = []
    dropped: dict[int, int] = {}
    first: dict[tuple[str, str], int] = {}

    def key(step: ClaimedStep) -> tuple[str, str]:
        return normalise_path(step.path), step.function.strip()

    for step in chain:
        earlier = first.get(key(step))
        if earlier is None:
            first[key(step)] = len(kept)
            kept.append(step)
            continue
        for gone in kept[earlier + 1:]:
            first.pop(key(gone), None)
        loop = len(kept) - earlier + sum(dropped.pop(index) for index in [i for i in dropped if i > earlier])
        dropped[earlier] = dropped.get(earlier, 0) + loop
        del kept[earlier + 1:]
        kept[earlier] = step
    return tuple(kept), dropped


def _at_call(step: _Step, callee: _Step, repo: RepositoryView) -> _Step:
    """``step`` on the line where its function calls ``callee`` (the chain-line rule: each
    step's line is its call to the next step). The model's line is kept when it is such a
    call or when none is found; otherwise the step moves to the nearest one, noted."""
    if not step.located or repo.locator is None or callee.function in ("", MODULE_LEVEL):
        return step
    text = repo.files.get(step.path)
    span = repo.locator.function_lines(step.path, step.function) if step.function != MODULE_LEVEL else None
    if text is None or span is None:
        return step
    lines = _lines_of(text)
    name = re.split(r"[.:#]", callee.function)[-1]
    calls = re.compile(rf"(?<![\w$]){re.escape(name)}\s*[(<]")
    found = [
        number
        for number in range(max(span[0], 1), min(span[1], len(lines)) + 1)
        if calls.search(lines[number - 1]) and same_function(step.function, repo.locator.enclosing_function(step.path, number))
    ]
    if not found or step.line in found:
        return step
    nearest = min(found, key=lambda number: (abs(number - step.line), number))
    note = f"line moved from {step.line} to {nearest}, where it calls {callee.function}" if step.line else ""
    return replace(step, line=nearest, notes=(*step.notes, note) if note else step.notes)


def _edge_confirmed(caller: _Step, callee: _Step, repo: RepositoryView) -> tuple[bool, str]:
    if not (caller.located and callee.located):
        return False, f"call from {caller.function} not checked: a step could not be located"
    if repo.edges is None:
        return False, "no call graph to confirm the call"
    if repo.edges.plausible_edge(caller.path, caller.function, callee.path, callee.function):
        return True, ""
    return False, f"the call graph has no call from {caller.function} to {callee.function}"


def _resolve_step(step: ClaimedStep, repo: RepositoryView) -> _Step:
    """Find a chain step in the repository: its path, its function's qualname and a line in it."""
    path = normalise_path(step.path)
    claimed = _clean_function_name(step.function)
    line = step.line if step.line is not None else 0
    text = repo.files.get(path)
    if text is None:
        return _Step(path, line, claimed, False, (f"path not in the packed repository: {step.path}",))
    if repo.locator is None:
        return _Step(path, line, claimed, False, ("no function index to locate the function",))
    line_count = len(_lines_of(text))
    locator = repo.locator
    if step.line is not None and 1 <= step.line <= line_count:
        enclosing = locator.enclosing_function(path, step.line)
        if enclosing is not None and (not claimed or names_enclosing_scope(claimed, enclosing)):
            return _Step(path, step.line, enclosing, True)
    if not claimed:
        return _Step(path, line, claimed, False, ("no function named and the line is not inside one",))
    span = locator.function_lines(path, claimed)
    if span is None:
        return _Step(path, line, claimed, False, (f"function {step.function} not found in {path}",))
    qualname = claimed
    for probe_line in (span[0], span[0] + 1, span[1]):
        candidate = locator.enclosing_function(path, probe_line)
        if same_function(claimed, candidate):
            qualname = candidate or claimed
            break
    notes: tuple[str, ...] = ()
    if step.line is not None:
        notes = (f"line {step.line} is not inside {step.function}; using its first line",)
    return _Step(path, span[0], qualname, True, notes)
