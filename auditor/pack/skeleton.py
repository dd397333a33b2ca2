"""Skeletons: which lines of a file to keep when only its outline fits the budget.

Input: a file's text and its ``FileIndex``. Output: a ``Skeleton`` listing the line ranges
to elide. Everything else is kept verbatim with its real line numbers: imports,
module-level statements, class headers, decorators, signatures and docstrings, and the
comments that precede definitions. Function and method bodies are elided (nested
definitions go with them); classes are never elided as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.index.model import FUNCTION_KINDS, FileIndex, count_lines

MIN_ELIDED_LINES = 2
"""Bodies shorter than this are kept: eliding one line saves nothing once marked."""


@dataclass(frozen=True)
class Elision:
    """Lines ``start_line..end_line`` (1-based, inclusive) are left out."""

    start_line: int
    end_line: int


@dataclass(frozen=True)
class Skeleton:
    """A file's outline: every line not covered by an elision is kept verbatim."""

    path: str
    line_count: int
    elisions: tuple[Elision, ...]


def build_skeleton(text: str, index: FileIndex) -> Skeleton | None:
    """The skeleton of ``text``, or None when it cannot be trusted.

    None when the file has parse errors or ``text`` is not the text that was indexed (its
    line count differs); the caller then uses the full text for that file. Elisions are
    sorted, non-overlapping and non-adjacent (adjacent ones are merged).
    """
    if index.has_errors or count_lines(text) != index.line_count:
        return None
    spans = sorted(
        (definition.body_start_line, definition.end_line)
        for definition in index.definitions
        if definition.kind in FUNCTION_KINDS
        and definition.end_line - definition.body_start_line + 1 >= MIN_ELIDED_LINES
    )
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return Skeleton(
        path=index.path,
        line_count=index.line_count,
        elisions=tuple(Elision(start, end) for start, end in merged),
    )


def kept_line_count(skeleton: Skeleton) -> int:
    """How many lines of the file the skeleton keeps."""
    elided = sum(
        elision.end_line - elision.start_line + 1 for elision in skeleton.elisions
    )
    return skeleton.line_count - elided
