"""Diff scope: where a change meets a finding, and what a diff-scoped review packs.

Inputs: the ``Diff`` of a review, the head's prepared repository (index, call graph, texts)
and its static pass. Outputs: the changed functions (``changed_functions``), where a
finding's chain meets the change (``locate_touch``), and ``ReviewScope`` — the files that can
hold a finding touching the change, which the head's pack is restricted to
(``auditor.pack.change.ChangeScope``), with the changed lines every prompt lists:

- the changed files and, for each changed function, its callers' and callees' files (the
  call-graph neighbours a rule without a static analysis reasons over);
- the files of every static finding whose chain, sequence or sink touches the change (the
  static pass's entry -> ... -> sink subgraphs through the changed functions), so each is
  packed whole and its candidate listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.findings.model import Finding
from auditor.index.model import FileIndex
from auditor.pack.change import ChangeScope, LineRange
from auditor.walk.diff import ChangedFile, Diff, Hunk

FunctionSpans = Mapping[tuple[str, str], tuple[int, int]]
"""(path, qualname) -> (first line, last line) of the functions a change touches."""


@dataclass(frozen=True)
class ChangeTouch:
    """Where a finding's chain meets the change."""

    path: str
    line: int
    function: str
    reason: str


@dataclass(frozen=True)
class ReviewScope:
    """What a diff-scoped head run packs: ``change`` (the files and the changed lines),
    ``functions`` (the changed functions), and ``touching``, the static findings on the change."""

    change: ChangeScope
    functions: tuple[tuple[str, str], ...]
    touching: tuple[Finding, ...]


def review_scope(
    diff: Diff, indexes: Mapping[str, FileIndex], graph: CallGraph, texts: Mapping[str, str],
    static_findings: tuple[Finding, ...], *, neighbours: bool,
) -> ReviewScope:
    """The files that can hold a finding touching ``diff`` (see the module docstring) and its
    changed lines. ``neighbours``: whether to add the changed functions' callers and callees
    (a selected rule has no static analysis, so a model reasons over them unaided)."""
    spans = changed_functions(diff, indexes)
    changed = [item.path for item in diff.changed if item.path in texts]
    paths: set[str] = set(changed)
    touching = tuple(finding for finding in static_findings if locate_touch(finding, diff, spans) is not None)
    for finding in touching:
        paths.update(finding_paths(finding))
    if neighbours:
        for path, qualname in spans:
            ref = FunctionRef(path, qualname)
            paths.update(edge.caller.path for edge in graph.callers(ref))
            paths.update(edge.callee.path for edge in graph.callees(ref))
        # A change outside every function (module level) reaches the file's neighbours.
        functionless = {path for path in changed if not any(key[0] == path for key in spans)}
        for path in sorted(functionless):
            paths.update(graph.file_neighbors(path))
    lines = tuple((item.path, changed_ranges(item)) for item in sorted(diff.changed, key=lambda c: c.path) if item.path in texts)
    scope = ChangeScope(paths=tuple(sorted(path for path in paths if path in texts)), lines=tuple(x for x in lines if x[1]))
    return ReviewScope(change=scope, functions=tuple(sorted(spans)), touching=touching)


def finding_paths(finding: Finding) -> set[str]:
    """Every file a finding's sink, chain steps and sequence lie in."""
    return {finding.path, *(step.path for step in finding.chain), *(site.path for site in finding.sequence)}


def changed_ranges(changed: ChangedFile) -> tuple[LineRange, ...]:
    """The head-side line ranges a file's hunks add or change, merged where they meet; a pure
    deletion is the line after it."""
    ranges = sorted(
        (hunk.start, hunk.start + hunk.count - 1) if hunk.count else (hunk.start + 1, hunk.start + 1)
        for hunk in changed.hunks
    )
    merged: list[LineRange] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def changed_functions(diff: Diff, indexes: Mapping[str, FileIndex]) -> dict[tuple[str, str], tuple[int, int]]:
    """(path, qualname) -> span of every head function or method the change touches."""
    touched: dict[tuple[str, str], tuple[int, int]] = {}
    for changed in diff.changed:
        index = indexes.get(changed.path)
        if index is None:
            continue
        for definition in index.definitions:
            if definition.kind != "class" and changed.touches_span(definition.start_line, definition.end_line):
                touched[(changed.path, definition.qualname)] = (definition.start_line, definition.end_line)
    return touched


def locate_touch(finding: Finding, diff: Diff, spans: FunctionSpans) -> ChangeTouch | None:
    """Where the change touches the finding's chain or its sequence, or None when it does not.

    ``spans`` are the changed functions (``changed_functions``).
    Exact changed lines win over changed functions; the sink wins over the effects of its
    sequence (a write a helper makes further down), which win over the chain, nearer the
    sink first. For a changed function the location is its first changed line.
    """
    locations = [(finding.path, finding.line, finding.function, "sink")]
    locations += [(site.path, site.line, site.function, site.effect) for site in finding.sequence]
    locations += [(step.path, step.line, step.function, "chain step") for step in reversed(finding.chain)]
    for path, line, function, role in locations:
        changed = diff.file(path)
        if changed is not None and line > 0 and changed.touches_line(line):
            return ChangeTouch(path, line, function, _touch_reason(role, function, line))
    for path, _, function, role in locations:
        span = spans.get((path, function))
        changed = diff.file(path)
        if span is None or changed is None:
            continue
        line = _first_changed_line(changed.hunks, span)
        return ChangeTouch(path, line, function, _touch_reason(role, function, None))
    return None


def _touch_reason(role: str, function: str, line: int | None) -> str:
    """Why a finding is on the change: its sink, an effect of its sequence (``role`` names
    the effect) or a chain step changed, at ``line`` (None: somewhere in the function)."""
    if role == "sink":
        return "sink line changed" if line is not None else "the sink's function changed"
    article = "an" if role[:1] in "aeiou" else "a"
    what = f"chain step {function}" if role == "chain step" else f"{function} ({article} {role} on the sequence)"
    return f"{what} changed at line {line}" if line is not None else f"{what} changed"


def _first_changed_line(hunks: tuple[Hunk, ...], span: tuple[int, int]) -> int:
    """The first added/changed line inside ``span``; for a deletion, the line after it."""
    first, last = span
    candidates = [line for hunk in hunks for line in hunk.lines if first <= line <= last]
    candidates += [min(hunk.start + 1, last) for hunk in hunks if not hunk.count and first <= hunk.start < last]
    return min(candidates) if candidates else first
