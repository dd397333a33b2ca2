"""A digest of auditor's own files, for cache keys whose value depends on auditor's code.

A development checkout changes what auditor computes without a new version number: a
cache of computed results (a pack's output, the static analysis's findings or per-file
facts) keys them by :func:`package_digest` so that an edit to any of auditor's modules,
rules or framework models is a miss, never a stale answer.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


@cache
def package_digest() -> str:
    """SHA-256 over the path and bytes of every file of the ``auditor`` package (its source,
    rules, framework models, grammars' queries), computed once per process (about 200
    files, ~15 ms)."""
    digest = hashlib.sha256()
    files = sorted(path for path in _PACKAGE.rglob("*") if "__pycache__" not in path.parts and path.is_file())
    for path in files:
        digest.update(path.relative_to(_PACKAGE).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
