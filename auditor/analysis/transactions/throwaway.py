"""Throwaway databases: a connection a function opens on SQLite's ``:memory:`` database
(``connection = sqlite3.connect(":memory:")``) holds nothing once it is closed, so what is
written through it leaves no partial state. The parameters such a connection is passed to
along a path are marked in the path's ``off`` set (:func:`memory_marker`), and the writes
made on them are on no path.

Kept narrow: the local is bound once in its function, to that call with that literal, by a
statement at the top level of the function's body (not under ``if``/``try``/a loop); a name
that is a parameter of the function or declared ``global``/``nonlocal`` never counts.
Inputs: a function's lines. Outputs: :func:`in_memory_locals`, :func:`memory_names`,
:func:`unbound_names`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from auditor.analysis.transactions.scanning import def_parameters

_MEMORY_CONNECT = re.compile(r"""^\s*([A-Za-z_]\w*)\s*=\s*(?:sqlite3\.)?connect\(\s*(['"]):memory:\2\s*\)\s*(?:#.*)?$""")
_BINDING = r"(?m)^\s*(?:[\w.\[\]*]+\s*,\s*)*\(?{name}\s*(?:,\s*[\w.\[\]*]+\s*)*\)?\s*(?::[^=\n]*)?[-+*/|&%@^]?=(?!=)|\b(?:for|as)\s+{name}\b|\b{name}\s*:="


def memory_marker(name: str) -> str:
    """In a path's ``off`` set: parameter ``name`` is a connection to an in-memory database."""
    return f"<{name} in memory>"


def memory_names(off: Iterable[str]) -> frozenset[str]:
    """The parameters ``off`` marks as in-memory connections."""
    return frozenset(item[1 : -len(" in memory>")] for item in off if item.startswith("<") and item.endswith(" in memory>"))


def in_memory_locals(header: Sequence[str], body: Sequence[str]) -> frozenset[str]:
    """The names a function binds exactly once, to ``sqlite3.connect(":memory:")``, on a
    line at its body's top level; none of them in its signature (``header``, the lines
    before the body) or declared ``global``/``nonlocal``."""
    signature = def_parameters("\n".join(header))
    text = "\n".join(body)
    top = _indentation(next((line for line in body if line.strip() and not line.lstrip().startswith("#")), ""))
    found = set()
    for line in body:
        match = _MEMORY_CONNECT.match(line)
        if match is None or _indentation(line) != top:
            continue
        name = re.escape(match.group(1))
        if re.search(rf"(?<![\w.]){name}\b", signature) or re.search(rf"(?m)^\s*(?:global|nonlocal)\b.*(?<![\w.]){name}\b", text):
            continue
        if len(binding_pattern(name).findall(text)) == 1:
            found.add(match.group(1))
    return frozenset(found)


def _indentation(line: str) -> int:
    return len(line) - len(line.lstrip())


def unbound_names(names: frozenset[str], lines: Sequence[str]) -> frozenset[str]:
    """``names`` less those a function body's ``lines`` bind (assign, loop over, ``as``)."""
    text = "\n".join(lines)
    return frozenset(name for name in names if not binding_pattern(re.escape(name)).search(text))


@lru_cache(maxsize=8192)
def binding_pattern(name: str) -> re.Pattern[str]:
    """:data:`_BINDING` for the escaped ``name``, compiled once (up to 8,192 kept): the names
    are too many for ``re``'s own cache of 512 patterns, which then compiles them again on
    every call."""
    return re.compile(_BINDING.format(name=name))
