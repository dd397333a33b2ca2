"""Why a file is in a window: the reasons the pack manifest totals tokens by.

Every placed block carries one ``PackReason``. Full text of a file is placed once, except
for ``CHAIN``: a file several call chains pass through is repeated in each window that
holds one of those chains whole. Outlines (skeletons) may repeat: they are the cheap view of
a file whose full text sits in another window.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["PackReason"]


class PackReason(str, Enum):
    """Why a block is in its window; the values are the strings users see."""

    CHAIN = "chain"  # a file of a call chain (static or relevance) planned whole in this window
    CHANGED = "changed"  # a seed path (a diff's changed file), asked for by name
    RELEVANT = "rule-relevant"  # matches the rules' relevance patterns
    NEIGHBOUR = "neighbour"  # a call-graph neighbour of a rule-relevant file
    CHAIN_FILE = "on-a-chain"  # on a chain that could not be planned whole, carried in rank order
    REPOSITORY = "repository"  # no rules: every file is carried
    OUTLINE = "outline"  # a skeleton filling room left in the window
    CONTEXT = "context"  # another file's full text filling room left (carried only here)
