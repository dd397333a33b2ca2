"""Which SQLAlchemy a project runs, where its ``Session.commit()`` semantics differ.

Before 2.0, a ``Session`` in its default ("non-future") mode commits the *innermost*
transaction: after ``session.begin_nested()``, ``session.commit()`` releases that SAVEPOINT
and the outer transaction stays open (sqlalchemy/orm/session.py 1.4 ``Session.commit``: "If a
subtransaction or nested transaction is in effect, ... commit() ... commits the current
subtransaction"; in 2.0 ``Session.commit`` "commits the outermost database transaction"
whatever is nested, as it does on 1.4 with ``future=True``). mwdb-core (``sqlalchemy==1.4.54``)
adds each tag, parent and analysis link in ``begin_nested()`` ... ``commit()`` blocks: on
1.x those are savepoint releases inside the caller's one transaction.

The project's series is read from its declared dependencies at the repository's root: the
``sqlalchemy`` requirements of ``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``Pipfile``,
``requirements*.txt``/``*.in`` and ``requirements/*.txt`` (comments left out). Only when every
one admits no 2.x release (``==1.4.54``, ``~=1.4``, ``<2``, ``<1.5``) are commits after
``begin_nested()`` read as releases. No declaration, any bound that admits 2.x, or a
``future=True`` (or ``"future": True``) anywhere in the Python code leaves 2.0's semantics
(the analysis's default: every ``commit()`` commits). In 1.4 only a future ``Session`` commits
the outermost transaction, but an engine's ``future=True`` is read as a sign too: the
conservative side.

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
_FUTURE = re.compile(r"""\bfuture\s*=\s*True\b|["']future["']\s*[:,]\s*True\b""")
_COMMENT = re.compile(r"(?m)#.*$")


def nested_commit_releases(texts: Mapping[str, str]) -> str:
    """``"path: sqlalchemy<spec>"`` when the project declares a SQLAlchemy before 2.0 and
    never asks for 2.0's behaviour (``future=True``); "" otherwise (module docstring)."""
    if any(path.endswith(".py") and "future" in text and _FUTURE.search(text) for path, text in texts.items()):
        return ""
    found: list[tuple[str, bool]] = []
    for path in sorted(texts):
        if not _DECLARING.search(path) or path.count("/") > (1 if path.startswith("requirements/") else 0):
            continue  # only the project's own declarations, at its root (not an example's)
        text = _COMMENT.sub("", texts[path])
        found += [(f"{path}: sqlalchemy{spec}", _before_two(spec)) for spec in _specs(text)]
    if not found or not all(before for _, before in found):
        return ""  # undeclared, or some declaration admits 2.x: 2.0's semantics
    return found[0][0]


def _specs(text: str) -> list[str]:
    """The version specifiers a declaration file gives ``sqlalchemy``."""
    return [" ".join(match.group(1).split()).rstrip(", ") for match in _REQUIREMENT.finditer(text)]


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
    releases a savepoint: the nearest ``begin_nested()`` on the same receiver above it, from
    ``first`` on, is a plain statement (not ``with ...begin_nested():``, whose exit releases
    it, nor ``sp = ...begin_nested()``, released through its handle) in the same block as
    the commit (same indentation, or the commit in a ``try`` body right there; no line
    between less indented: the block is not left),
    with no other ``commit()``/``rollback()`` of that receiver between; and the commit is in
    no loop the ``begin_nested()`` is outside (a second iteration's commit is the outer one)."""
    receiver = callee.rsplit(".", 1)[0] if "." in callee else ""
    if not receiver or not 0 < line <= len(lines):
        return False
    nested = re.compile(rf"^\s*{re.escape(receiver)}\.begin_nested\(\s*\)\s*(?:#.*)?$")
    ends = (f"{receiver}.commit(", f"{receiver}.rollback(")
    own = lines[line - 1]
    indent = len(own) - len(own.lstrip())
    for number in range(line - 1, max(first, 1) - 1, -1):
        text = lines[number - 1]
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(text) - len(text.lstrip())
        if depth < indent and stripped == "try:":
            indent = depth  # a ``try`` body runs from its first line: the block carries on above it
            continue
        if depth < indent:
            return False  # the commit's block opens here: a loop, a branch or a ``with``
        if depth == indent and nested.match(text):
            return True
        if f"{receiver}.begin_nested(" in text or any(end in text for end in ends):
            return False  # a handle, a ``with`` block or another end of a transaction
    return False
