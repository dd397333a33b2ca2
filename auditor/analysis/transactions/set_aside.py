"""Effects a sequence sets aside (not counted: a registry row, a lazy initializer's call),
noted in the function where they were met, so that a finding's explanation can name those on
its path.

Input: the notes (:meth:`SetAside.note`) and a finding's path of :class:`~.grading.Step`.
Output: :meth:`SetAside.along`.
"""

from __future__ import annotations

from auditor.callgraph.graph import FunctionRef
from auditor.analysis.transactions.grading import Step


class SetAside:
    """What one reason set aside, by function and line."""

    def __init__(self) -> None:
        self._noted: dict[FunctionRef, dict[int, str]] = {}

    def note(self, ref: FunctionRef, line: int, text: str) -> None:
        self._noted.setdefault(ref, {})[line] = text

    def along(self, ref: FunctionRef, steps: tuple[Step, ...]) -> tuple[str, ...]:
        """What was set aside in ``ref`` and in the callees its path ``steps`` runs through
        (theirs, transitively), as ``path:line: text``, in path order."""
        found: dict[tuple[str, int], str] = {}
        pending: list[tuple[FunctionRef, tuple[Step, ...]]] = [(ref, steps)]
        seen: set[FunctionRef] = set()
        while pending:
            function, path = pending.pop(0)
            if function in seen:
                continue
            seen.add(function)
            for line, text in sorted(self._noted.get(function, {}).items()):
                found.setdefault((function.path, line), f"{function.path}:{line}: {text}")
            pending += [(step.callee, step.inner) for step in path if step.callee is not None]
        return tuple(found.values())
