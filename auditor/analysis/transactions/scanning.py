"""Text scanning for the transaction analysis: the one bracket scanner, a call as a reader
can search for it, and a file's lines split on first use.

The index keeps calls, definitions and ``with`` blocks; what it does not keep (where a
call's argument list closes, a function's parameter list, the source of a chained call)
is read from the text here, never from a second hand-written scanner elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, cached_property
from typing import overload

from auditor.index.model import CallSite

# ``name = ...``, ``name: T = ...`` or ``name := ...`` at a line's start: one pattern for
# every name (the analysis asks about many).
NAME_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?:?=\s*")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
STRING_START = re.compile(r"""^\s*[rRbBuUfF]{0,2}("{3}|'{3}|"|'|`)""")
ASSIGNED_NAME = re.compile(r"^\s*(?:(?:var|let|const|final)\s+)?(?:[\w.<>\[\]]+\s+)?([A-Za-z_]\w*)\s*(?:,\s*\w+\s*)*(?::=|=)(?!=)")
_TEMPLATE_QUOTE = "`"


_PYTHON_STRING = re.compile(r"([rbfu]{0,2})(['\"])(?:\\.|(?!\2).)*\2", re.IGNORECASE)


_UNPACKED = re.compile(r"^,\s*\w+\s*=(?!=)\s*(.*)")
_ANNOTATED = re.compile(r"^:[^=]+=(?!=)\s*(.*)")


def python_code(line: str) -> str:
    """A Python line without its one-line string literals' contents and its comment."""
    return re.sub(r"#.*$", "", _PYTHON_STRING.sub('""', line))


def assigned_name(line: str) -> str | None:
    """The name a line assigns at its start (``name = ...``), if any."""
    match = NAME_ASSIGNMENT.match(line)
    return match.group(1) if match else None


@cache
def _stops(quotes: str, line_comment: str | None, strings_end_at_newline: bool) -> re.Pattern[str]:
    """The characters that can change a bracket scan's state (no other is visited)."""
    characters = "\\" + quotes + "()[]{}" + (line_comment or "") + ("\n" if strings_end_at_newline or line_comment else "")
    return re.compile("[" + re.escape(characters) + "]")


def closing_bracket(
    text: str,
    position: int,
    *,
    quotes: str = "'\"",
    line_comment: str | None = None,
    strings_end_at_newline: bool = False,
) -> int | None:
    """The index of the bracket closing the one at ``position``, or None when it never
    closes. Brackets inside strings (opened by one of ``quotes``; a backslash escapes the
    next character) and after ``line_comment`` up to the line's end do not count; with
    ``strings_end_at_newline``, a string other than a backtick template ends at its line."""
    stops = _stops(quotes, line_comment, strings_end_at_newline)
    depth = 0
    quote: str | None = None
    index = position
    while True:
        stop = stops.search(text, index)
        if stop is None:
            return None
        index = stop.start()
        char = text[index]
        if char == "\n":
            if strings_end_at_newline and quote != _TEMPLATE_QUOTE:
                quote = None
        elif quote is not None:
            if char == "\\":
                if strings_end_at_newline and quote != _TEMPLATE_QUOTE and text.startswith("\n", index + 1):
                    pass  # the string ends with its line, escaped or not
                else:
                    index += 1
            elif char == quote:
                quote = None
        elif char in quotes:
            quote = char
        elif char == line_comment:
            newline = text.find("\n", index)
            if newline < 0:
                return None
            index = newline
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index
        index += 1


def def_parameters(header: str) -> str:
    """The text between a Python ``def``'s parentheses in ``header`` (its lines up to the
    body); the whole header when they cannot be found."""
    opening = header.find("(", max(header.find("def "), 0))
    closing = closing_bracket(header, opening) if opening >= 0 else None
    return header if closing is None else header[opening + 1 : closing]


def call_text(call: CallSite, line_text: str) -> str:
    """The call as a reader can search for it: ``Product.objects.filter(...).update(...)``
    where the index keeps ``Product.objects.filter.update`` (argument lists dropped).

    Walks the callee's dotted parts through the source line, writing each argument list as
    ``(...)``; falls back to ``callee(...)`` when the line does not hold the call as written.
    """
    parts = call.callee.split(".")
    start = line_text.find(parts[0])
    while start != -1:
        shown = _follow_parts(line_text, start, parts)
        if shown is not None:
            return shown
        start = line_text.find(parts[0], start + 1)
    return f"{call.callee}(...)"


def _follow_parts(text: str, position: int, parts: list[str]) -> str | None:
    shown: list[str] = []
    for number, part in enumerate(parts):
        if not text.startswith(part, position):
            return None
        shown.append(part)
        position += len(part)
        position = _skip_spaces(text, position)
        if position < len(text) and text[position] == "(":
            end = closing_bracket(text, position)
            shown.append("(...)")
            if end is None:  # the call runs on past this line: nothing more can be matched
                return "".join(shown) + ("." + ".".join(parts[number + 1 :]) + "(...)" if number + 1 < len(parts) else "")
            position = _skip_spaces(text, end + 1)
        if number + 1 < len(parts):
            if position >= len(text) or text[position] != ".":
                return None
            shown.append(".")
            position = _skip_spaces(text, position + 1)
    if not shown or shown[-1] != "(...)":
        shown.append("(...)")
    return "".join(shown)


def _skip_spaces(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


class FileLines(Sequence[str]):
    """A file's lines, split from its text on first use (shared by its facts and the
    contexts models see; it holds no reference back, so a file's facts are freed as soon as
    the analysis drops them)."""

    def __init__(self, text: str) -> None:
        self._text = text

    @cached_property
    def lines(self) -> list[str]:
        """The text split at newlines."""
        return self._text.split("\n")

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.lines[index]
