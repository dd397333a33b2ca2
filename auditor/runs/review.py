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
   given). By default the pack is diff-scoped (``auditor.runs.diffscope``): only the
   changed files, the files of the static chains through the changed functions and their
   callers and callees are packed, and every prompt lists the changed lines. ``full``
   (``--full``) packs the whole tree, as ``auditor scan`` does.
3. A finding touches the change when its sink or any chain step lies on a changed line, or
   in a function whose span the change touches (added, changed or deleted lines). Its
   primary location becomes that changed line — exact line hits first, nearest the sink
   first — so a pull-request view shows it where the author changed code.
4. New or existing (base paths mapped through the rename map first, so a renamed file
   keeps its findings). Diff-scoped: a static finding by its fingerprint among the base's
   static pass (no model); a model's finding when its chain's functions existed unchanged
   at the base, else by one base run restricted to the same subgraph
   (``existing_at_base``). With ``full``: a full scan of the base. With
   ``--max-token-ratio``, the base run is planned before the head is sent (``_BaseGuard``),
   so a review whose head or base plan is over the ratio sends nothing.
5. Apply inline ignore comments and the baseline; list the coverage of changed files and
   their call-graph neighbours (full / skeleton / not packed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from auditor.callgraph.graph import CallGraph
from auditor.config.scan import ScanConfig
from auditor.engine.opening import STATIC, choose_engine
from auditor.findings.merge import merge_findings
from auditor.findings.model import Finding
from auditor.findings.suppress import apply_suppressions
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.pack.change import ChangeScope
from auditor.pack.scope import scope_class
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.report.model import (
    Coverage,
    FileCoverage,
    ReviewedFinding,
    ReviewSummary,
    ScanResult,
)
from auditor.rules.loader import builtin_rules
from auditor.runs.basecompare import base_fingerprints_after_renames, base_scope, found_statically, unchanged_at_base
from auditor.runs.diffscope import ChangeTouch, changed_functions, locate_touch, review_scope
from auditor.runs.prepare import TOKEN_RATIO_NOTICE, PreparedRepository, needs_model, prepare_repository, prepare_scan
from auditor.runs.scan import plan_scan, run_scan
from auditor.runs.scope import glob_base_of
from auditor.runs.worktrees import review_worktree
from auditor.walk.diff import (
    Diff,
    GitError,
    compute_diff,
    repository_top,
    resolve_revision,
    run_git,
)


class ScanFunction(Protocol):
    """How review scans one tree: ``run_scan``'s signature (``prepared`` reuses the walk)."""

    def __call__(
        self, config: ScanConfig, progress: ProgressCallback = ..., *, prepared: PreparedRepository | None = ...
    ) -> ScanResult: ...


@dataclass(frozen=True)
class ReviewConfig:
    """One review: scan settings (``scan.root`` is the directory to review, inside a git
    work tree), the base revision, the head revision (None: the working tree), whether
    existing findings block (``include_existing``, ``--all``), whether to compare with the
    base at all, and whether to audit both trees whole (``full``, ``--full``) instead of
    the change's subgraph. Suppressions (inline comments, ``scan.baseline``) apply once, in the head scan;
    the base is scanned without the baseline so that every existing finding is known."""

    scan: ScanConfig
    base: str
    head: str | None = None
    include_existing: bool = False
    compare_base: bool = True
    full: bool = False


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
class _Tree:
    """A scanned tree: its scan result and prepared index."""

    result: ScanResult
    indexes: Mapping[str, FileIndex]
    graph: CallGraph
    texts: Mapping[str, str]
    change: ChangeScope | None = None  # a diff-scoped head's subgraph and changed lines


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
    # --include/--exclude are relative to the reviewed directory, as in `auditor scan PATH`.
    config = replace(config, scan=glob_base_of(config.scan, prefix))
    # Each tree's scan reports what lies under the reviewed directory (its findings, coverage
    # and files not audited), as `auditor scan PATH` does (auditor.runs.scope).
    tree_config = replace(config.scan, cache_scope=config.scan.scope, tx_models=config.scan.absolute_tx_models, report_under=prefix)
    with _tree_at(top, diff.head if config.head is not None else None) as head_root, _base_tree(top, diff, config) as base_root:
        if not (head_root / prefix).is_dir():
            raise GitError(f"{config.scan.root} does not exist at the head revision {diff.head[:12]}")
        # A directory the change adds has no base: nothing in it existed before.
        base_config = replace(tree_config, root=base_root, baseline=None) if base_root and (base_root / prefix).is_dir() else None
        base_guard = _BaseGuard(base_config, config.full, diff, progress)
        head = _scan_head(
            replace(tree_config, root=head_root), progress, scan, diff, scoped=not config.full, before_sending=base_guard.check,
        )

        spans = changed_functions(diff, head.indexes)
        touched: list[tuple[Finding, ChangeTouch]] = []
        for finding in head.result.findings:
            touch = locate_touch(finding, diff, spans)
            if touch is not None:
                touched.append((finding, touch))
        base = BaseOutcome()
        if base_config is not None:
            if config.full:
                progress(ProgressEvent(stage="review", message=f"scanning the base {diff.base[:12]} for existing findings"))
                full_base = _scan_tree(base_config, progress, scan, base_guard.prepared)
                base = BaseOutcome(
                    base_fingerprints_after_renames(full_base.result.findings, full_base.texts, diff.renames),
                    full_base.result.prompt_tokens_sent,
                    notices=_guard_notices(full_base.result.notices, diff.base),
                )
            else:
                base = existing_at_base(
                    base_config, head, [finding for finding, _ in touched], diff, progress, scan, prepared=base_guard.prepared,
                )
        elif config.compare_base:
            progress(ProgressEvent(stage="review", message=f"the base {diff.base[:12]} has no {config.scan.root}: every finding is new"))
    return _review_result(config, diff, head, touched, spans, base, under=prefix)


@dataclass(frozen=True)
class BaseOutcome:
    """What the base says about the head's findings on the change: the fingerprints that
    existed there (as the head reads them), the prompt tokens a base run sent, and whether a
    model read the base at all, and the base run's token-ratio guard notices."""

    existing: frozenset[str] = frozenset()
    prompt_tokens_sent: int = 0
    model_run: bool = False
    notices: tuple[str, ...] = ()


def existing_at_base(
    config: ScanConfig, head: _Tree, findings: list[Finding], diff: Diff, progress: ProgressCallback, scan: ScanFunction,
    *, prepared: PreparedRepository | None = None,
) -> BaseOutcome:
    """Which of the head's ``findings`` on the change existed at the base, without a full
    base audit: a static finding by its fingerprint among the base's static pass; a model's
    finding when its chain's code existed unchanged at the base; the rest by one base run
    restricted to the head's subgraph (a model run only when such a finding is left).
    ``prepared`` reuses the base's walk and index when the review made them already."""
    progress(ProgressEvent(stage="review", message=f"static pass of the base {diff.base[:12]} for existing findings"))
    prepared = prepared or _prepare(config, progress)
    runs_model = config.engine != STATIC
    inputs = prepare_scan(config, runs_model=runs_model, prepared=prepared, progress=progress)
    known = set(builtin_rules()) | {rule.id for rule in inputs.rules}
    static_findings = apply_suppressions(merge_findings([inputs.static.findings]), prepared.texts, known, None).kept
    existing = set(base_fingerprints_after_renames(static_findings, prepared.texts, diff.renames))
    head_code, base_code = (head.indexes, head.texts), (prepared.indexes, prepared.texts)
    undecided = []
    for finding in findings:
        if found_statically(finding) or finding.fingerprint in existing:
            continue
        if unchanged_at_base(finding, head_code, base_code, diff.renames):
            existing.add(finding.fingerprint)
        else:
            undecided.append(finding)
    if not undecided or not runs_model or head.change is None:
        return BaseOutcome(frozenset(existing))
    subgraph = base_scope(head.change, diff.renames, prepared.texts)
    progress(ProgressEvent(
        stage="review",
        message=f"{len(undecided)} model finding(s) on changed code: scanning the base's {len(subgraph.paths)} file(s) of the same subgraph",
    ))
    result = scan(_restricted(config, subgraph), progress, prepared=prepared)
    existing |= base_fingerprints_after_renames(result.findings, prepared.texts, diff.renames)
    return BaseOutcome(
        frozenset(existing), result.prompt_tokens_sent, model_run=True, notices=_guard_notices(result.notices, diff.base)
    )


def _review_result(
    config: ReviewConfig, diff: Diff, head: _Tree, touched: list[tuple[Finding, ChangeTouch]],
    spans: Mapping[tuple[str, str], tuple[int, int]], base: BaseOutcome, *, under: str,
) -> ReviewResult:
    """The review's report data: the findings on the change marked new or existing, the
    suppressed ones on the change, and the review summary (``under``: the reviewed
    directory, "" for the repository's top)."""
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
            status="existing" if finding.fingerprint in base.existing else "new",
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
        coverage=change_coverage(diff, head.result.coverage, head.graph, head.texts, under=under),
        base_compared=config.compare_base,
        existing_blocking=config.include_existing,
        scope="full" if config.full else "diff",
        head_prompt_tokens=head.result.prompt_tokens_sent,
        base_prompt_tokens=base.prompt_tokens_sent,
    )
    notices = (*head.result.notices, *base.notices)
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


def _restricted(config: ScanConfig, subgraph: ChangeScope) -> ScanConfig:
    """The base run of a diff-scoped review: ``config`` packing only ``subgraph``."""
    return replace(config, window=replace(config.window, change=subgraph, seed_paths=()))


@contextlib.contextmanager
def _base_tree(top: Path, diff: Diff, config: ReviewConfig) -> Iterator[Path | None]:
    """The base's tree when the review compares with the base, else None."""
    if not config.compare_base:
        yield None
        return
    with _tree_at(top, diff.base) as base_root:
        yield base_root


class _BaseGuard:
    """The token-ratio guard on the base's model run, checked before the head is sent: a
    review over ``--max-token-ratio`` sends nothing (the head's own plan is checked by its
    scan, before it sends). ``--full``: the whole base; diff-scoped: the base run restricted
    to the head's subgraph, which runs when a model finding on the change is left undecided.
    ``prepared`` is the base's walk and index once ``check`` made them."""

    def __init__(self, config: ScanConfig | None, full: bool, diff: Diff, progress: ProgressCallback):
        self.config = config
        self.full = full
        self.diff = diff
        self.progress = progress
        self.prepared: PreparedRepository | None = None

    def check(self, change: ChangeScope | None) -> None:
        """Plan the base run the review may send (``change``: the head's diff-scoped
        subgraph); raises PackError when its plan is over ``--max-token-ratio``."""
        config = self.config
        if config is None or not config.window.max_token_ratio or config.engine == STATIC:
            return
        if not self.full and change is None:
            return
        self.progress(ProgressEvent(stage="review", message=f"planning the base {self.diff.base[:12]} before sending anything"))
        self.prepared = _prepare(config, self.progress)
        if not self.full:
            config = _restricted(config, base_scope(change, self.diff.renames, self.prepared.texts))
        plan_scan(config, choose_engine(config.engine, config.engine_settings), prepared=self.prepared, progress=self.progress)


def _guard_notices(notices: tuple[str, ...], base: str) -> tuple[str, ...]:
    """The base scan's token-ratio guard notices (``plan_windows``), named as the base's: a
    review says what both its scans cost, as a scan does before sending anything."""
    return tuple(f"base {base[:12]}: {notice}" for notice in notices if notice.startswith(TOKEN_RATIO_NOTICE))


def _prepare(config: ScanConfig, progress: ProgressCallback) -> PreparedRepository:
    """Walk and index one tree (cached) with its call graph."""
    return prepare_repository(
        config.root, config.walk, use_cache=config.use_cache, progress=progress, cache_scope=config.cache_scope,
        parse_budget_s=config.parse_budget_s,
    )


def _scan_tree(
    config: ScanConfig, progress: ProgressCallback, scan: ScanFunction, prepared: PreparedRepository | None = None
) -> _Tree:
    """Walk and index one whole tree (unless ``prepared``), and scan it."""
    prepared = prepared or _prepare(config, progress)
    result = scan(config, progress, prepared=prepared)
    return _Tree(result=result, indexes=prepared.indexes, graph=prepared.graph, texts=prepared.texts)


def _scan_head(
    config: ScanConfig, progress: ProgressCallback, scan: ScanFunction, diff: Diff, *, scoped: bool,
    before_sending: Callable[[ChangeScope | None], None],
) -> _Tree:
    """Scan the head: the pack carries the changed files and their call-graph neighbours
    first; ``scoped`` restricts it to the change's subgraph (``review_scope``) and lists the
    changed lines in every prompt, else the whole tree is packed (``--full``).
    ``before_sending(change)`` runs once the scope is known, before the head's scan."""
    prepared = _prepare(config, progress)
    seeds = review_seed_paths(diff, prepared.graph)
    change = None
    if scoped:
        inputs = prepare_scan(config, runs_model=config.engine != STATIC, prepared=prepared, progress=progress)
        # Chains of every severity, as the full pack cuts its windows around: a model may
        # report one below --min-severity's static grade, and a full review would see it whole.
        chains = tuple({finding.fingerprint: finding for finding in (*inputs.static.chain_findings, *inputs.static.findings)}.values())
        found = review_scope(
            diff, prepared.indexes, prepared.graph, prepared.texts, chains,
            neighbours=any(needs_model(rule) for rule in inputs.rules),
        )
        change = found.change
        in_scope = set(change.paths)
        # Out-of-scope files (a changed test, a migration) stay out unless the options pack them.
        seeds = tuple(path for path in seeds if path in in_scope and scope_class(path, prepared.texts[path]) is None)
        progress(ProgressEvent(
            stage="review",
            message=f"diff-scoped pack: {len(found.functions)} changed function(s), {len(found.touching)} static chain(s) "
            f"through them, {len(change.paths)} file(s) in scope (--full packs the whole tree)",
        ))
    before_sending(change)
    config = replace(config, window=replace(config.window, seed_paths=seeds, change=change))
    result = scan(config, progress, prepared=prepared)
    return _Tree(result=result, indexes=prepared.indexes, graph=prepared.graph, texts=prepared.texts, change=change)


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


def change_coverage(
    diff: Diff, coverage: Coverage, graph: CallGraph, texts: Mapping[str, str], *, under: str = ""
) -> tuple[FileCoverage, ...]:
    """How the model saw each changed source file and each call-graph neighbour of one.

    Changed files are those the walk kept or whose extension names a supported language
    (a changed source file the walk skipped shows as "not packed"); neighbours are files
    linked to a changed file by a call edge in either direction, those under ``under`` (the
    reviewed directory, whose coverage ``coverage`` is) when it is given.
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
    neighbours = [other for other in _neighbours(changed, graph) if other.startswith(under)]
    return tuple(
        [FileCoverage(path, "changed", tier(path)) for path in changed]
        + [FileCoverage(path, "neighbour", tier(path)) for path in neighbours]
    )


def review_seed_paths(diff: Diff, graph: CallGraph) -> tuple[str, ...]:
    """Paths a diff-seeded pack should carry first: changed files, then their callers and callees."""
    changed = sorted(changed.path for changed in diff.changed)
    return tuple(changed + _neighbours(changed, graph))


def _neighbours(paths: list[str], graph: CallGraph) -> list[str]:
    """The files linked to one of ``paths`` by a call edge in either direction, sorted, less ``paths``."""
    return sorted({other for path in paths for other in graph.file_neighbors(path)} - set(paths))
