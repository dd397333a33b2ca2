"""Reading JSON Lines: one record per ``\\n``-terminated line.

``str.splitlines`` also splits at U+2028, U+2029, U+0085, form feeds and other separators,
which JSON allows raw inside a string (``json.dumps(..., ensure_ascii=False)`` writes them
so): a record holding one would be cut in two. JSONL is split on ``\\n`` only.
"""

from __future__ import annotations

from collections.abc import Iterator


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) for each line of ``text`` split on ``\\n`` only, a
    trailing ``\\r`` dropped; blank lines are left out."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line
