"""Progress reporting without printing: core stages call a callback the CLI renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ProgressEvent:
    """One progress update from a pipeline stage.

    ``stage`` names the stage ("walk", "tokens", "index", "pack", ...); ``completed`` and
    ``total`` count its units (``total`` is None when unknown); ``message`` is an optional
    notice for the user (e.g. "no tokenizer found: counts are estimates").
    """

    stage: str
    completed: int = 0
    total: int | None = None
    message: str | None = None


ProgressCallback = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """A progress callback that ignores every event."""
