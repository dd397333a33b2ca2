"""The change under review, as the packer sees it: which files a diff-scoped pack may carry,
and the compact list of changed lines every window's prompt gives the model.

Input: the files in the change's subgraph and the changed line ranges per file (computed by
``auditor.runs.diffscope``). Output: ``ChangeScope``; ``pack`` leaves every other file out of
the windows (it stays in the repository map, listed as omitted with ``OUTSIDE_CHANGE``), and
appends ``ChangeScope.render()`` to the map, so the list is counted in each window's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTSIDE_CHANGE = "outside the change under review and its call chains (review --full packs it; listed in the map)"
"""The omission reason of a file a diff-scoped pack leaves out."""

LineRange = tuple[int, int]


@dataclass(frozen=True)
class ChangeScope:
    """What a diff-scoped pack carries: ``paths``, the files of the change's subgraph (the
    changed files, the files of the chains through the changed functions, their call-graph
    neighbours), and ``lines``: per changed file, the head's changed line ranges (inclusive;
    a pure deletion is the line after it), sorted by path."""

    paths: tuple[str, ...]
    lines: tuple[tuple[str, tuple[LineRange, ...]], ...] = ()

    def render(self) -> str:
        """The changed-lines section the prompt carries after the repository map: one line per
        changed file, ranges as ``12-18, 40``; empty when nothing changed."""
        if not self.lines:
            return ""
        rows = [
            f"- {path}: " + ", ".join(f"{start}" if start == end else f"{start}-{end}" for start, end in ranges)
            for path, ranges in self.lines
        ]
        return (
            "\n## Changed lines (the change under review)\n\n"
            "Report findings whose sink or chain meets these lines; other code is context.\n\n"
            + "\n".join(rows) + "\n"
        )
