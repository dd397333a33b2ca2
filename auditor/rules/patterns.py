"""Rule patterns (``relevance``, ``sql_write``) compiled for a linear-time engine.

Rule patterns run over every walked file, and anyone who can add a file to a pull request
chooses that text. Python's backtracking ``re`` is quadratic or worse on some patterns and
inputs (``\\b(select|...)\\b[^\\n]*(%s|...)`` over one long line of ``select select ...``), so
rule patterns are compiled with RE2 (google-re2), whose matching time is linear in the
text for every pattern. RE2 has no backreferences, lookaround, possessive quantifiers or
``\\Z``: a pattern using them is a rule error naming the pattern. ``\\b``, ``\\w`` and
``\\d`` are ASCII-only in RE2 (Python's are Unicode-aware); rule patterns match code,
which is ASCII where it matters.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is raised to the caller; RE2 must not also print it


class LinearPattern(Protocol):
    """The part of a compiled pattern rule code uses (RE2's compiled object has it)."""

    pattern: str

    def search(self, text: str) -> object | None: ...

    def findall(self, text: str) -> list[object]: ...


class PatternError(ValueError):
    """A rule pattern RE2 cannot compile; the message says why."""


@lru_cache(maxsize=256)
def compile_linear(pattern: str) -> LinearPattern:
    """``pattern`` compiled for linear-time matching, once per process (RE2 keeps no cache of
    its own, and grounding asks per line). Raises :class:`PatternError` for a pattern that is
    not valid RE2 syntax (backreferences, lookaround, ...)."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(
            f"{reason} (rule patterns are matched in linear time with RE2: no backreferences, "
            "lookaround or possessive quantifiers)"
        ) from error
