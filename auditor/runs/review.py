"""Review: audit a change, not a repository — report only findings whose call chain the
change touches, tell new findings from ones the base already had, and say how much of the
changed code the model saw.

Inputs: a frozen ``ReviewConfig`` (the scan settings, the base revision, an optional head
revision, suppression options). Output: ``ReviewResult`` — a ``ScanResult`` for the
reporters holding only the findings that touch the change (``review`` says which are new
and where each one's changed line is), the suppressed ones, and the ``Diff``.

Steps:

1. ``compute_diff`` between base and head (the working tree when no head is given).
2. Scan the head with ``run_scan`` (a temporary ``git worktree`` when a head revision is
   given) and index it (cached) for function spans and the call graph.
3. A finding touches the change when its sink or any chain step lies on a changed line, or
   in a function whose span the change touches (added, changed or deleted lines). Its
   primary location becomes that changed line — exact line hits first, nearest the sink
   first — so a pull-request view shows it where the author changed code.
4. Scan the base in a temporary ``git worktree``; a touching finding whose fingerprint the
   base has too (base paths mapped through the rename map first, so a renamed file keeps
   its findings) is "existing", else "new".
5. Apply inline ignore comments and the baseline; list the coverage of changed files and
   their call-graph neighbours (full / skeleton / not packed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from auditor.callgraph.graph import CallGraph
from auditor.findings.grounding import file_lines
from auditor.findings.fingerprints import finding_fingerprint
from auditor.findings.model import Finding
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.report.model import (
    Coverage,
    FileCoverage,
    ReviewedFinding,
    ReviewSummary,
    ScanResult,
)
from auditor.config.scan import ScanConfig
from auditor.walk.diff import (
    Diff,
    GitError,
    Hunk,
    compute_diff,
    repository_top,
    resolve_revision,
    run_git,
)
from auditor.runs.prepare import PreparedRepository, prepare_repository
from auditor.runs.scan import run_scan
from auditor.runs.scope import glob_base_of
from auditor.runs.worktrees import review_worktree


class ScanFunction(Protocol):
    """How review scans one tree: ``run_scan``'s signature (``prepared`` reuses the walk)."""

    def __call__(
        self, config: ScanConfig, progress: ProgressCallback = ..., *, prepared: PreparedRepository | None = ...
    ) -> ScanResult: ...


@dataclass(frozen=True)
class ReviewConfig:
    """One review: scan settings (``scan.root`` is the directory to review, inside a git
    work tree), the base revision, the head revision (None: the working tree), whether
    existing findings block (``include_existing``, ``--all``) and whether to scan the base
    at all. Suppressions (inline comments, ``scan.baseline``) apply once, in the head scan;
    the base is scanned without the baseline so that every existing finding is known."""

    scan: ScanConfig
    base: str
    head: str | None = None
    include_existing: bool = False
    compare_base: bool = True


@dataclass(frozen=True)
class ReviewResult:
    """The review's report data and the diff it was computed from."""

    result: ScanResult
    diff: Diff

    @property
    def blocking(self) -> int:
        """Findings that fail the run under ``--error``: new ones (and existing ones with ``--all``)."""
        review = self.result.review
        return review.blocking_count if review is not None else self.result.blocking_count


@dataclass(frozen=True)
class ChangeTouch:
    """Where a finding's chain meets the change."""

    path: str
    line: int
    function: str
    reason: str


@dataclass(frozen=True)
class _Tree:
    """A scanned tree: its scan result and prepared index."""

    result: ScanResult
    indexes: Mapping[str, FileIndex]
    graph: CallGraph
    texts: Mapping[str, str]


def run_review(config: ReviewConfig, progress: ProgressCallback = no_progress, *, scan: ScanFunction = run_scan) -> ReviewResult:
    """Review the change from ``config.base`` to ``config.head`` under ``config.scan.root``.

    ``scan`` runs one scan of a tree (``run_scan`` by default; an embedding application may
    pass one that reuses a loaded engine). Raises ``GitError`` when the root is not in a
    git work tree or a revision does not resolve, and what ``scan`` raises.
    """
    # A subdirectory (a monorepo's project) is reviewed within its whole repository: the
    # call graph sees callers outside it, and the findings inside it are reported, with
    # repository-relative paths. Changes outside it are left out.
    top, prefix = repository_top(config.scan.root.resolve())
    diff = compute_diff(top, config.base, config.head).under(prefix)
    progress(
        ProgressEvent(
            stage="review",
            message=f"{len(diff.changed)} changed file(s), {len(diff.deleted)} deleted, {len(diff.renames)} renamed",
        )
    )
    # The head and base trees may be temporary worktrees: their caches are kept under the
    # repository's own name. Every cache is keyed by content, so the trees share what they
    # have in common (all but the change) and the next review finds it again.
    scope = config.scan.scope
    # --include/--exclude are relative to the reviewed directory, as in `auditor scan PATH`.
    config = replace(config, scan=glob_base_of(config.scan, prefix))
    with _tree_at(top, diff.head if config.head is not None else None) as head_root:
        if not (head_root / prefix).is_dir():
            raise GitError(f"{config.scan.root} does not exist at the head revision {diff.head[:12]}")
        head = _scan_tree(replace(config.scan, root=head_root, cache_scope=scope, tx_models=_models_of(config.scan)), progress, scan, diff)
    head = _inside(head, prefix)
    base_fingerprints: frozenset[str] = frozenset()
    if config.compare_base:
        with _tree_at(top, diff.base) as base_root:
            # A directory the change adds has no base: nothing in it existed before.
            if (base_root / prefix).is_dir():
                progress(ProgressEvent(stage="review", message=f"scanning the base {diff.base[:12]} for existing findings"))
                base = _scan_tree(
                    replace(config.scan, root=base_root, cache_scope=scope, baseline=None, tx_models=_models_of(config.scan)),
                    progress, scan,
                )
                base_fingerprints = base_fingerprints_after_renames(base.result.findings, base.texts, diff.renames)
            else:
                progress(ProgressEvent(stage="review", message=f"the base {diff.base[:12]} has no {config.scan.root}: every finding is new"))

    spans = changed_functions(diff, head.indexes)
    touched: list[tuple[Finding, ChangeTouch]] = []
    for finding in head.result.findings:
        touch = locate_touch(finding, diff, spans)
        if touch is not None:
            touched.append((finding, touch))
    # The head scan applied the suppressions: keep those on the change.
    suppressed = tuple(item for item in head.result.suppressed if locate_touch(item.finding, diff, spans) is not None)
    changed_paths = {changed.path for changed in diff.changed}
    # A pull-request comment talks about the change: warnings about other files stay out.
    warnings = sorted(
        warning
        for warning in head.result.warnings
        if warning.split(":", 1)[0] in changed_paths or warning.split(":", 1)[0] not in head.texts
    )

    reviewed = tuple(
        ReviewedFinding(
            fingerprint=finding.fingerprint,
            status="existing" if finding.fingerprint in base_fingerprints else "new",
            path=touch.path,
            line=touch.line,
            function=touch.function,
            touched_by=touch.reason,
            blocks=head.result.blocks(finding),
        )
        for finding, touch in sorted(touched, key=lambda pair: pair[0].sort_key())
    )
    summary = ReviewSummary(
        base=diff.base,
        head=diff.head,
        changed_files=tuple(sorted(changed_paths)),
        deleted_files=diff.deleted,
        renamed=tuple(sorted((old, new) for new, old in diff.renames.items())),
        findings=reviewed,
        outside_diff=len(head.result.findings) + len(head.result.suppressed) - len(touched) - len(suppressed),
        coverage=change_coverage(diff, head.result.coverage, head.graph, head.texts),
        base_compared=config.compare_base,
        existing_blocking=config.include_existing,
    )
    notices = head.result.notices
    if not config.compare_base:
        notices = (*notices, "the base was not scanned: every finding on the change counts as new")
    result = replace(
        head.result,
        root=config.scan.root.resolve().name or str(config.scan.root),
        findings=tuple(finding for finding, _ in touched),
        suppressed=suppressed,
        warnings=tuple(warnings),
        notices=notices,
        review=summary,
    )
    return ReviewResult(result=result, diff=diff)


def _inside(tree: _Tree, prefix: str) -> _Tree:
    """``tree`` with only the findings (and suppressed findings) whose sink is under ``prefix``."""
    if not prefix:
        return tree
    result = tree.result
    return replace(tree, result=replace(
        result,
        findings=tuple(finding for finding in result.findings if finding.path.startswith(prefix)),
        suppressed=tuple(item for item in result.suppressed if item.finding.path.startswith(prefix)),
    ))


def _scan_tree(config: ScanConfig, progress: ProgressCallback, scan: ScanFunction, diff: Diff | None = None) -> _Tree:
    """Walk and index one tree, then scan it; with a diff, the pack carries the changed files
    and their call-graph neighbours first."""
    prepared = prepare_repository(
        config.root, config.walk, use_cache=config.use_cache, progress=progress, cache_scope=config.cache_scope,
        parse_budget_s=config.parse_budget_s,
    )
    if diff is not None:
        config = replace(config, window=replace(config.window, seed_paths=review_seed_paths(diff, prepared.graph)))
    result = scan(config, progress, prepared=prepared)
    return _Tree(result=result, indexes=prepared.indexes, graph=prepared.graph, texts=prepared.texts)


@contextlib.contextmanager
def _tree_at(root: Path, commit: str | None) -> Iterator[Path]:
    """``root`` itself when ``commit`` is None, else ``root``'s counterpart in a temporary
    detached worktree at ``commit`` (removed afterwards)."""
    if commit is None:
        yield root
        return
    with checkout_revision(root, commit) as tree_root:
        yield tree_root


@contextlib.contextmanager
def checkout_revision(root: Path, revision: str) -> Iterator[Path]:
    """The directory matching ``root`` in a temporary detached ``git worktree`` at ``revision``.

    The worktree is removed (and its registration pruned) on exit, also after an error or
    a signal; worktrees of earlier, killed reviews are removed first (auditor.runs.worktrees).
    Raises ``GitError`` when the worktree cannot be created.
    """
    commit = resolve_revision(root, revision)
    prefix = run_git(root, ["rev-parse", "--show-prefix"]).decode("utf-8", "surrogateescape").strip()
    with review_worktree(root, commit) as tree:
        yield tree / prefix if prefix else tree


def base_fingerprints_after_renames(
    findings: tuple[Finding, ...], texts: Mapping[str, str], renames: Mapping[str, str]
) -> frozenset[str]:
    """Fingerprints of the base's findings as they would read on the head.

    A finding in a file the change renamed gets the fingerprint it has under the new path
    (same rule, functions and write calls; the entry point's file renamed too), so a rename alone never makes a finding "new".
    ``texts`` are the base's file texts; ``renames`` maps new path -> old path.
    """
    new_path_of = {old: new for new, old in renames.items()}
    mapped: set[str] = set()
    for finding in findings:
        touched = {finding.path, *(site.path for site in finding.sequence), *(step.path for step in finding.chain[:1])}
        if not touched & new_path_of.keys():
            mapped.add(finding.fingerprint)
            continue
        lines = {path: file_lines(texts.get(path, "")) for path in {finding.path, *(site.path for site in finding.sequence)}}
        mapped.add(finding_fingerprint(finding, lines.__getitem__, lambda path: new_path_of.get(path, path)))
    return frozenset(mapped)


def _models_of(scan: ScanConfig) -> tuple[Path, ...]:
    """The scan's transaction-model files as absolute paths in the user's checkout: a
    relative one is read from the reviewed directory, as ``auditor scan PATH`` reads it, and
    the base is scanned with the same rows as the head (a file the change adds included)."""
    return tuple(path.resolve() for path in scan.tx_model_paths)


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


def locate_touch(finding: Finding, diff: Diff, spans: Mapping[tuple[str, str], tuple[int, int]]) -> ChangeTouch | None:
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


def change_coverage(
    diff: Diff, coverage: Coverage, graph: CallGraph, texts: Mapping[str, str]
) -> tuple[FileCoverage, ...]:
    """How the model saw each changed source file and each call-graph neighbour of one.

    Changed files are those the walk kept or whose extension names a supported language
    (a changed source file the walk skipped shows as "not packed"); neighbours are files
    linked to a changed file by a call edge in either direction.
    """
    full, skeleton = set(coverage.full), set(coverage.skeleton)

    def tier(path: str) -> str:
        if path in full:
            return "full"
        if path in skeleton:
            return "skeleton"
        return "not packed"

    changed = sorted(
        changed.path for changed in diff.changed if changed.path in texts or language_for_path(changed.path) is not None
    )
    neighbours = sorted({other for path in changed for other in graph.file_neighbors(path)} - set(changed))
    return tuple(
        [FileCoverage(path, "changed", tier(path)) for path in changed]
        + [FileCoverage(path, "neighbour", tier(path)) for path in neighbours]
    )


def review_seed_paths(diff: Diff, graph: CallGraph) -> tuple[str, ...]:
    """Paths a diff-seeded pack should carry first: changed files, then their callers and callees."""
    changed = sorted(changed.path for changed in diff.changed)
    neighbours = sorted({other for path in changed for other in graph.file_neighbors(path)} - set(changed))
    return tuple(changed + neighbours)
