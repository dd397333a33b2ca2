"""Pack: rank the walked files for the selected rules, then compress and split them into
windows that each fit the model's context exactly.

Inputs: walked files, rules, a tokenizer, the per-file index (for skeletons and the map),
a file-neighbour function from the call graph, the call chains to keep whole
(``FileChain``) and the static candidates to list. Output: ``PackResult`` — windows whose
rendered prompt (chat template applied) is counted exactly and satisfies
``prompt_tokens + output_tokens + probe_reserve_tokens <= max_model_len``.

Ranking (``auditor.pack.rank``): files matching a rule's relevance patterns come first
(most matches first), then their call-graph neighbours; these *candidates* are carried in
full, split across windows when needed so each appears in full at least once, ordered so
callers sit next to callees. Windows are seeded with whole chains first. Every window
carries the same repository map; remaining space holds skeletons of the next files by
rank, and what room is still left turns those skeletons back into full text, in rank order
(so a repository that fits one window is carried whole). Token counts: a cheap byte
estimate screens items, exact counts are made only for what is placed, and each finished
window is re-counted whole and corrected at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from auditor import defaults
from auditor.errors import PackError, UsageError
from auditor.pack.blocks import Block, PendingFile, TokenCounter, describe, full_blocks
from auditor.pack.change import OUTSIDE_CHANGE, ChangeScope
from auditor.pack.deadline import FILE_DEADLINE, FileDeadline
from auditor.pack.fill import Fillers, SkeletonFn, fill_candidates, fill_gap, upgrade_skeletons
from auditor.pack.listing import CandidateListing, candidate_listing
from auditor.pack.prompt import CandidateChain, MapEntry, build_messages, render_map
from auditor.pack.rank import NeighborFn, PackInput, Ranking, rank_files
from auditor.pack.reasons import PackReason
from auditor.pack.scope import out_of_scope
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.rules.loader import Rule
from auditor.storage.digests import DigestStore
from auditor.tokens.tokenizer import Message, PromptTokenizer, TokenizerInfo

FileChain = tuple[str, ...]
"""The distinct files a call chain passes through, in the order it first enters them
(entry point's file first): the unit the packer keeps whole in one window."""

DEFAULT_MAP_TOKENS = 8_192

OUTSIDE_PATH = "outside the scanned directory and the call chains into it (listed in the map)"
"""The omission reason of a file a subdirectory's pack leaves out (``pack``'s ``within``)."""


@dataclass(frozen=True)
class PackOptions:
    """Budget and ranking settings for one pack."""

    max_model_len: int = defaults.MAX_MODEL_LEN
    output_tokens: int = defaults.OUTPUT_TOKENS
    probe_reserve_tokens: int = defaults.CANARY_RESERVE_TOKENS
    map_tokens: int = DEFAULT_MAP_TOKENS
    thinking: bool = True
    max_windows: int = defaults.MAX_WINDOWS
    neighbor_depth: int = 1
    seed_paths: tuple[str, ...] = ()  # carried first, in this order (e.g. a diff's changed files)
    # Out-of-scope file classes to pack anyway for audit rules (auditor.pack.scope: "tests",
    # "fixtures", "migrations", "generated", "seed"); each rule's pack_include adds to these.
    include: tuple[str, ...] = ()
    # Cut windows around the relevance chains so each chain's files are in full in one window.
    chain_windows: bool = True
    # A diff-scoped review's pack: only the change's subgraph is carried, and every window
    # lists the changed lines after the map (auditor.pack.change).
    change: ChangeScope | None = None

    @property
    def prompt_budget(self) -> int:
        """Tokens a window's rendered prompt may use."""
        return self.max_model_len - self.output_tokens - self.probe_reserve_tokens


@dataclass(frozen=True)
class PackedFile:
    """A file (or a line range of one) placed in a window."""

    path: str
    tier: str  # "full" | "skeleton"
    tokens: int
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool = False  # a line longer than a window was cut (and marked in the text)
    reason: PackReason = PackReason.RELEVANT  # why the window holds it (auditor.pack.reasons)


@dataclass(frozen=True)
class WindowFrame:
    """The fixed text around a window's file blocks: in the chat messages, and in the prompt
    the chat template renders from them (which holds the blocks verbatim)."""

    system: str
    user_head: str
    user_tail: str
    prompt_head: str
    prompt_tail: str
    head_tokens: int
    tail_tokens: int


@dataclass(frozen=True)
class Window:
    """One request's worth of repository: file blocks in their frame, and the exact count.

    The messages and the prompt are assembled on access, so a pack of many windows holds
    each file's text once.
    """

    index: int
    files: tuple[PackedFile, ...]
    blocks: tuple[str, ...]  # the rendered file blocks (canaries included), in prompt order
    frame: WindowFrame
    prompt_tokens: int
    # The static candidates the frame lists for the model to judge (all their lines in full here).
    candidates: tuple[CandidateChain, ...] = ()

    @property
    def messages(self) -> tuple[Message, ...]:
        """The system and user turns sent to the engine."""
        user = self.frame.user_head + "".join(self.blocks) + self.frame.user_tail
        return (Message("system", self.frame.system), Message("user", user))

    @property
    def prompt(self) -> str:
        """The exact prompt string whose token count is ``prompt_tokens``."""
        return self.frame.prompt_head + "".join(self.blocks) + self.frame.prompt_tail


@dataclass(frozen=True)
class OmittedFile:
    """A walked file that no window carries (it still appears in the repository map)."""

    path: str
    reason: str


@dataclass(frozen=True)
class PackResult:
    """The windows of a pack and what was left out of them."""

    repository: str
    tokenizer: TokenizerInfo
    options: PackOptions
    rules: tuple[Rule, ...]
    windows: tuple[Window, ...]
    omitted: tuple[OmittedFile, ...]
    candidates: tuple[str, ...]
    repo_map: str
    map_detail: int
    chains: tuple[FileChain, ...] = ()  # the relevance chains in scope, as file paths (entry first)
    chains_out_of_scope: int = 0  # chains passing through a file the audit scope leaves out
    # Files no window carries because their pack-stage work overran the per-file deadline
    # (auditor.pack.deadline), each with the words a report shows: not audited.
    overran: tuple[tuple[str, str], ...] = ()

    def chains_whole(self) -> int:
        """How many of ``chains`` have every file in full text within one window."""
        return count_chains_whole(self.chains, self.windows)


def count_chains_whole(chains: Sequence[FileChain], windows: Sequence[Window]) -> int:
    """Chains whose every file is carried in full (whole, not a line range) by one window."""
    in_full = [
        frozenset(f.path for f in window.files if f.tier == "full" and f.start_line == 1 and f.end_line == f.total_lines)
        for window in windows
    ]
    return sum(1 for chain in chains if any(all(path in window for path in chain) for window in in_full))



_BLOCKS_SENTINEL = "\x00auditor-blocks\x00"


def render_frame(
    tokenizer: PromptTokenizer,
    *,
    repository: str,
    index: int,
    repo_map: str,
    rules: Sequence[Rule],
    thinking: bool,
    probe_questions: str = "",
    candidates: Sequence[CandidateChain] = (),
) -> WindowFrame:
    """The frame of window ``index``: messages and prompt split where the file blocks go,
    with the exact token counts of the prompt's two parts."""
    messages = build_messages(
        repository=repository, window_index=index, repo_map=repo_map, blocks=[_BLOCKS_SENTINEL], rules=rules,
        probe_questions=probe_questions, candidates=candidates,
    )
    rendered = tokenizer.render(messages, thinking=thinking)
    prompt_head, found, prompt_tail = rendered.partition(_BLOCKS_SENTINEL)
    user_head, found_in_user, user_tail = messages[1].content.partition(_BLOCKS_SENTINEL)
    if not (found and found_in_user):
        raise PackError("the chat template altered the repository text; cannot place files in it")
    head_tokens, tail_tokens = tokenizer.count_many([prompt_head, prompt_tail])
    return WindowFrame(messages[0].content, user_head, user_tail, prompt_head, prompt_tail, head_tokens, tail_tokens)


def _tail(text: str) -> str:
    """The last line of ``text`` holding a non-space character, through the end."""
    end = len(text.rstrip())
    return text[text.rfind("\n", 0, end) + 1 :] if end else text


def _head(text: str) -> str:
    """The start of ``text`` through the end of its first line holding a non-space character."""
    newline = text.find("\n", len(text) - len(text.lstrip()))
    return text[: newline + 1] if newline >= 0 else text


class _WindowBuilder:
    """Frames windows and counts them exactly without re-tokenizing their blocks.

    The chat template places the blocks verbatim between a fixed head and tail, so a
    window's count is head + blocks + tail, each counted once, plus the change at each
    junction where two pieces meet (a merge across the seam), measured on the lines around it.
    """

    def __init__(
        self, repository: str, repo_map: str, rules: Sequence[Rule], tokenizer: PromptTokenizer, thinking: bool,
        candidates: Sequence[CandidateChain] = (),
    ):
        self.repository = repository
        self.repo_map = repo_map
        self.rules = tuple(rules)
        self.tokenizer = tokenizer
        self.thinking = thinking
        self.candidates = tuple(candidates)
        self._frames: dict[tuple[int, tuple[str, ...]], WindowFrame] = {}

    def frame(self, index: int, listed: Sequence[CandidateChain] = ()) -> WindowFrame:
        """The frame of window ``index`` listing the candidates ``listed`` (cached)."""
        key = (index, tuple(candidate.id for candidate in listed))
        if key not in self._frames:
            self._frames[key] = render_frame(
                self.tokenizer, repository=self.repository, index=index, repo_map=self.repo_map,
                rules=self.rules, thinking=self.thinking, candidates=listed,
            )
        return self._frames[key]

    def listed(self, items: Sequence[Block]) -> tuple[CandidateChain, ...]:
        """The candidates whose every cited line is in full text among ``items``, in order."""
        if not self.candidates:
            return ()
        full: dict[str, list[tuple[int, int]]] = {}
        for item in items:
            if item.tier == "full":
                full.setdefault(item.path, []).append((item.start, item.end))
        return tuple(
            candidate for candidate in self.candidates
            if all(any(start <= line <= end for start, end in full.get(path, ())) for path, line in candidate.locations())
        )

    def scaffold_tokens(self, index: int) -> int:
        frame = self.frame(index)
        return self.tokenizer.count(frame.prompt_head + frame.prompt_tail)

    def count(self, index: int, items: Sequence[Block], counter: TokenCounter) -> int:
        """Exact token count of the rendered window."""
        frame = self.frame(index, self.listed(items))
        return count_framed(self.tokenizer, frame, [item.text for item in items], counter.counts(items))


def count_framed(tokenizer: PromptTokenizer, frame: WindowFrame, blocks: Sequence[str], block_tokens: Sequence[int]) -> int:
    """Exact token count of ``frame`` around ``blocks`` given each block's own count:
    the parts' counts plus, at every seam, count(tail + head) - count(tail) - count(head)."""
    pieces = [frame.prompt_head, *blocks, frame.prompt_tail]
    seams: list[str] = []
    for left, right in zip(pieces, pieces[1:]):
        tail, head = _tail(left), _head(right)
        seams.extend((tail + head, tail, head))
    counts = tokenizer.count_many(seams)
    junctions = sum(counts[i] - counts[i + 1] - counts[i + 2] for i in range(0, len(counts), 3))
    return frame.head_tokens + sum(block_tokens) + frame.tail_tokens + junctions


# Paths and identifiers run at 2.5-5 bytes per token; a map text over this many bytes per
# token of budget cannot fit and is skipped without tokenizing it.
MAP_MAX_BYTES_PER_TOKEN = 8


def _choose_map(entries: Sequence[MapEntry], tokenizer: PromptTokenizer, budget: int) -> tuple[str, int]:
    """The most detailed repository map that fits ``budget`` tokens (counted exactly)."""
    for detail in range(4):
        text = render_map(entries, detail)
        if len(text.encode("utf-8")) > budget * MAP_MAX_BYTES_PER_TOKEN and detail < 3:
            continue
        if tokenizer.count(text) <= budget:
            return text, detail
    return render_map(entries, 3), 3


def pack(
    files: Sequence[PackInput],
    *,
    repository: str,
    rules: Sequence[Rule],
    tokenizer: PromptTokenizer,
    options: PackOptions = PackOptions(),
    skeleton_of: SkeletonFn | None = None,
    symbols_of: Callable[[str], tuple[str, ...]] | None = None,
    neighbors: NeighborFn | None = None,
    progress: ProgressCallback = no_progress,
    relevance_cache: DigestStore | None = None,
    chains_to_judge: Sequence[CandidateChain] = (),
    chains: Sequence[FileChain] = (),
    keyword_rules: Sequence[Rule] | None = None,
    deadline: FileDeadline | None = None,
    within: Collection[str] | None = None,
) -> PackResult:
    """Pack files into windows within budget. See the module docstring for the strategy.

    ``skeleton_of(path)`` returns the elided line ranges of a file's skeleton, or None when
    the file has no skeleton (unsupported language or a parse failure: it is then only
    packed in full). ``symbols_of(path)`` names a file's top-level symbols for the map.
    ``relevance_cache`` remembers relevance scores by content (see ``relevance_scores``).
    ``chains_to_judge`` are static candidates for the model to judge: each window's frame lists those
    whose lines it carries in full, counted in its ``prompt_tokens``.

    With rules, files outside the audit scope (``auditor.pack.scope``: tests, fixtures,
    migrations, generated and seed code, unless ``options.include`` or a rule's
    ``pack_include`` names their class, and but for ``options.seed_paths``) are listed in
    the map and omitted with their reason.
    ``chains`` (call chains as file paths) are planned first, with ``options.chain_windows``:
    each window is seeded with whole chains, a chain going to the window that already holds
    most of its files (hub files repeat across windows), so that each chain's files are in
    full in one window; the other candidates fill the space left.
    ``keyword_rules`` (default: all of ``rules``) are the rules whose relevance patterns make
    a file a candidate (``rank_files``); for the others only ``chains`` and the candidates
    to judge do, and a file only their patterns match is filler.
    ``deadline`` times the relevance scan and the skeleton of each file against the per-file
    deadline: a file whose work overran is carried in no window further on (a skeleton that
    overran is not placed), and one no window carries is omitted as ``file-deadline`` and
    listed in ``PackResult.overran``.
    ``within`` (a subdirectory's scan: its files and those of the chains into it) are the
    only files a window may carry; the others stay in the map, omitted as ``OUTSIDE_PATH``.
    Raises PackError when the scaffold alone does not fit the budget.
    """
    if options.prompt_budget <= 0:
        raise UsageError(
            f"no room for a prompt: max_model_len {options.max_model_len} minus output reserve "
            f"{options.output_tokens} and probe reserve {options.probe_reserve_tokens} is {options.prompt_budget}"
        )
    excluded: dict[str, str] = {}
    if rules:
        include = set(options.include).union(*(rule.pack_include for rule in rules))
        # Seed paths (a diff's changed files) were asked for by name: they stay in scope.
        named = set(options.seed_paths)
        excluded = out_of_scope(((entry.path, entry.text) for entry in files if entry.path not in named), include)
    if options.change is not None:
        subgraph = set(options.change.paths)
        excluded.update((entry.path, OUTSIDE_CHANGE) for entry in files if entry.path not in subgraph and entry.path not in excluded)
    if within is not None:
        excluded.update((entry.path, OUTSIDE_PATH) for entry in files if entry.path not in within and entry.path not in excluded)
    in_scope = [entry for entry in files if entry.path not in excluded]
    ranking = rank_files(
        in_scope, rules, neighbors, options.neighbor_depth, options.seed_paths, relevance_cache, keyword_rules, deadline
    )
    if deadline is not None:
        excluded.update((entry.path, FILE_DEADLINE) for entry in in_scope if deadline.overran(entry.path))
        in_scope = [entry for entry in in_scope if entry.path not in excluded]
        skeleton_of = _timed_skeletons(skeleton_of, deadline)
    by_path = {entry.path: entry for entry in in_scope}
    candidates, rest = list(ranking.candidates), list(ranking.rest)
    # The candidates the model judges are chains too: their files belong in one window.
    judged_chains = [tuple(dict.fromkeys((*(path for path, _, _ in c.steps), c.sink_path))) for c in chains_to_judge]
    kept_chains = tuple(dict.fromkeys(
        chain for chain in (*chains, *judged_chains) if chain and all(path in by_path for path in chain)
    ))
    chain_files = [path for path in dict.fromkeys(p for chain in kept_chains for p in chain) if path not in set(candidates)]
    if chain_files and options.chain_windows:
        # A chain's entry point need not match the rule's patterns: it is carried all the same.
        candidates = candidates + chain_files
        rest = [path for path in rest if path not in set(chain_files)]
    mapped = candidates + rest + sorted(ranking.foreign) + sorted(excluded)
    entries = [MapEntry(path, symbols_of(path) if symbols_of else ()) for path in mapped]
    map_budget = min(options.map_tokens, max(options.prompt_budget // 4, 0))
    repo_map, map_detail = _choose_map(entries, tokenizer, map_budget)
    if options.change is not None:
        repo_map += options.change.render()
    builder = _WindowBuilder(repository, repo_map, rules, tokenizer, options.thinking, chains_to_judge)
    scaffold = builder.scaffold_tokens(0)
    content_budget = options.prompt_budget - scaffold
    if content_budget <= 0:
        raise PackError(
            f"the prompt scaffold (instructions, rules, repository map) takes {scaffold} tokens, "
            f"more than the prompt budget of {options.prompt_budget}; raise --max-model-len or lower --output-tokens"
        )
    # The static candidates a window lists take room in its task: planned for each window
    # (auditor.pack.listing), so a window that completes one still fits.
    listing = candidate_listing(tokenizer, rules, chains_to_judge)
    # Chunks of oversized files take at most 90% of what a window has left when it lists the
    # candidates one file completes alone, leaving room for edge effects.
    chunk_budget = max((content_budget - listing.single_file_reserve()) * 9 // 10, 1)
    counter = TokenCounter(tokenizer)

    def listed_cost(items: Sequence[Block]) -> int:
        return listing.cost(candidate.id for candidate in builder.listed(items))

    plans: list[list[Block]] = []
    if options.chain_windows and kept_chains:
        order_of = {path: order for order, path in enumerate(candidates)}
        plans = _plan_chain_windows(
            kept_chains, by_path, order_of, content_budget, chunk_budget, counter, frozenset(options.seed_paths), listing
        )
    planned = {item.path for plan in plans for item in plan}
    # Candidates are expanded into blocks only when the fill reaches them: with
    # --max-windows, files beyond the last window are never rendered or counted.
    queue: list[Block | PendingFile] = [
        PendingFile(path, order) for order, path in enumerate(candidates) if path not in planned
    ]

    def expand(pending: PendingFile) -> list[Block]:
        reason = ranking.reasons.get(pending.path, PackReason.CHAIN_FILE)
        return full_blocks(by_path[pending.path], True, chunk_budget, counter, pending.order, reason)
    fillers = Fillers(candidates, rest, by_path, skeleton_of, chunk_budget, counter, deadline.overran if deadline else None)

    windows: list[Window] = []
    total_items = len(candidates)
    while plans or queue or not windows:
        if options.max_windows and len(windows) >= options.max_windows:
            break
        index = len(windows)
        seeded = plans.pop(0) if plans else []
        room = content_budget - sum(counter.counts(seeded)) - listed_cost(seeded)
        placed = seeded + fill_candidates(queue, room, counter, expand)
        space = content_budget - sum(counter.counts(placed)) - listed_cost(placed)
        extra = fill_gap(fillers.items({item.path for item in placed}), space, counter, content_budget)
        extra = upgrade_skeletons(extra, space - sum(counter.counts(extra)), by_path, chunk_budget, counter, fillers.carried)
        if queue and not placed:
            raise PackError(f"{describe(queue[0])} cannot fit an empty window")
        window, kept_candidates = _finish_window(builder, index, placed, extra, counter, options, queue)
        if queue and not kept_candidates:
            raise PackError(f"{describe(queue[0])} cannot fit an empty window")
        windows.append(window)
        fillers.place(window.files)
        remaining_files = len({item.path for item in queue} | {item.path for plan in plans for item in plan})
        progress(ProgressEvent(stage="pack", completed=total_items - remaining_files, total=total_items))
        if not candidates:
            break

    carried = {f.path for window in windows for f in window.files}
    overruns = deadline.overruns() if deadline is not None else {}
    overran = tuple((path, detail) for path, detail in overruns.items() if path not in carried)
    omitted: list[OmittedFile] = []
    dropped = {item.path for item in queue} | {item.path for plan in plans for item in plan}
    for path in sorted(set(by_path) | set(excluded)):
        if path in overruns and path not in carried:
            omitted.append(OmittedFile(path, f"{FILE_DEADLINE}: {overruns[path]}"))
        elif path in excluded:
            omitted.append(OmittedFile(path, excluded[path]))
        elif path in dropped and path not in carried:
            omitted.append(OmittedFile(path, f"over --max-windows {options.max_windows}"))
        elif path not in carried:
            omitted.append(OmittedFile(path, _left_out_reason(path, ranking)))
    return PackResult(
        repository=repository,
        tokenizer=tokenizer.info,
        options=options,
        rules=tuple(rules),
        windows=tuple(windows),
        omitted=tuple(omitted),
        candidates=tuple(candidates),
        repo_map=repo_map,
        map_detail=map_detail,
        chains=kept_chains,
        chains_out_of_scope=len(set(chains)) - len(set(chains) & set(kept_chains)),
        overran=overran,
    )


def _timed_skeletons(skeleton_of: SkeletonFn | None, deadline: FileDeadline) -> SkeletonFn | None:
    """``skeleton_of`` timed per file under ``deadline``: no skeleton for a file whose
    pack-stage work overran (before or while building it)."""
    if skeleton_of is None:
        return None
    build = skeleton_of

    def timed(path: str) -> tuple[tuple[int, int], ...] | None:
        if deadline.overran(path):
            return None
        elisions = deadline.run(path, "building its skeleton", lambda: build(path))
        return None if deadline.overran(path) else elisions

    return timed


def _left_out_reason(path: str, ranking: Ranking) -> str:
    if path in ranking.foreign:
        return "in none of the rules' languages: not code they reason about (listed in the map)"
    if path in ranking.off_chain:
        return "matches the rules' patterns but lies on no call chain, and no window had room left for it (listed in the map)"
    return "not relevant to the selected rules and no room for a skeleton (listed in the map)"


# Chains are planned against a little less than a window's content budget: the exact
# count of a finished window adds the seams between blocks (a few tokens each).
PLAN_MARGIN = 0.995


def _plan_chain_windows(
    chains: Sequence[FileChain],
    by_path: Mapping[str, PackInput],
    order_of: Mapping[str, int],
    content_budget: int,
    chunk_budget: int,
    counter: TokenCounter,
    seed_paths: frozenset[str],
    listing: CandidateListing,
) -> list[list[Block]]:
    """Group whole chains into windows: the full-text items each window starts with.

    Chains touching ``seed_paths`` go first, then the costliest (first-fit decreasing);
    each goes to the open window where its files not yet there cost least and fit, else to
    a new window. A window's load counts its files and the candidates it lists
    (``listing``: those whose files it all carries). A chain with a file too big for one
    window, or bigger in all (with the candidates it lists) than a window, cannot be whole
    and is left to the ordinary fill.
    """
    budget = int(content_budget * PLAN_MARGIN)
    items: dict[str, Block | None] = {}

    def item_of(path: str) -> Block | None:
        if path not in items:
            full = full_blocks(by_path[path], True, chunk_budget, counter, order_of[path], PackReason.CHAIN)
            items[path] = full[0] if len(full) == 1 else None
        return items[path]

    # Every whole-file item of every chain counted in one call: the tokenizer encodes a
    # batch on all cores, where chain by chain it would get two or three texts at a time.
    counter.counts([item for item in map(item_of, dict.fromkeys(path for chain in chains for path in chain)) if item])
    costed: list[tuple[FileChain, dict[str, int]]] = []
    for chain in chains:
        parts = [item_of(path) for path in chain]
        if any(part is None for part in parts):
            continue
        counts = counter.counts([part for part in parts if part is not None])
        cost = dict(zip(chain, counts))
        if sum(cost.values()) + listing.paths_cost(cost.keys()) <= budget:
            costed.append((chain, cost))
    costed.sort(key=lambda pair: (not seed_paths.intersection(pair[0]), -sum(pair[1].values()), pair[0]))
    windows: list[dict[str, int]] = []
    loads: list[int] = []
    for chain, cost in costed:
        best: tuple[int, int] | None = None
        for position, window in enumerate(windows):
            added = sum(tokens for path, tokens in cost.items() if path not in window)
            if listing.paths:
                added += listing.paths_cost(window.keys() | cost.keys()) - listing.paths_cost(window.keys())
            if loads[position] + added <= budget and (best is None or added < best[0]):
                best = (added, position)
                if added == 0:
                    break
        if best is None:
            windows.append({})
            loads.append(0)
            best = (sum(cost.values()) + listing.paths_cost(cost.keys()), len(windows) - 1)
        window = windows[best[1]]
        for path, tokens in cost.items():
            if path not in window:
                window[path] = tokens
        loads[best[1]] += best[0]
    plans: list[list[Block]] = []
    for window in windows:
        plan = [items[path] for path in window]
        plans.append(sorted((item for item in plan if item is not None), key=lambda item: item.order))
    return plans



def _finish_window(
    builder: _WindowBuilder,
    index: int,
    placed: list[Block],
    extra: list[Block],
    counter: TokenCounter,
    options: PackOptions,
    queue: list[Block | PendingFile],
) -> tuple[Window, int]:
    """Render the window, count it whole, and drop trailing items until it fits exactly.

    Dropped candidate items go back to the front of ``queue``. Returns the window and how
    many candidate items it kept.
    """
    items = sorted(placed, key=lambda item: (item.order, item.start)) + sorted(extra, key=lambda item: (item.order, item.start))
    while True:
        prompt_tokens = builder.count(index, items, counter)
        if prompt_tokens <= options.prompt_budget or not items:
            break
        dropped = items.pop()
        if dropped.candidate:
            queue.insert(0, dropped)
    if prompt_tokens > options.prompt_budget:
        raise PackError(f"window {index}: the scaffold alone takes {prompt_tokens} tokens, over the budget {options.prompt_budget}")
    counts = counter.counts(items)
    files = tuple(
        PackedFile(item.path, item.tier, count, item.start, item.end, item.total, item.truncated, item.reason)
        for item, count in zip(items, counts)
    )
    listed = builder.listed(items)
    window = Window(
        index=index, files=files, blocks=tuple(item.text for item in items), frame=builder.frame(index, listed),
        prompt_tokens=prompt_tokens, candidates=listed,
    )
    return window, sum(1 for item in items if item.candidate)
