"""Returning freed memory between stages (auditor.storage.memory) changes no value and runs
without glibc too."""

from __future__ import annotations

import pytest

from auditor.storage import memory


def test_returning_free_memory_keeps_every_value() -> None:
    values = [list(range(1000)) for _ in range(100)]
    del values[::2]

    memory.return_free_memory()

    assert values == [list(range(1000))] * 50


def test_without_malloc_trim_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)

    memory.return_free_memory()
