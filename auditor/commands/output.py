"""Where command output goes: stdout, or a file with a clean error when it cannot be written."""

from __future__ import annotations

import sys
from pathlib import Path

from auditor.errors import UsageError


def write_output(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None.

    An unwritable path is a UsageError naming it (exit 64), never a traceback.
    """
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from exc
