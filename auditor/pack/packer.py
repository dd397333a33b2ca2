"""Pack: rank the walked files for the selected rules, then compress and split them into
windows that each fit the model's context exactly.

Inputs: walked files, rules, a tokenizer, the per-file index (for skeletons and the map)
and a file-neighbour function from the call graph. Output: ``PackResult`` — windows whose
rendered prompt (chat template applied) is counted exactly and satisfies
``prompt_tokens + output_tokens + probe_reserve_tokens <= max_model_len``.

Ranking: files matching a rule's relevance patterns come first (most matches first), then
their call-graph neighbours; these *candidates* are carried in full, split across windows
when needed so each appears in full at least once, ordered so callers sit next to callees.
Every window carries the same repository map; remaining space holds skeletons of the next
files by rank, and what room is still left turns those skeletons back into full text, in
rank order (so a repository that fits one window is carried whole). Token counts: a cheap byte estimate screens items, exact counts are made only
for what is placed, and each finished window is re-counted whole and corrected at the edge.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from auditor.errors import PackError, UsageError
from auditor.pack.prompt import (
    CandidateChain,
    MapEntry,
    build_messages,
    render_full_block,
    render_map,
    render_skeleton_block,
    split_lines,
)
from auditor.pack.scope import out_of_scope
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.rules.loader import Rule
from auditor.storage.digests import DigestStore, digest_of
from auditor.tokens.tokenizer import Message, PromptTokenizer, TokenizerInfo

DEFAULT_MAX_MODEL_LEN = 262_144
# Reasoning traces on audit tasks run to tens of thousands of tokens; 32,768 leaves room for
# a long trace plus a findings answer while keeping 229,376 tokens (87.5%) for the prompt.
DEFAULT_OUTPUT_TOKENS = 32_768
# Space kept in every window for recall-probe canaries and their questions: three needles
# and their questions take at most ~940 tokens on a 131K-id vocabulary (measured over 20 seeds).
DEFAULT_PROBE_RESERVE_TOKENS = 1_536
DEFAULT_MAP_TOKENS = 8_192
# Bytes per token used to screen items before exact counting; deliberately low (over-counts)
# so screening never rejects an item that would fit.
SCREEN_BYTES_PER_TOKEN = 2.0
# Stop looking for filler once a window's free space is below this share of its budget.
FILL_TOLERANCE = 0.005
# An item whose byte screen is this many times the free space cannot fit (the screen
# over-counts real tokenizers ~1.5-2x), so it is skipped without an exact count.
SCREEN_SLACK = 4
# Gap filling gives up after this many consecutive filler items that do not fit.
MAX_FILLER_MISSES = 256
# Upgrading filler skeletons to full text gives up after this many that do not fit, and
# passes over texts longer than this many characters per token of room without counting.
MAX_UPGRADE_MISSES = 16
MAX_CHARS_PER_TOKEN = 8


@dataclass(frozen=True)
class PackOptions:
    """Budget and ranking settings for one pack."""

    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    probe_reserve_tokens: int = DEFAULT_PROBE_RESERVE_TOKENS
    map_tokens: int = DEFAULT_MAP_TOKENS
    thinking: bool = True
    max_windows: int = 0
    neighbor_depth: int = 1
    seed_paths: tuple[str, ...] = ()  # carried first, in this order (e.g. a diff's changed files)
    # Out-of-scope file classes to pack anyway for audit rules (auditor.pack.scope: "tests",
    # "fixtures", "migrations", "generated", "seed"); each rule's pack_include adds to these.
    include: tuple[str, ...] = ()
    # Cut windows around the relevance chains so each chain's files are in full in one window.
    chain_windows: bool = True

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
class PackInput:
    """A walked, decodable file as the packer needs it."""

    path: str
    text: str
    language: str | None
    content_hash: str = ""  # the walk's content hash; keys cached per-file values when set


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
    chains: tuple[Chain, ...] = ()  # the relevance chains in scope, as file paths (entry first)
    chains_out_of_scope: int = 0  # chains passing through a file the audit scope leaves out

    def chains_whole(self) -> int:
        """How many of ``chains`` have every file in full text within one window."""
        return count_chains_whole(self.chains, self.windows)


def count_chains_whole(chains: Sequence[Chain], windows: Sequence[Window]) -> int:
    """Chains whose every file is carried in full (whole, not a line range) by one window."""
    in_full = [
        frozenset(f.path for f in window.files if f.tier == "full" and f.start_line == 1 and f.end_line == f.total_lines)
        for window in windows
    ]
    return sum(1 for chain in chains if any(all(path in window for path in chain) for window in in_full))


@dataclass(frozen=True)
class _Pending:
    """A candidate file not yet rendered into blocks."""

    path: str
    order: int


@dataclass(frozen=True)
class _Item:
    path: str
    tier: str
    start: int
    end: int
    total: int
    text: str
    candidate: bool
    order: int = 0
    screen: int = field(default=0, compare=False)
    truncated: bool = False


Chain = tuple[str, ...]
"""A call chain as the files it passes through, entry point's file first."""
SkeletonFn = Callable[[str], "tuple[tuple[int, int], ...] | None"]
NeighborFn = Callable[[str], Iterable[str]]


def relevance_scores(files: Sequence[PackInput], rules: Sequence[Rule], cache: DigestStore | None = None) -> dict[str, int]:
    """Matches of the rules' relevance patterns per file (0 for none).

    With ``cache``, a file's score is remembered under its content hash and the exact
    pattern set, so an unchanged file is not searched again.
    """
    patterns = [pattern for rule in rules for pattern in rule.relevance_patterns()]
    signature = "\n".join(f"re2:{pattern.pattern}" for pattern in patterns)
    key_of = {
        entry.path: digest_of(f"relevance\0{signature}\0{entry.content_hash}")
        for entry in files
        if cache is not None and entry.content_hash
    }
    known = dict(zip(key_of, cache.get_many(list(key_of.values())))) if cache is not None else {}
    scores: dict[str, int] = {}
    computed: dict[bytes, int] = {}
    for entry in files:
        score = known.get(entry.path)
        if score is None:
            score = sum(len(pattern.findall(entry.text)) for pattern in patterns)
            if entry.path in key_of:
                computed[key_of[entry.path]] = score
        scores[entry.path] = score
    if cache is not None and computed:
        cache.put_many(computed)
    return scores


def rank_files(
    files: Sequence[PackInput],
    rules: Sequence[Rule],
    neighbors: NeighborFn | None,
    neighbor_depth: int,
    seed_paths: Sequence[str] = (),
    relevance_cache: DigestStore | None = None,
) -> tuple[list[str], list[str]]:
    """Split paths into (candidates in packing order, the rest in rank order).

    ``seed_paths`` come first, in their order. With no rules every file is a candidate.
    Otherwise seeds are the seed paths, then files matching a relevance pattern; candidates are seeds plus files within ``neighbor_depth`` call-graph hops.
    Candidates are ordered by a breadth-first walk from the strongest seed so that callers
    and callees land next to each other (and hence in the same window).
    """
    paths = sorted(entry.path for entry in files)
    known = set(paths)
    first = [path for path in dict.fromkeys(seed_paths) if path in known]
    if not rules:
        return first + [path for path in paths if path not in set(first)], []
    scores = relevance_scores(files, rules, relevance_cache)
    relevant = sorted((path for path in paths if scores[path] > 0 and path not in set(first)), key=lambda p: (-scores[p], p))
    seeds = first + relevant
    distance: dict[str, int] = {seed: 0 for seed in seeds}
    frontier = list(seeds)
    adjacency: dict[str, list[str]] = {}

    def linked(path: str) -> list[str]:
        if path not in adjacency:
            adjacency[path] = sorted({n for n in (neighbors(path) if neighbors else ()) if n in known and n != path})
        return adjacency[path]

    for depth in range(1, neighbor_depth + 1):
        next_frontier: list[str] = []
        for path in frontier:
            for other in linked(path):
                if other not in distance:
                    distance[other] = depth
                    next_frontier.append(other)
        frontier = next_frontier
    ordered: list[str] = []
    visited: set[str] = set()
    for seed in seeds:
        if seed in visited:
            continue
        queue = deque([seed])
        visited.add(seed)
        while queue:
            path = queue.popleft()
            ordered.append(path)
            for other in linked(path):
                if other in distance and other not in visited:
                    visited.add(other)
                    queue.append(other)
    rest = sorted((path for path in paths if path not in distance), key=lambda p: (-scores[p], p))
    return ordered, rest


class _Counter:
    """Exact token counts of rendered items, made once and only for items being placed."""

    def __init__(self, tokenizer: PromptTokenizer):
        self._tokenizer = tokenizer
        self._counts: dict[tuple[str, str, int, int, int], int] = {}

    @staticmethod
    def _key(item: _Item) -> tuple[str, str, int, int, int]:
        return (item.path, item.tier, item.start, item.end, len(item.text))

    def counts(self, items: Sequence[_Item]) -> list[int]:
        missing = list({self._key(item): item for item in items if self._key(item) not in self._counts}.values())
        for item, count in zip(missing, self._tokenizer.count_many([item.text for item in missing])):
            self._counts[self._key(item)] = count
        return [self._counts[self._key(item)] for item in items]


def _describe(entry: _Item | _Pending) -> str:
    return entry.path if isinstance(entry, _Pending) else f"{entry.path} lines {entry.start}-{entry.end}"


def _screen(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / SCREEN_BYTES_PER_TOKEN)


def _full_items(entry: PackInput, candidate: bool, chunk_budget: int, counter: _Counter, order: int = 0) -> list[_Item]:
    """The file in full, or consecutive line-range chunks when it is too big for one window.

    ``chunk_budget`` is in tokens. The byte screen proposes chunk boundaries; any chunk
    whose exact count is still over budget is halved until it fits (a single line that
    alone exceeds the budget is cut and marked, the only case where text is truncated).
    """
    lines = split_lines(entry.text)
    whole = render_full_block(entry.path, lines)
    if _screen(whole) <= chunk_budget or len(lines) <= 1:
        spans = [(1, len(lines))]
    else:
        spans = []
        start = 1
        while start <= len(lines):
            size = 0
            end = start - 1
            while end < len(lines) and (end < start or size + _screen(lines[end]) + 4 <= chunk_budget):
                size += _screen(lines[end]) + 4
                end += 1
            spans.append((start, end))
            start = end + 1
    items: list[_Item] = []
    pending = list(reversed(spans))
    while pending:
        start, end = pending.pop()
        text = whole if (start, end) == (1, len(lines)) else render_full_block(entry.path, lines, start, end)
        item = _Item(entry.path, "full", start, end, len(lines), text, candidate, order, _screen(text))
        # A byte-level token spans >= 1 byte, so a block of at most chunk_budget bytes fits
        # without counting; only bigger ones are counted here.
        if len(text.encode("utf-8")) <= chunk_budget or counter.counts([item])[0] <= chunk_budget:
            items.append(item)
        elif end > start:
            middle = (start + end) // 2
            pending.extend([(middle + 1, end), (start, middle)])
        else:
            cut = list(lines)
            cut[start - 1] = _truncate_line(cut[start - 1], chunk_budget)
            text = render_full_block(entry.path, cut, start, end)
            items.append(_Item(entry.path, "full", start, end, len(lines), text, candidate, order, _screen(text), True))
    return items


def _truncate_line(line: str, budget: int) -> str:
    """Cut a line to at most ``budget // 2`` UTF-8 bytes (a byte-level token is >= 1 byte), marked."""
    data = line.encode("utf-8")[: max(budget // 2 - 16, 1)]
    return data.decode("utf-8", errors="ignore") + f" …[line cut: {len(line.encode('utf-8')):,} bytes]"


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

    def listed(self, items: Sequence[_Item]) -> tuple[CandidateChain, ...]:
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

    def count(self, index: int, items: Sequence[_Item], counter: _Counter) -> int:
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
    chains: Sequence[Chain] = (),
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
    in_scope = [entry for entry in files if entry.path not in excluded]
    by_path = {entry.path: entry for entry in in_scope}
    candidates, rest = rank_files(in_scope, rules, neighbors, options.neighbor_depth, options.seed_paths, relevance_cache)
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
    entries = [MapEntry(path, symbols_of(path) if symbols_of else ()) for path in candidates + rest + sorted(excluded)]
    map_budget = min(options.map_tokens, max(options.prompt_budget // 4, 0))
    repo_map, map_detail = _choose_map(entries, tokenizer, map_budget)
    builder = _WindowBuilder(repository, repo_map, rules, tokenizer, options.thinking, chains_to_judge)
    scaffold = builder.scaffold_tokens(0)
    content_budget = options.prompt_budget - scaffold
    if content_budget <= 0:
        raise PackError(
            f"the prompt scaffold (instructions, rules, repository map) takes {scaffold} tokens, "
            f"more than the prompt budget of {options.prompt_budget}; raise --max-model-len or lower --output-tokens"
        )
    # Chunks of oversized files take at most 90% of a window, leaving room for edge effects.
    chunk_budget = max(content_budget * 9 // 10, 1)
    counter = _Counter(tokenizer)

    plans: list[list[_Item]] = []
    if options.chain_windows and kept_chains:
        order_of = {path: order for order, path in enumerate(candidates)}
        plans = _plan_chain_windows(
            kept_chains, by_path, order_of, content_budget, chunk_budget, counter, frozenset(options.seed_paths)
        )
    planned = {item.path for plan in plans for item in plan}
    # Candidates are expanded into blocks only when the fill reaches them: with
    # --max-windows, files beyond the last window are never rendered or counted.
    queue: list[_Item | _Pending] = [
        _Pending(path, order) for order, path in enumerate(candidates) if path not in planned
    ]

    def expand(pending: _Pending) -> list[_Item]:
        return _full_items(by_path[pending.path], True, chunk_budget, counter, pending.order)
    fillers = _Fillers(candidates, rest, by_path, skeleton_of, chunk_budget, counter)

    windows: list[Window] = []
    total_items = len(candidates)
    while plans or queue or not windows:
        if options.max_windows and len(windows) >= options.max_windows:
            break
        index = len(windows)
        seeded = plans.pop(0) if plans else []
        placed = seeded + _fill(queue, content_budget - sum(counter.counts(seeded)), counter, expand)
        space = content_budget - sum(counter.counts(placed))
        extra = _fill_gap(fillers.items({item.path for item in placed}), space, counter, content_budget)
        extra = _upgrade_skeletons(extra, space - sum(counter.counts(extra)), by_path, chunk_budget, counter)
        if queue and not placed:
            raise PackError(f"{_describe(queue[0])} cannot fit an empty window")
        window, kept_candidates = _finish_window(builder, index, placed, extra, counter, options, queue)
        if queue and not kept_candidates:
            raise PackError(f"{_describe(queue[0])} cannot fit an empty window")
        windows.append(window)
        remaining_files = len({item.path for item in queue} | {item.path for plan in plans for item in plan})
        progress(ProgressEvent(stage="pack", completed=total_items - remaining_files, total=total_items))
        if not candidates:
            break

    carried = {f.path for window in windows for f in window.files}
    omitted: list[OmittedFile] = []
    dropped = {item.path for item in queue} | {item.path for plan in plans for item in plan}
    for path in sorted(set(by_path) | set(excluded)):
        if path in excluded:
            omitted.append(OmittedFile(path, excluded[path]))
        elif path in dropped and path not in carried:
            omitted.append(OmittedFile(path, f"over --max-windows {options.max_windows}"))
        elif path not in carried:
            omitted.append(OmittedFile(path, "not relevant to the selected rules and no room for a skeleton (listed in the map)"))
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
    )


# Chains are planned against a little less than a window's content budget: the exact
# count of a finished window adds the seams between blocks (a few tokens each).
PLAN_MARGIN = 0.995


def _plan_chain_windows(
    chains: Sequence[Chain],
    by_path: Mapping[str, PackInput],
    order_of: Mapping[str, int],
    content_budget: int,
    chunk_budget: int,
    counter: _Counter,
    seed_paths: frozenset[str],
) -> list[list[_Item]]:
    """Group whole chains into windows: the full-text items each window starts with.

    Chains touching ``seed_paths`` go first, then the costliest (first-fit decreasing);
    each goes to the open window where its files not yet there cost least and fit, else to
    a new window. A chain with a file too big for one window, or bigger in all than a
    window, cannot be whole and is left to the ordinary fill.
    """
    budget = int(content_budget * PLAN_MARGIN)
    items: dict[str, _Item | None] = {}

    def item_of(path: str) -> _Item | None:
        if path not in items:
            full = _full_items(by_path[path], True, chunk_budget, counter, order_of[path])
            items[path] = full[0] if len(full) == 1 else None
        return items[path]

    costed: list[tuple[Chain, dict[str, int]]] = []
    for chain in chains:
        parts = [item_of(path) for path in chain]
        if any(part is None for part in parts):
            continue
        counts = counter.counts([part for part in parts if part is not None])
        cost = dict(zip(chain, counts))
        if sum(cost.values()) <= budget:
            costed.append((chain, cost))
    costed.sort(key=lambda pair: (not seed_paths.intersection(pair[0]), -sum(pair[1].values()), pair[0]))
    windows: list[dict[str, int]] = []
    loads: list[int] = []
    for chain, cost in costed:
        best: tuple[int, int] | None = None
        for position, window in enumerate(windows):
            added = sum(tokens for path, tokens in cost.items() if path not in window)
            if loads[position] + added <= budget and (best is None or added < best[0]):
                best = (added, position)
                if added == 0:
                    break
        if best is None:
            windows.append({})
            loads.append(0)
            best = (sum(cost.values()), len(windows) - 1)
        window = windows[best[1]]
        for path, tokens in cost.items():
            if path not in window:
                window[path] = tokens
        loads[best[1]] += best[0]
    plans: list[list[_Item]] = []
    for window in windows:
        plan = [items[path] for path in window]
        plans.append(sorted((item for item in plan if item is not None), key=lambda item: item.order))
    return plans


class _Fillers:
    """Gap filler for windows, in rank order, built lazily and reused across windows.

    First the skeletons of candidate files (their full text sits in another window, so the
    skeleton keeps their signatures in view), then the other files: skeletons where one
    exists, else the full text of small files.
    """

    def __init__(
        self,
        candidates: Sequence[str],
        rest: Sequence[str],
        by_path: Mapping[str, PackInput],
        skeleton_of: SkeletonFn | None,
        chunk_budget: int,
        counter: _Counter,
    ):
        self._order = [(path, True) for path in candidates] + [(path, False) for path in rest]
        self._by_path = by_path
        self._skeleton_of = skeleton_of
        self._chunk_budget = chunk_budget
        self._counter = counter
        self._built: dict[str, _Item | None] = {}

    def _build(self, rank: int, path: str, candidate: bool) -> _Item | None:
        entry = self._by_path[path]
        elisions = self._skeleton_of(path) if self._skeleton_of else None
        if elisions:
            lines = split_lines(entry.text)
            text = render_skeleton_block(path, lines, elisions)
            return _Item(path, "skeleton", 1, len(lines), len(lines), text, False, rank, _screen(text))
        if candidate:
            return None
        lines = split_lines(entry.text)
        text = render_full_block(path, lines)
        if _screen(text) > self._chunk_budget:
            return None  # a big file without a skeleton is not filler: it stays map-only
        return _Item(path, "full", 1, len(lines), len(lines), text, False, rank, _screen(text))

    def items(self, exclude: set[str]) -> Iterator[_Item]:
        """Filler items in rank order, skipping files in ``exclude``."""
        for rank, (path, candidate) in enumerate(self._order):
            if path in exclude:
                continue
            if path not in self._built:
                self._built[path] = self._build(len(self._order) + rank, path, candidate)
            item = self._built[path]
            if item is not None:
                yield item


def _fill(pool: list[_Item | _Pending], budget: int, counter: _Counter, expand: Callable[[_Pending], list[_Item]]) -> list[_Item]:
    """First-fit in pool order: move items that fit out of ``pool`` into the returned list.

    Pending files are expanded into blocks as the scan reaches them. Items whose byte
    screen already exceeds the free space are skipped without counting; the rest are
    counted exactly in small batches.
    """
    placed: list[_Item] = []
    remaining = budget
    index = 0
    batch = 32
    stop_at = budget * FILL_TOLERANCE
    while index < len(pool) and remaining > stop_at:
        expanded: list[_Item] = []
        for entry in pool[index : index + batch]:
            expanded.extend(expand(entry) if isinstance(entry, _Pending) else [entry])
        pool[index : index + batch] = expanded
        window = expanded[:batch]
        screened = [item for item in window if item.screen <= remaining * SCREEN_SLACK]
        counts = dict(zip((id(item) for item in screened), counter.counts(screened)))
        kept: list[_Item] = []
        for item in window:
            count = counts.get(id(item))
            if count is not None and count <= remaining:
                placed.append(item)
                remaining -= count
            else:
                kept.append(item)
        pool[index : index + batch] = kept
        index += len(kept)
    return placed


def _fill_gap(items: Iterator[_Item], space: int, counter: _Counter, budget: int) -> list[_Item]:
    """Take filler items in order while they fit ``space``; stop near full or after a long miss run."""
    placed: list[_Item] = []
    misses = 0
    stop_at = budget * FILL_TOLERANCE
    for item in items:
        if space <= stop_at or misses >= MAX_FILLER_MISSES:
            break
        if item.screen > space * SCREEN_SLACK:
            misses += 1
            continue
        count = counter.counts([item])[0]
        if count <= space:
            placed.append(item)
            space -= count
            misses = 0
        else:
            misses += 1
    return placed


def _upgrade_skeletons(
    extra: list[_Item], space: int, by_path: Mapping[str, PackInput], chunk_budget: int, counter: _Counter
) -> list[_Item]:
    """Replace filler skeletons by their files' full text, in rank order, while the room
    left in the window allows: a repository that fits is carried whole, and a spare
    window's room goes to the code around its files (bodies show the calls a chain follows)."""
    upgraded = list(extra)
    misses = 0
    for position, item in enumerate(extra):
        if space <= 0 or misses >= MAX_UPGRADE_MISSES:
            break
        if item.tier != "skeleton":
            continue
        room = space + counter.counts([item])[0]
        # Code runs well under MAX_CHARS_PER_TOKEN characters per token: a longer text
        # cannot fit, and is passed over without rendering or counting it.
        if len(by_path[item.path].text) > room * MAX_CHARS_PER_TOKEN:
            misses += 1
            continue
        full = _full_items(by_path[item.path], False, chunk_budget, counter, item.order)
        growth = counter.counts(full)[0] - room + space if len(full) == 1 else space + 1
        if growth <= space:
            upgraded[position] = full[0]
            space -= growth
            misses = 0
        else:
            misses += 1
    return upgraded


def _finish_window(
    builder: _WindowBuilder,
    index: int,
    placed: list[_Item],
    extra: list[_Item],
    counter: _Counter,
    options: PackOptions,
    queue: list[_Item | _Pending],
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
        PackedFile(item.path, item.tier, count, item.start, item.end, item.total, item.truncated)
        for item, count in zip(items, counts)
    )
    listed = builder.listed(items)
    window = Window(
        index=index, files=files, blocks=tuple(item.text for item in items), frame=builder.frame(index, listed),
        prompt_tokens=prompt_tokens, candidates=listed,
    )
    return window, sum(1 for item in items if item.candidate)
