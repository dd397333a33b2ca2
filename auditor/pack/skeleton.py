"""Skeletons: which lines of a file to keep when only its outline fits the budget.

Input: a file's text and its ``FileIndex``. Output: a ``Skeleton`` listing the line ranges
to elide. What a model needs to follow calls is kept verbatim with its real line numbers:
signatures, class headers and field declarations, decorators/annotations, module-level
statements, one-line docstrings and single comment lines. Elided: function and method
bodies (nested definitions go with them), the continuation lines of a multi-line
statement outside them (a long literal, call or initialiser keeps its first line; an
interface's member signatures, abstract and ``declare`` signatures and type declarations
are kept whole), the lines
of a multi-line docstring after its first, runs of two or more comment or import lines (license headers, Javadoc, import
blocks), and the blank lines between or after elided ranges. Classes are never elided as
a whole. Comment and import lines are recognised lexically per language, which is enough
for a view: a misread line is only hidden, never renumbered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from auditor.index.model import FUNCTION_KINDS, FileIndex, count_lines
from auditor.pack.prompt import split_lines

MIN_ELIDED_LINES = 2
"""Bodies shorter than this are kept: eliding one line saves nothing once marked."""


@dataclass(frozen=True)
class Elision:
    """Lines ``start_line..end_line`` (1-based, inclusive) are left out."""

    start_line: int
    end_line: int


@dataclass(frozen=True)
class Skeleton:
    """A file's outline: every line not covered by an elision is kept verbatim."""

    path: str
    line_count: int
    elisions: tuple[Elision, ...]


def build_skeleton(text: str, index: FileIndex) -> Skeleton | None:
    """The skeleton of ``text``, or None when it cannot be trusted.

    None when the file has parse errors or ``text`` is not the text that was indexed (its
    line count differs); the caller then uses the full text for that file. Elisions are
    sorted, non-overlapping and non-adjacent (adjacent ones are merged).
    """
    if index.has_errors or count_lines(text) != index.line_count:
        return None
    lines = split_lines(text)
    spans = [
        (definition.body_start_line, definition.end_line)
        for definition in index.definitions
        if definition.kind in FUNCTION_KINDS
        and definition.end_line - definition.body_start_line + 1 >= MIN_ELIDED_LINES
    ]
    spans.extend(_noise_runs(lines, index.language))
    spans.extend(_statement_tails(lines, index, spans))
    if _SYNTAX.get(index.language, _C_LIKE).docstrings:
        spans.extend(_docstring_tails(lines, index))
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        # Only blank lines between two elided ranges: one marker stands for both.
        if merged and all(not line.strip() for line in lines[merged[-1][1] : start - 1]):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    previous_end = 0
    for span in merged:
        while span[1] < len(lines) and not lines[span[1]].strip():
            span[1] += 1
        # Blank lines just above an elided range go with it too.
        while span[0] - 1 > previous_end and not lines[span[0] - 2].strip():
            span[0] -= 1
        previous_end = span[1]
    return Skeleton(
        path=index.path,
        line_count=index.line_count,
        elisions=tuple(Elision(start, end) for start, end in merged),
    )


def kept_line_count(skeleton: Skeleton) -> int:
    """How many lines of the file the skeleton keeps."""
    elided = sum(
        elision.end_line - elision.start_line + 1 for elision in skeleton.elisions
    )
    return skeleton.line_count - elided


_PYTHON_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\b)")
_JAVA_IMPORT = re.compile(r"^import\s")
_GO_IMPORT = re.compile(r"^import\s*(\(|\"|\w+\s+\")")
_JS_IMPORT = re.compile(r"^import[\s{*'\"]")
_JS_IMPORT_DONE = re.compile(r"""(\bfrom\s*['"][^'"]*['"]|^import\s*['"][^'"]*['"])\s*;?\s*$""")


def _python_import_end(stripped: str) -> str | None:
    """What ends a Python import opened on this line: ")" for an open parenthesis."""
    if ("(" in stripped and ")" not in stripped) or stripped.endswith("\\"):
        return ")" if "(" in stripped else None
    return None


def _go_import_end(stripped: str) -> str | None:
    """What ends a Go import opened on this line: ")" for an import block."""
    return ")" if stripped.endswith("(") else None


def _js_import_end(stripped: str) -> str | None:
    """What ends a JS/TS import opened on this line: only a named-import list left open
    ("import {" ... "} from 'x'") continues, up to its "from '...'"."""
    unfinished = "{" in stripped and "}" not in stripped and not _JS_IMPORT_DONE.search(stripped)
    return "from" if unfinished else None


def _one_line_import(stripped: str) -> str | None:
    return None


@dataclass(frozen=True)
class _LexicalSyntax:
    """What a language's comment and import lines look like, lexically."""

    line_comment: str
    block_comments: bool
    import_line: re.Pattern[str] | None = None
    import_end: Callable[[str], str | None] = _one_line_import
    docstrings: bool = False


_C_LIKE = _LexicalSyntax(line_comment="//", block_comments=True)
_JS_SYNTAX = _LexicalSyntax("//", True, _JS_IMPORT, _js_import_end)
_SYNTAX: dict[str, _LexicalSyntax] = {
    "python": _LexicalSyntax("#", False, _PYTHON_IMPORT, _python_import_end, docstrings=True),
    "java": _LexicalSyntax("//", True, _JAVA_IMPORT),
    "go": _LexicalSyntax("//", True, _GO_IMPORT, _go_import_end),
    "javascript": _JS_SYNTAX,
    "typescript": _JS_SYNTAX,
    "tsx": _JS_SYNTAX,
}
"""Per language; any other language gets ``//`` and ``/* */`` comments and no imports."""
_TRIPLE_QUOTE = re.compile(r"""^[rRuUbBfF]{0,2}(\"\"\"|\'\'\')""")


def _noise_runs(lines: list[str], language: str) -> list[tuple[int, int]]:
    """Line ranges (1-based) holding at least two comment or import lines and nothing but
    those and blank lines."""
    syntax = _SYNTAX.get(language, _C_LIKE)
    runs: list[tuple[int, int]] = []
    start = 0
    noisy = 0
    in_comment = False
    last = 0
    last_is_comment = False
    only_comments = True
    open_import: str | None = None  # what ends a multi-line import: ")" or a JS "from '...'"
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        noise = False
        if open_import is not None:
            noise = True
            if (open_import == ")" and ")" in stripped) or (open_import == "from" and _JS_IMPORT_DONE.search(stripped)):
                open_import = None
        elif in_comment:
            noise = True
            in_comment = "*/" not in stripped
        elif not stripped:
            if start:
                continue
            start = 0
            continue
        elif stripped.startswith(syntax.line_comment):
            noise = True
        elif syntax.block_comments and stripped.startswith("/*"):
            noise = True
            in_comment = "*/" not in stripped[2:]
        elif syntax.import_line is not None and syntax.import_line.match(line):
            noise = True
            open_import = syntax.import_end(stripped)
        if noise:
            if not start:
                start, noisy, only_comments = number, 0, True
            noisy += 1
            only_comments = only_comments and stripped.startswith(("#", "//", "/*", "*"))
            last = number
            last_is_comment = stripped.startswith(("#", "//"))
            continue
        if start and last == number - 1 and last_is_comment and not only_comments:
            # A comment line right above code after an import block documents that code:
            # kept, like a one-line docstring (a multi-line doc comment is elided whole).
            last, noisy = last - 1, noisy - 1
            while last >= start and not lines[last - 1].strip():
                last -= 1
        if start and noisy >= MIN_ELIDED_LINES:
            runs.append((start, last))
        start = 0
    if start and noisy >= MIN_ELIDED_LINES:
        runs.append((start, last))
    return runs


def _docstring_tails(lines: list[str], index: FileIndex) -> list[tuple[int, int]]:
    """For each multi-line docstring (module, class or function), the lines after its first."""
    openings: list[int] = []
    first_code = next((number for number, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")), 0)
    if first_code:
        openings.append(first_code)
    for definition in index.definitions:
        for number in range(definition.start_line + 1, min(definition.body_start_line, definition.end_line + 1, len(lines) + 1)):
            if _TRIPLE_QUOTE.match(lines[number - 1].lstrip()):
                openings.append(number)
                break
        if definition.kind not in FUNCTION_KINDS:
            # A class's docstring is the first statement of its body.
            number = next((n for n in range(definition.start_line + 1, definition.end_line + 1) if lines[n - 1].strip()), 0)
            if number and _TRIPLE_QUOTE.match(lines[number - 1].lstrip()):
                openings.append(number)
    tails: list[tuple[int, int]] = []
    for opening in sorted(set(openings)):
        stripped = lines[opening - 1].lstrip()
        quote = _TRIPLE_QUOTE.match(stripped)
        if quote is None or quote.group(1) in stripped[quote.end() :]:
            continue  # not a docstring, or a one-line one
        end = next((n for n in range(opening + 1, len(lines) + 1) if quote.group(1) in lines[n - 1]), 0)
        if end > opening:
            tails.append((opening + 1, end))
    return tails


_STRING_OR_COMMENT = re.compile(r"""\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`[^`]*`|\s(#|//).*$|^\s*(#|//).*$""")
_BRACKET = re.compile(r"[()\[\]{}]")
# Declarations whose whole text is an outline (a model follows types and fields through
# them): never reduced to their first line.
_DECLARATION = re.compile(
    r"^\s*(export\s+)?(default\s+)?(declare\s+)?(abstract\s+)?"
    r"(interface|type|enum|class|namespace|module|struct|record|@interface)\b"
)


# An interface's members are signatures (what a model needs to resolve a receiver): an
# interface is kept whole, and so is a bodiless abstract or ambient (``declare``) signature.
_INTERFACE = re.compile(
    r"^\s*((export|default|declare|public|protected|private|abstract|static|sealed|non-sealed)\s+)*(interface|@interface)\b"
)
_SIGNATURE_ONLY = re.compile(
    r"^\s*(export\s+)?((public|protected|private|static|readonly|override)\s+)*(abstract|declare)\s"
)


def _depth_change(line: str) -> int:
    """Brackets opened minus closed on a line, strings and line comments left out."""
    if not _BRACKET.search(line):
        return 0
    code = _STRING_OR_COMMENT.sub("", line)
    return code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")


def _statement_tails(lines: list[str], index: FileIndex, elided: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """For each statement outside function bodies that spans three or more lines through
    open brackets, the lines after its first (definition headers, type declarations,
    interfaces and abstract or ambient signatures are kept whole)."""
    skipped = [False] * (len(lines) + 2)
    for start, end in elided:
        for number in range(start, min(end, len(lines)) + 1):
            skipped[number] = True
    for definition in index.definitions:
        header_end = max(definition.start_line, definition.body_start_line - 1)
        if definition.kind not in FUNCTION_KINDS and _INTERFACE.match(lines[definition.start_line - 1]):
            header_end = definition.end_line
        for number in range(definition.start_line, min(header_end, len(lines)) + 1):
            skipped[number] = True
    tails: list[tuple[int, int]] = []
    number = 1
    while number <= len(lines):
        if skipped[number]:
            number += 1
            continue
        depth = _depth_change(lines[number - 1])
        if depth <= 0:
            number += 1
            continue
        first = number
        while depth > 0 and number < len(lines) and not skipped[number + 1]:
            number += 1
            depth += _depth_change(lines[number - 1])
        opening = lines[first - 1]
        if number - first >= MIN_ELIDED_LINES and not (_DECLARATION.match(opening) or _SIGNATURE_ONLY.match(opening)):
            tails.append((first + 1, number))
        number += 1
    return tails
