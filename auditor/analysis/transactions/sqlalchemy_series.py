"""Which SQLAlchemy a project runs, where its ``Session.commit()`` semantics differ.

Before 2.0, a ``Session`` in its default ("non-future") mode commits the *innermost*
transaction: after ``session.begin_nested()``, ``session.commit()`` releases that SAVEPOINT
and the outer transaction stays open (sqlalchemy/orm/session.py 1.4 ``Session.commit``: "If a
subtransaction or nested transaction is in effect, ... commit() ... commits the current
subtransaction"; in 2.0 ``Session.commit`` "commits the outermost database transaction"
whatever is nested, as it does on 1.4 with ``future=True``). mwdb-core (``sqlalchemy==1.4.54``)
adds each tag, parent and analysis link in ``begin_nested()`` ... ``commit()`` blocks: on
1.x those are savepoint releases inside the caller's one transaction.

The project's series is read from its declared dependencies: a ``sqlalchemy`` requirement in
``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``Pipfile`` or a ``requirements*.txt``/
``requirements/*.txt``/``*.in`` file whose version bound admits no 2.x release (``==1.4.54``,
``~=1.4``, ``<2``, ``<1.5``). No declaration, a bound that admits 2.x, or a ``future=True``
passed anywhere in the Python code leaves 2.0's semantics (the analysis's default: every
``commit()`` commits).

Input: every walked file's text by path. Output: :func:`nested_commit_releases`, the
declaration that makes a commit after ``begin_nested()`` a savepoint release ("" when none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_DECLARING = re.compile(r"(?:^|/)(?:pyproject\.toml|setup\.py|setup\.cfg|Pipfile|requirements[\w.-]*\.(?:txt|in)|requirements/[\w.-]+\.(?:txt|in))$")
_REQUIREMENT = re.compile(
    r"""(?im)(?:^|["'\s,\[])sqlalchemy(?:\[[^\]]*\])?\s*(?:=\s*["'])?\s*((?:[=~<>!]=?\s*[\d][\w.*]*\s*,?\s*)+)"""
)
_BOUND = re.compile(r"([=~<>!]=?=?)\s*(\d+(?:\.[\d*]+)*)")
_FUTURE = re.compile(r"\bfuture\s*=\s*True\b")


def nested_commit_releases(texts: Mapping[str, str]) -> str:
    """``"path: sqlalchemy<spec>"`` when the project declares a SQLAlchemy before 2.0 and
    never asks for 2.0's behaviour (``future=True``); "" otherwise (module docstring)."""
    if any(path.endswith(".py") and "future" in text and _FUTURE.search(text) for path, text in texts.items()):
        return ""
    for path in sorted(texts):
        if not _DECLARING.search(path):
            continue
        for match in _REQUIREMENT.finditer(texts[path]):
            spec = " ".join(match.group(1).split()).rstrip(", ")
            if _before_two(spec):
                return f"{path}: sqlalchemy{spec}"
    return ""


def _before_two(spec: str) -> bool:
    """Whether a version specifier admits no 2.x release."""
    for operator, version in _BOUND.findall(spec):
        parts = [part for part in version.split(".") if part != "*"]
        major = int(parts[0])
        if operator in ("==", "~=", "===", "<=") and major < 2:
            return True
        if operator == "<" and (major < 2 or (major == 2 and all(part == "0" for part in parts[1:]))):
            return True  # ``<2``, ``<2.0``, ``<2.0.0``, ``<1.5``; not ``<2.1``
    return False


def releases_savepoint(lines: list[str] | tuple[str, ...], first: int, line: int, callee: str) -> bool:
    """Whether the ``commit()`` at ``line`` (1-based; ``callee`` as written, ``db.session.commit``)
    follows a ``begin_nested()`` on the same receiver in the block it is in: the nearest such
    call above it, from ``first`` on, with no other ``commit()`` or ``rollback()`` of that
    receiver between, and neither the commit nor a line between less indented than it (a
    ``begin_nested()`` in an ``if`` may not have run: the commit after the ``if`` is counted)."""
    receiver = callee.rsplit(".", 1)[0] if "." in callee else ""
    if not receiver:
        return False
    nested = f"{receiver}.begin_nested("
    ends = (f"{receiver}.commit(", f"{receiver}.rollback(")
    own = lines[line - 1] if 0 < line <= len(lines) else ""
    depth = len(own) - len(own.lstrip())  # the least indentation from the commit up
    for number in range(line - 1, max(first, 1) - 1, -1):
        text = lines[number - 1] if number <= len(lines) else ""
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        depth = min(depth, indent)
        if nested in text:
            return indent <= depth
        if any(end in text for end in ends):
            return False
    return False
