"""Pipeline glue: run walk -> index -> call graph -> pack for a command.

Each stage keeps its own module and typed entry point; this module only wires them in
order and carries their outputs forward (``PreparedRepository``) so later stages (static
analysis, grounding) reuse the same index and graph instead of recomputing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from auditor import defaults
from auditor.callgraph.cache import CallGraphCache
from auditor.callgraph.graph import CallGraph
from auditor.analysis.registry import static_analysis_for
from auditor.index.cache import IndexCache
from auditor.index.indexer import IndexSkip, index_sources
from auditor.index.model import FileIndex
from auditor.pack.chains import ChainCache, relevance_chains
from auditor.pack.packer import Chain, PackInput, PackOptions, PackResult, pack, relevance_scores
from auditor.pack.prompt import CandidateChain
from auditor.pack.skeleton import build_skeleton
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.rules.loader import Rule
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
    cache_dir: Path | None = None  # the index cache in use; None when caching is off
    cache_scope: str = ""  # the name this tree's caches are kept under (its root by default)
    index_skipped: tuple[IndexSkip, ...] = ()  # files the index gave up on (parse budget)

    @property
    def texts(self) -> dict[str, str]:
        """Path -> text of every walked file."""
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

    ``cache_scope`` names the tree's caches (index pack, relevance scores); by default its
    root path. A caller that walks a temporary copy of a repository (review's worktrees)
    passes a stable name so that the next run finds them again.
    """
    walked = walk(root, walk_options, progress)
    directory = cache_dir or store_dir("index")
    cache = IndexCache(directory) if use_cache else None
    sources = [(f.path, f.text, f.language, f.content_hash) for f in walked.files if f.language]
    scope = cache_scope or str(walked.root)
    outcome = index_sources(sources, cache=cache, progress=progress, pack_name=scope, parse_budget_s=parse_budget_s)
    indexes = outcome.indexes
    progress(ProgressEvent(stage="graph", message=f"call graph over {len(indexes)} indexed files"))
    graph_cache = CallGraphCache(directory) if use_cache else None
    graph = graph_cache.get(indexes) if graph_cache is not None else None
    if graph is None:
        if on_change is not None:
            on_change()
        graph = CallGraph.build(indexes)
        if graph_cache is not None:
            graph_cache.put(indexes, graph)
    return PreparedRepository(
        walk=walked, indexes=indexes, graph=graph, cache_dir=directory if use_cache else None, cache_scope=scope,
        index_skipped=outcome.skipped,
    )


def top_level_symbols(index: FileIndex) -> tuple[str, ...]:
    """Names of a file's module-level definitions, in source order (for the repository map)."""
    return tuple(definition.name for definition in index.definitions if definition.parent is None)


def pack_prepared(
    prepared: PreparedRepository,
    *,
    rules: tuple[Rule, ...],
    tokenizer: PromptTokenizer,
    options: PackOptions,
    progress: ProgressCallback = no_progress,
    chains_to_judge: Sequence[CandidateChain] = (),
    chains: Sequence[Chain] | None = None,
) -> PackResult:
    """Pack a prepared repository: skeletons and map symbols from the index, neighbours from the graph.

    Windows are cut around ``chains`` (call chains as file paths, entry file first); by
    default they are the rules' relevance chains (``auditor.pack.chains``): the static
    analysis's candidates for a rule that has one, entry-point -> relevant-file paths for
    the others. A caller that has run the static pass already may pass its chains.
    ``chains_to_judge`` (static candidates) are listed in the windows that carry them.
    """
    indexes = prepared.indexes
    texts = {entry.path: entry.text for entry in prepared.walk.files}

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
        scope = digest_of(prepared.cache_scope or str(prepared.walk.root)).hex()
        relevance_cache = DigestStore(prepared.cache_dir / f"relevance-v{RELEVANCE_CACHE_VERSION}" / f"{scope}.bin")
    if chains is None:
        chains = ()
        if rules:  # computed for the co-location report even when windows are not cut around them
            modelled = [rule for rule in rules if static_analysis_for(rule.id) is None]
            scores = relevance_scores(files, modelled, relevance_cache) if modelled else {}
            seeds = sorted(path for path, score in scores.items() if score > 0)
            if prepared.cache_dir is not None:
                chains = ChainCache(prepared.cache_dir).chains(indexes, texts, prepared.graph, rules, seeds)
            else:
                chains = relevance_chains(indexes, texts, prepared.graph, rules, seeds)
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
        chains_to_judge=chains_to_judge,
        chains=chains,
    )
