"""Blocks: a file (or a line range of it) rendered for a window, screened by bytes and
counted exactly once.

Input: a walked file (``PackInput``) and a token budget. Output: ``Block`` objects (full
text, split into consecutive line ranges when a file exceeds a window) and their exact
counts (``TokenCounter``), which the packer and the gap filler (``auditor.pack.fill``) place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from auditor.pack.prompt import render_full_block, split_lines
from auditor.pack.rank import PackInput
from auditor.pack.reasons import PackReason
from auditor.tokens.tokenizer import PromptTokenizer

# Bytes per token used to screen items before exact counting; deliberately low (over-counts)
# so screening never rejects an item that would fit.
SCREEN_BYTES_PER_TOKEN = 2.0


@dataclass(frozen=True)
class PendingFile:
    """A candidate file not yet rendered into blocks."""

    path: str
    order: int


@dataclass(frozen=True)
class Block:
    """A file, or a line range of one, rendered as a block for a window, with why it is there."""

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
    reason: PackReason = PackReason.RELEVANT


class TokenCounter:
    """Exact token counts of rendered items, made once and only for items being placed."""

    def __init__(self, tokenizer: PromptTokenizer):
        self._tokenizer = tokenizer
        self._counts: dict[tuple[str, str, int, int, int], int] = {}

    @staticmethod
    def _key(item: Block) -> tuple[str, str, int, int, int]:
        return (item.path, item.tier, item.start, item.end, len(item.text))

    def counts(self, items: Sequence[Block]) -> list[int]:
        missing = list({self._key(item): item for item in items if self._key(item) not in self._counts}.values())
        for item, count in zip(missing, self._tokenizer.count_many([item.text for item in missing])):
            self._counts[self._key(item)] = count
        return [self._counts[self._key(item)] for item in items]


def describe(entry: Block | PendingFile) -> str:
    return entry.path if isinstance(entry, PendingFile) else f"{entry.path} lines {entry.start}-{entry.end}"


def screen_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / SCREEN_BYTES_PER_TOKEN)


def full_blocks(
    entry: PackInput, candidate: bool, chunk_budget: int, counter: TokenCounter, order: int = 0,
    reason: PackReason = PackReason.RELEVANT,
) -> list[Block]:
    """The file in full, or consecutive line-range chunks when it is too big for one window.

    ``chunk_budget`` is in tokens. The byte screen proposes chunk boundaries; any chunk
    whose exact count is still over budget is halved until it fits (a single line that
    alone exceeds the budget is cut and marked, the only case where text is truncated).
    """
    lines = split_lines(entry.text)
    whole = render_full_block(entry.path, lines)
    if screen_tokens(whole) <= chunk_budget or len(lines) <= 1:
        spans = [(1, len(lines))]
    else:
        spans = []
        start = 1
        while start <= len(lines):
            size = 0
            end = start - 1
            while end < len(lines) and (end < start or size + screen_tokens(lines[end]) + 4 <= chunk_budget):
                size += screen_tokens(lines[end]) + 4
                end += 1
            spans.append((start, end))
            start = end + 1
    items: list[Block] = []
    pending = list(reversed(spans))
    while pending:
        start, end = pending.pop()
        text = whole if (start, end) == (1, len(lines)) else render_full_block(entry.path, lines, start, end)
        item = Block(entry.path, "full", start, end, len(lines), text, candidate, order, screen_tokens(text), reason=reason)
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
            items.append(
                Block(entry.path, "full", start, end, len(lines), text, candidate, order, screen_tokens(text), True, reason)
            )
    return items


def _truncate_line(line: str, budget: int) -> str:
    """Cut a line to at most ``budget // 2`` UTF-8 bytes (a byte-level token is >= 1 byte), marked."""
    data = line.encode("utf-8")[: max(budget // 2 - 16, 1)]
    return data.decode("utf-8", errors="ignore") + f" …[line cut: {len(line.encode('utf-8')):,} bytes]"
