"""The token-ratio guard: how many prompt tokens a pack spends per token of the code it audits.

Input: a ``PackResult``. Output: a ``TokenRatio``, the planned prompt tokens of every window
over the tokens of the distinct file text the windows carry in full (each file, or line
range of one, counted once). Scaffolding, outlines, filler and files repeated for chains make
the ratio exceed 1; a ratio far above it means the windows spend most of their tokens on
something other than the audited code, and ``auditor scan``/``auditor pack`` say so before
sending anything (``--max-token-ratio`` makes it fatal).
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.pack.packer import PackResult


@dataclass(frozen=True)
class TokenRatio:
    """Planned prompt tokens against the tokens of the code they carry."""

    prompt_tokens: int
    audited_tokens: int

    @property
    def ratio(self) -> float:
        """Prompt tokens per audited token (0.0 when nothing is audited)."""
        return self.prompt_tokens / self.audited_tokens if self.audited_tokens else 0.0

    windows: int

    def exceeds(self, limit: float) -> bool:
        """Whether the ratio is over ``limit``: never when nothing is audited, nor for a plan
        of one window (the least a scan can send, whatever its scaffold costs)."""
        return self.windows > 1 and self.audited_tokens > 0 and self.ratio > limit


def token_ratio(result: PackResult) -> TokenRatio:
    """The ratio of ``result``: its windows' prompt tokens over the distinct full text they carry."""
    distinct: dict[tuple[str, int, int], int] = {}
    for window in result.windows:
        for placed in window.files:
            if placed.tier == "full":
                distinct.setdefault((placed.path, placed.start_line, placed.end_line), placed.tokens)
    return TokenRatio(sum(window.prompt_tokens for window in result.windows), sum(distinct.values()), len(result.windows))
