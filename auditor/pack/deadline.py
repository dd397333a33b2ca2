"""The per-file deadline in the pack stage: the work the packer does on one file's text (the
relevance scan, rule patterns over the text, and building its skeleton) is timed per file, as
the walk times reading and classifying it (``auditor.walk.walker``, ``--file-deadline``).

Input: the deadline in seconds (None: no limit) and a clock. Output: ``FileDeadline``, which
runs each step and remembers the files whose pack-stage work took longer in all than the
deadline: the packer carries them in no window, and they are listed as not audited with the
walk's reason, ``file-deadline`` (``PackResult.overran``), so the scan is partial.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from auditor.walk.files import SkipReason

FILE_DEADLINE = SkipReason.FILE_DEADLINE.value
"""The omission reason of a file whose pack-stage work overran (the walk's reason)."""

clock: Callable[[], float] = time.monotonic
"""The clock a ``FileDeadline`` reads by default (a test replaces it with a fake one)."""

T = TypeVar("T")


class FileDeadline:
    """Pack-stage seconds spent per file against ``limit_s`` (None: no limit)."""

    def __init__(self, limit_s: float | None, now: Callable[[], float] | None = None):
        self.limit_s = limit_s
        self._now = now or clock
        self._spent: dict[str, float] = {}
        self._steps: dict[str, str] = {}

    def run(self, path: str, step: str, work: Callable[[], T]) -> T:
        """``work()`` for ``path``, its time added to the file's; ``step`` names it for the
        report when this is the step that takes the file over the deadline."""
        if self.limit_s is None:
            return work()
        started = self._now()
        try:
            return work()
        finally:
            before = self._spent.get(path, 0.0)
            spent = before + self._now() - started
            self._spent[path] = spent
            if spent > self.limit_s >= before:
                self._steps[path] = step

    def overran(self, path: str) -> bool:
        """Whether ``path``'s pack-stage work has taken longer than the deadline."""
        return path in self._steps

    def overruns(self) -> dict[str, str]:
        """Each overrun file with the words a report shows, sorted by path."""
        return {
            path: f"{self._steps[path]} took {self._spent[path]:.1f} s, over the per-file deadline of {self.limit_s:g} s "
            "(--file-deadline)"
            for path in sorted(self._steps)
        }
