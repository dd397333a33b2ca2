"""Python source text read statement by statement (no parse): what a line assigns, the
``return`` statements of a function, the first argument of a call, bracket depth.

Inputs: lines of text. Output: the helpers below, for :mod:`.receiver_types` and its readers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from auditor.index.model import Definition

SESSION_GET = re.compile(r"^(?:[\w.]*[sS]ession)\.get\(\s*([A-Za-z_][\w.]*)\s*[,)]")
"""``session.get(M, ...)``: the model read, in group 1."""
_UNPACKED = re.compile(r"^,\s*\w+\s*=(?!=)\s*(.*)")
_ANNOTATED = re.compile(r"^:[^=]+=(?!=)\s*(.*)")
_MAX_STATEMENT_LINES = 12


def return_starts(lines: list[str], definition: Definition, definitions: Iterable[Definition]) -> Iterator[tuple[int, str]]:
    """``(line, text after return)`` of each ``return`` statement of ``definition``'s own
    body (not those of the functions and classes nested in it, among ``definitions``)."""
    nested = [
        (other.start_line, other.end_line)
        for other in definitions
        if definition.start_line < other.start_line <= definition.end_line
    ]
    for number in range(definition.body_start_line, min(definition.end_line, len(lines)) + 1):
        stripped = lines[number - 1].strip()
        if (stripped == "return" or stripped.startswith("return ")) and not any(start <= number <= end for start, end in nested):
            yield number, stripped[len("return") :].strip()


def assigned_expression(text: str, variable: str) -> tuple[str, bool] | None:
    """The right-hand side when ``text`` assigns ``variable`` (``v = ...``, ``v: T = ...``,
    or ``v, flag = ...`` which is unpacked), else None."""
    stripped = text.lstrip()
    if not stripped.startswith(variable):
        return None
    rest = stripped[len(variable) :]
    if rest[:1].isalnum() or rest[:1] == "_":
        return None
    rest = rest.lstrip()
    if rest.startswith("=") and not rest.startswith("=="):
        return rest[1:].strip(), False
    for pattern, unpacked in ((_ANNOTATED, False), (_UNPACKED, True)):
        match = pattern.match(rest)
        if match:
            return match.group(1), unpacked
    return None


def depth_of(text: str) -> int:
    """Open minus closed brackets on a line (strings not parsed: an estimate)."""
    return sum(text.count(char) for char in "([{") - sum(text.count(char) for char in ")]}")


def first_argument(arguments: str) -> str | None:
    """The first argument's text of ``(arg, ...)`` (a call's parenthesised arguments), when
    it is positional; None for no argument or a keyword one."""
    if not arguments.startswith("("):
        return None
    depth = 0
    for position, char in enumerate(arguments):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if (char == "," and depth == 1) or depth == 0:
            found = arguments[1:position].strip()
            if not found or re.match(r"^[A-Za-z_]\w*\s*=(?!=)", found):
                return None
            return found
    return None


def statement_end(lines: list[str], number: int, start: str) -> tuple[str, int]:
    """The statement from ``start`` (its text on line ``number`` of ``lines``) through the line
    where its brackets close (at most a dozen lines on), joined, and the number of that line."""
    text, depth = start, depth_of(start)
    extra = 0
    while depth > 0 and extra < _MAX_STATEMENT_LINES and number + extra < len(lines):
        extra += 1
        following = lines[number + extra - 1]
        text += " " + following.strip()
        depth += depth_of(following)
    return text.strip(), number + extra
