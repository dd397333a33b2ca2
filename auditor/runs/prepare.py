"""Pipeline glue: walk -> index -> call graph -> static pass -> pack -> canaries, the
planning every scan-like command shares.

Each stage keeps its own module and typed entry point; this module only wires them in order
and carries their outputs forward, so later stages reuse them instead of recomputing them:
``PreparedRepository`` (the walk, index and call graph), ``ScanInputs`` (that, the selected
rules and the one ``StaticPass`` of the scan, run with the scan's options) and
``WindowPlan`` (the windows a model scan sends, canaries planted). ``auditor scan`` and
``auditor pack`` both plan through ``plan_windows``, so what ``pack`` shows is what the
engine is sent, token for token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Callable, Mapping, Sequence

from auditor import defaults
from auditor.callgraph.cache import CallGraphCache
from auditor.callgraph.graph import CallGraph
from auditor.analysis.registry import static_analysis_for
from auditor.analysis.transactions import StaticResult, TxOptions
from auditor.findings.model import Finding
from auditor.index.cache import IndexCache
from auditor.index.indexer import IndexSkip, index_sources
from auditor.index.model import FileIndex
from auditor.errors import PackError
from auditor.pack.chains import ChainCache, files_in_order, relevance_chains
from auditor.pack.deadline import FileDeadline
from auditor.pack.guard import token_ratio
from auditor.pack.packer import FileChain, PackOptions, PackResult, Window, pack
from auditor.pack.prompt import CandidateChain
from auditor.pack.rank import PackInput, relevance_scores
from auditor.pack.skeleton import build_skeleton
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.recall.windows import CanaryPlan, plant_canaries
from auditor.rules.loader import Rule, builtin_rules, named_or_builtin
from auditor.rules.severity import Severity
from auditor.config.scan import ScanConfig, WindowOptions, tree_cache_scope
from auditor.runs.judge import candidate_chains
from auditor.storage.memory import return_free_memory
from auditor.storage.digests import DigestStore, digest_of
from auditor.storage.dirs import cache_dir as store_dir
from auditor.tokens.tokenizer import PromptTokenizer
from auditor.walk.walker import WalkOptions, WalkResult, walk

RELEVANCE_CACHE_VERSION = 1
"""Version of the relevance-score cache's key material; part of its file name."""


@dataclass(frozen=True)
class PreparedRepository:
    """A walked repository with its index and call graph."""

    walk: WalkResult
    indexes: Mapping[str, FileIndex]
    graph: CallGraph
    cache_scope: str  # the name this tree's caches are kept under (``tree_cache_scope``)
    cache_dir: Path | None = None  # the index cache in use; None when caching is off
    index_skipped: tuple[IndexSkip, ...] = ()  # files the index gave up on (parse budget)

    @cached_property
    def texts(self) -> Mapping[str, str]:
        """Path -> text of every walked file (built once)."""
        return {entry.path: entry.text for entry in self.walk.files}


def prepare_repository(
    root: Path,
    walk_options: WalkOptions = WalkOptions(),
    *,
    cache_dir: Path | None = None,
    use_cache: bool = True,
    progress: ProgressCallback = no_progress,
    on_change: Callable[[], None] | None = None,
    cache_scope: str | None = None,
    parse_budget_s: float | None = defaults.PARSE_BUDGET_S,
    walked: WalkResult | None = None,
) -> PreparedRepository:
    """Walk ``root``, index every file in a supported language and build the call graph.
    A file whose indexing takes over ``parse_budget_s`` seconds is left out and listed in
    ``index_skipped``.

    With ``use_cache``, indexes are cached by content and the call graph by the set of
    indexed files (paths and contents), both under ``cache_dir`` (default:
    ``auditor.storage.dirs.cache_dir("index")``), so an unchanged repository loads its graph instead of
    resolving it again; ``pack_prepared`` keeps relevance scores there too.

    ``on_change`` is called when the graph must be resolved anew (the files changed since
    the last run, or caching is off), before that work starts: a caller uses it to begin
    what a change implies in the background, such as loading a tokenizer's vocabulary to
    count the changed text.

    ``cache_scope`` names the tree's caches (index pack, relevance scores, seed chains); by
    default its resolved root (``tree_cache_scope``). A caller that walks a temporary copy of a repository (review's worktrees)
    passes a stable name so that the next run finds them again.

    ``walked``: the walk of ``root`` with ``walk_options`` when the caller has made it already.
    """
    if walked is None:
        walked = walk(root, walk_options, progress)
    directory = cache_dir or store_dir("index")
    cache = IndexCache(directory) if use_cache else None
    sources = [(f.path, f.text, f.language, f.content_hash) for f in walked.files if f.language]
    scope = tree_cache_scope(walked.root, cache_scope)
    outcome = index_sources(sources, cache=cache, progress=progress, pack_name=scope, parse_budget_s=parse_budget_s)
    indexes = outcome.indexes
    return_free_memory()  # what parsing and the index pack's writing freed
    progress(ProgressEvent(stage="graph", message=f"call graph over {len(indexes)} indexed files"))
    if use_cache:
        graph = CallGraphCache(directory).build(indexes, on_change=on_change)
    else:
        if on_change is not None:
            on_change()
        graph = CallGraph.build(indexes)
    return_free_memory()  # the graph's key and cache rows, the vocabulary's parse while it loads
    return PreparedRepository(
        walk=walked, indexes=indexes, graph=graph, cache_dir=directory if use_cache else None, cache_scope=scope,
        index_skipped=outcome.skipped,
    )


def top_level_symbols(index: FileIndex) -> tuple[str, ...]:
    """Names of a file's module-level definitions, in source order (for the repository map)."""
    return tuple(definition.name for definition in index.definitions if definition.parent is None)


def needs_model(rule: Rule) -> bool:
    """Whether only a model checks ``rule`` (it has no static analysis)."""
    return static_analysis_for(rule.id) is None


def selected_rules(specs: tuple[str, ...], *, runs_model: bool = True) -> tuple[Rule, ...]:
    """The rules named by ``--rule``; when none is named, every built-in rule, or without a
    model only those the static pass checks (a rule that needs a model would go unchecked
    and leave the scan partial; named with ``--rule`` it does)."""
    rules = named_or_builtin(specs)
    return rules if specs or runs_model else tuple(rule for rule in rules if not needs_model(rule))


def unselected_rules(specs: tuple[str, ...], *, runs_model: bool) -> tuple[str, ...]:
    """The built-in rules ``selected_rules`` leaves out by default: those that need a model
    when none runs (none when ``--rule`` names the rules)."""
    if specs or runs_model:
        return ()
    return tuple(rule.id for rule in builtin_rules().values() if needs_model(rule))


@dataclass(frozen=True)
class StaticPass:
    """The static pass of one scan, run once with the scan's ``options`` (``--min-severity``,
    ``--include-tests``); packing, the prompts and the report all read this one result.

    ``results`` holds the ``StaticResult`` of each selected rule that has a static analysis,
    in rule order; ``not_run`` names the selected rules without one. ``reported``: whether its
    findings go to the report and, as ``candidates`` (``S1``, ``S2``, … in report order), into
    the prompts for the model to judge (``--static``, or no model runs); with ``--no-static`` a
    model scan still cuts its windows around its chains.
    """

    options: TxOptions
    results: tuple[tuple[Rule, StaticResult], ...]
    not_run: tuple[str, ...]
    reported: bool
    candidates: tuple[CandidateChain, ...]
    # Every finding of every severity (those below ``--min-severity`` too): the chains the
    # windows are cut around, whatever the report shows.
    chain_findings: tuple[Finding, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding of the pass, in rule order (reported or not)."""
        return tuple(finding for _, result in self.results for finding in result.findings)

    @property
    def reported_findings(self) -> tuple[Finding, ...]:
        """The findings the report merges: all of them when ``reported``, else none."""
        return self.findings if self.reported else ()

    @property
    def file_chains(self) -> tuple[FileChain, ...]:
        """The files of each finding's chain through its sink, of every severity
        (``chain_findings``), deduplicated and sorted: the chains the packer keeps whole in
        one window."""
        return tuple(sorted({
            files_in_order([step.path for step in finding.chain] + [finding.path])
            for finding in (*self.chain_findings, *self.findings)
        }))


def run_static_pass(
    prepared: PreparedRepository,
    rules: tuple[Rule, ...],
    options: TxOptions,
    *,
    reported: bool = True,
    progress: ProgressCallback = no_progress,
) -> StaticPass:
    """Run each rule's static analysis (where it has one) over the prepared repository.

    Each analysis runs once, at the lowest severity: its findings of every severity are the
    pass's ``chain_findings``, and ``results`` holds those at ``options.min_severity`` or
    above, the others counted as hidden, as a run at that severity returns them (grading
    and folding do not depend on the threshold). With the repository's caches on
    (``prepared.cache_dir``), each analysis keeps its result and per-file facts there."""
    results: list[tuple[Rule, StaticResult]] = []
    not_run: list[str] = []
    every: list[Finding] = []
    threshold = Severity.rank_of(options.min_severity)
    for rule in rules:
        analysis = static_analysis_for(rule.id)
        if analysis is None:
            not_run.append(rule.id)
            continue
        progress(ProgressEvent(stage="static", message=f"static pass for {rule.id}"))
        result = analysis(
            prepared.indexes, prepared.texts, rule, prepared.graph, options=replace(options, min_severity=Severity.LOW),
            cache_dir=prepared.cache_dir,
        )  # fmt: skip
        every.extend(result.findings)
        shown = tuple(finding for finding in result.findings if Severity.rank_of(finding.severity) <= threshold)
        results.append((rule, replace(result, findings=shown, hidden_findings=result.hidden_findings + len(result.findings) - len(shown))))
    found = tuple(finding for _, result in results for finding in result.findings)
    candidates = candidate_chains(found) if reported else ()
    return StaticPass(options, tuple(results), tuple(not_run), reported, candidates, tuple(every))


@dataclass(frozen=True)
class ScanInputs:
    """What a scan reads before any window is cut: the selected rules, the walked and
    indexed repository, its one static pass, and the built-in rules not selected."""

    rules: tuple[Rule, ...]
    repository: PreparedRepository
    static: StaticPass
    unselected: tuple[str, ...] = ()
    """Built-in rules left out because they need a model and none runs."""


def prepare_scan(
    config: ScanConfig,
    *,
    runs_model: bool,
    prepared: PreparedRepository | None = None,
    on_change: Callable[[], None] | None = None,
    progress: ProgressCallback = no_progress,
    walked: WalkResult | None = None,
) -> ScanInputs:
    """Select the rules, walk and index ``config.root`` (unless ``prepared`` is given) and run
    the static pass with the scan's options. ``runs_model``: whether a model reads the
    windows (then ``config.static`` decides whether the static findings are reported and
    listed; without a model they always are, and the built-in rules that need one are not
    selected: ``unselected`` names them). ``on_change`` and ``walked`` as in ``prepare_repository``."""
    rules = selected_rules(config.rules, runs_model=runs_model)
    if prepared is None:
        prepared = prepare_repository(
            config.root, config.walk, use_cache=config.use_cache, progress=progress, on_change=on_change,
            cache_scope=config.scope, parse_budget_s=config.parse_budget_s, walked=walked,
        )
    options = TxOptions(min_severity=config.min_severity, include_tests=config.include_tests, models=config.tx_model_paths)
    static = run_static_pass(prepared, rules, options, reported=config.static or not runs_model, progress=progress)
    return_free_memory()  # the analyses' working state, before the windows are counted
    return ScanInputs(rules, prepared, static, unselected_rules(config.rules, runs_model=runs_model))


@dataclass(frozen=True)
class WindowPlan:
    """The windows a model scan sends, as ``auditor pack`` shows them: packed around the
    static pass's chains, listing its candidates, each with its recall canaries planted.

    ``packed`` is the pack before the canaries; ``planted`` pairs each window as sent with its
    canaries (none when the repository has no file to audit); ``notices`` say what the
    planning met (an estimated tokenizer, cut lines, windows without room for canaries)."""

    inputs: ScanInputs
    packed: PackResult
    planted: tuple[tuple[Window, CanaryPlan], ...]
    notices: tuple[str, ...]

    @property
    def sent(self) -> PackResult:
        """The pack with its windows as sent (canaries planted): the prompts and their exact
        token counts, which the engine counts too."""
        return replace(self.packed, windows=tuple(window for window, _ in self.planted))


def plan_windows(
    config: ScanConfig,
    tokenizer: PromptTokenizer,
    *,
    inputs: ScanInputs | None = None,
    progress: ProgressCallback = no_progress,
    walked: WalkResult | None = None,
) -> WindowPlan:
    """Plan a model scan's windows: ``prepare_scan`` (unless ``inputs`` are given; over
    ``walked`` when given), pack with the static pass's chains and candidates, and plant
    ``config.probes`` canaries in each window (seeded by ``config.engine_settings.seed``)."""
    if inputs is None:
        inputs = prepare_scan(config, runs_model=True, on_change=tokenizer.preload, progress=progress, walked=walked)
    notes: list[str] = []
    if not tokenizer.info.exact:
        notes.append(tokenizer.info.describe())
    packed = pack_prepared(
        inputs.repository, rules=inputs.rules, tokenizer=tokenizer, options=config.pack, static=inputs.static,
        progress=progress, file_deadline_s=config.walk.file_deadline_s, under=config.report_under,
    )
    truncated = sorted({f.path for window in packed.windows for f in window.files if f.truncated})
    if truncated:
        notes.append(f"a line longer than a window was cut in {len(truncated)} file(s): {', '.join(truncated[:10])}")
    if not any(window.files for window in packed.windows):
        notes.append("the repository has no files to audit: no request was sent to the model")
        return WindowPlan(inputs, packed, (), tuple(notes))
    planted = tuple(
        plant_canaries(packed, window, tokenizer, config.probes, config.engine_settings.seed) for window in packed.windows
    )
    if config.probes and any(not plan.canaries for _, plan in planted):
        notes.append("some windows had no room for recall canaries: their recall is not measured")
    plan = WindowPlan(inputs, packed, planted, tuple(notes))
    # The guard weighs the windows as sent, canaries included: the pack JSON's token_ratio.
    over_ratio = token_ratio_notice(plan.sent, config.window)
    if over_ratio and config.window.max_token_ratio:
        raise PackError(f"{over_ratio} (--max-token-ratio {config.window.max_token_ratio:g}); nothing was sent")
    return replace(plan, notices=(*plan.notices, over_ratio)) if over_ratio else plan


TOKEN_RATIO_NOTICE = "the plan sends"
"""How the token-ratio guard's notice begins (a review carries its base's guard notice on)."""


def token_ratio_notice(packed: PackResult, window: WindowOptions) -> str | None:
    """The guard's notice when ``packed`` spends more prompt tokens per audited token than
    ``window.max_token_ratio`` (else ``defaults.MAX_TOKEN_RATIO``) allows, with the windows'
    estimated time on the default device profile (``auditor plan``'s ``estimate_time``)."""
    limit = window.max_token_ratio or defaults.MAX_TOKEN_RATIO
    ratio = token_ratio(packed)
    if not ratio.exceeds(limit):
        return None
    # Imported here: `auditor pack` loads the device profiles only when the guard fires.
    from auditor.planning.timing import estimate_time

    seconds = sum(estimate_time(w.prompt_tokens, window.output_tokens).total_s for w in packed.windows)
    return (
        f"{TOKEN_RATIO_NOTICE} {ratio.prompt_tokens:,} prompt tokens in {len(packed.windows)} window(s) for "
        f"{ratio.audited_tokens:,} tokens of audited code, {ratio.ratio:.1f}x (over {limit:g}x); "
        f"estimated {seconds / 60:,.0f} min on {defaults.DEVICE_PROFILE} (auditor plan); "
        "`auditor pack --format json` lists what each window holds, by reason"
    )


def pack_prepared(
    prepared: PreparedRepository,
    *,
    rules: tuple[Rule, ...],
    tokenizer: PromptTokenizer,
    options: PackOptions,
    static: StaticPass,
    progress: ProgressCallback = no_progress,
    file_deadline_s: float | None = None,
    under: str = "",
) -> PackResult:
    """Pack a prepared repository: skeletons and map symbols from the index, neighbours from the graph.
    Each file's relevance scans and skeleton are timed against ``file_deadline_s``
    (``--file-deadline``, as its walk was): one that overruns is listed in ``PackResult.overran``.

    Windows are cut around the rules' chains: the static pass's (``StaticPass.file_chains``)
    for the rules it covers, and for the others the entry-point -> relevant-file paths of
    ``auditor.pack.chains`` (entry points as the static pass counts them). The static
    candidates are listed in the windows that carry them.

    ``under`` (``ScanConfig.report_under``: a subdirectory scanned within its repository)
    restricts the windows to the files under it and those of the chains whose sink lies
    under it, callers outside included (``scoped_paths``); the call graph stays the whole
    repository's.
    """
    indexes = prepared.indexes
    texts = prepared.texts

    def skeleton_of(path: str) -> tuple[tuple[int, int], ...] | None:
        index = indexes.get(path)
        if index is None:
            return None
        skeleton = build_skeleton(texts[path], index)
        if skeleton is None or not skeleton.elisions:
            return None
        return tuple((elision.start_line, elision.end_line) for elision in skeleton.elisions)

    def symbols_of(path: str) -> tuple[str, ...]:
        index = indexes.get(path)
        return top_level_symbols(index) if index else ()

    files = [PackInput(entry.path, entry.text, entry.language, entry.content_hash) for entry in prepared.walk.files]
    relevance_cache = None
    if prepared.cache_dir is not None:
        scope = digest_of(prepared.cache_scope).hex()
        relevance_cache = DigestStore(prepared.cache_dir / f"relevance-v{RELEVANCE_CACHE_VERSION}" / f"{scope}.bin")
    deadline = FileDeadline(file_deadline_s)
    # Computed for the co-location report even when windows are not cut around them.
    modelled = [rule for rule in rules if static_analysis_for(rule.id) is None]
    seed_chains: tuple[FileChain, ...] = ()
    if modelled:
        scores = relevance_scores(files, modelled, relevance_cache, deadline)
        seeds = sorted(path for path, score in scores.items() if score > 0)
        include_tests = static.options.include_tests
        if prepared.cache_dir is not None:
            seed_chains = ChainCache(prepared.cache_dir).chains(
                indexes, texts, prepared.graph, modelled, seeds, include_tests=include_tests
            )
        else:
            seed_chains = relevance_chains(indexes, texts, prepared.graph, modelled, seeds, include_tests=include_tests)
    chains = tuple(sorted({*static.file_chains, *seed_chains}))
    candidates = static.candidates
    within = None
    if under:
        within = scoped_paths(files, static, seed_chains, under)
        chains = tuple(
            chain for chain in chains
            if any(path.startswith(under) for path in chain) and all(path in within for path in chain)
        )
        candidates = tuple(candidate for candidate in candidates if candidate.sink_path.startswith(under))
    return pack(
        files,
        repository=prepared.walk.root.name,
        rules=rules,
        tokenizer=tokenizer,
        options=options,
        skeleton_of=skeleton_of,
        symbols_of=symbols_of,
        neighbors=prepared.graph.file_neighbors,
        progress=progress,
        relevance_cache=relevance_cache,
        chains_to_judge=candidates,
        chains=chains,
        # A rule with a static analysis packs what lies on its chains, not every file its
        # keywords match: those are filler, each carried once at most.
        keyword_rules=modelled,
        deadline=deadline,
        within=within,
    )


def scoped_paths(
    files: Sequence[PackInput], static: StaticPass, seed_chains: Sequence[FileChain], under: str
) -> frozenset[str]:
    """The files a pack of the subdirectory ``under`` may carry: those under it, and every
    file of a static finding's chain whose sink lies under it and of a relevance chain
    ending under it (a chain is judged with its callers whole)."""
    paths = {entry.path for entry in files if entry.path.startswith(under)}
    for finding in (*static.chain_findings, *static.findings):
        if finding.path.startswith(under):
            paths.update(step.path for step in finding.chain)
    for chain in seed_chains:
        if chain and chain[-1].startswith(under):
            paths.update(chain)
    return frozenset(paths)
