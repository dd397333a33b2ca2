"""Gap filling: what fills the room a window's candidates and chains leave.

Input: the ranked paths, the walked files, their skeletons, and the room left in a window.
Output: filler ``Block`` objects: candidates' skeletons (their full text sits in another
window), then the other files' skeletons or small full texts, upgraded to full text while
room allows. A file's full text is placed at most once across the windows
(``Fillers.carried``): filler never repeats a file the candidates or an earlier window carry
in full, so only a chain plan (``auditor.pack.packer``) repeats full text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from auditor.pack.blocks import Block, PendingFile, TokenCounter, full_blocks, screen_tokens
from auditor.pack.prompt import render_full_block, render_skeleton_block, split_lines
from auditor.pack.rank import PackInput
from auditor.pack.reasons import PackReason

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

class PlacedFile(Protocol):
    """What ``Fillers.place`` reads of a placed file (a ``Block`` or a window's ``PackedFile``)."""

    path: str
    tier: str


SkeletonFn = Callable[[str], "tuple[tuple[int, int], ...] | None"]


class Fillers:
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
        counter: TokenCounter,
        dropped: Callable[[str], bool] | None = None,
    ):
        """``dropped(path)``: whether a file goes no further (its pack-stage work overran the
        per-file deadline, ``auditor.pack.deadline``), asked once its skeleton is built."""
        self._order = [(path, True) for path in candidates] + [(path, False) for path in rest]
        # Files whose full text is (or will be) in some window: the candidates, and each
        # filler file once it is placed in full (``place``).
        self.carried: set[str] = set(candidates)
        self._by_path = by_path
        self._skeleton_of = skeleton_of
        self._chunk_budget = chunk_budget
        self._counter = counter
        self._built: dict[str, Block | None] = {}
        self._dropped = dropped

    def _build(self, rank: int, path: str, candidate: bool) -> Block | None:
        entry = self._by_path[path]
        elisions = self._skeleton_of(path) if self._skeleton_of else None
        if self._dropped is not None and self._dropped(path):
            return None
        if elisions:
            lines = split_lines(entry.text)
            text = render_skeleton_block(path, lines, elisions)
            return Block(
                path, "skeleton", 1, len(lines), len(lines), text, False, rank, screen_tokens(text),
                reason=PackReason.OUTLINE,
            )
        if candidate:
            return None
        lines = split_lines(entry.text)
        text = render_full_block(path, lines)
        if screen_tokens(text) > self._chunk_budget:
            return None  # a big file without a skeleton is not filler: it stays map-only
        return Block(path, "full", 1, len(lines), len(lines), text, False, rank, screen_tokens(text), reason=PackReason.CONTEXT)

    def items(self, exclude: set[str]) -> Iterator[Block]:
        """Filler items in rank order, skipping files in ``exclude``."""
        for rank, (path, candidate) in enumerate(self._order):
            if path in exclude:
                continue
            if path not in self._built:
                self._built[path] = self._build(len(self._order) + rank, path, candidate)
            item = self._built[path]
            if item is not None and not (item.tier == "full" and path in self.carried):
                yield item

    def place(self, files: Iterable[PlacedFile]) -> None:
        """Record the files a finished window holds: their full texts are not filler again."""
        self.carried.update(placed.path for placed in files if placed.tier == "full")


def fill_candidates(pool: list[Block | PendingFile], budget: int, counter: TokenCounter, expand: Callable[[PendingFile], list[Block]]) -> list[Block]:
    """First-fit in pool order: move items that fit out of ``pool`` into the returned list.

    Pending files are expanded into blocks as the scan reaches them. Items whose byte
    screen already exceeds the free space are skipped without counting; the rest are
    counted exactly in small batches.
    """
    placed: list[Block] = []
    remaining = budget
    index = 0
    batch = 32
    stop_at = budget * FILL_TOLERANCE
    while index < len(pool) and remaining > stop_at:
        expanded: list[Block] = []
        for entry in pool[index : index + batch]:
            expanded.extend(expand(entry) if isinstance(entry, PendingFile) else [entry])
        pool[index : index + batch] = expanded
        window = expanded[:batch]
        screened = [item for item in window if item.screen <= remaining * SCREEN_SLACK]
        counts = dict(zip((id(item) for item in screened), counter.counts(screened)))
        kept: list[Block] = []
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


def fill_gap(items: Iterator[Block], space: int, counter: TokenCounter, budget: int) -> list[Block]:
    """Take filler items in order while they fit ``space``; stop near full or after a long miss run."""
    placed: list[Block] = []
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


def upgrade_skeletons(
    extra: list[Block], space: int, by_path: Mapping[str, PackInput], chunk_budget: int, counter: TokenCounter,
    carried: Collection[str],
) -> list[Block]:
    """Replace filler skeletons by their files' full text, in rank order, while the room
    left in the window allows: a repository that fits is carried whole, and a spare
    window's room goes to the code around its files (bodies show the calls a chain follows).
    A file in ``carried`` (its full text is in some window already) keeps its skeleton."""
    upgraded = list(extra)
    misses = 0
    for position, item in enumerate(extra):
        if space <= 0 or misses >= MAX_UPGRADE_MISSES:
            break
        if item.tier != "skeleton" or item.path in carried:
            continue
        room = space + counter.counts([item])[0]
        # Code runs well under MAX_CHARS_PER_TOKEN characters per token: a longer text
        # cannot fit, and is passed over without rendering or counting it.
        if len(by_path[item.path].text) > room * MAX_CHARS_PER_TOKEN:
            misses += 1
            continue
        full = full_blocks(by_path[item.path], False, chunk_budget, counter, item.order, PackReason.CONTEXT)
        growth = counter.counts(full)[0] - room + space if len(full) == 1 else space + 1
        if growth <= space:
            upgraded[position] = full[0]
            space -= growth
            misses = 0
        else:
            misses += 1
    return upgraded
