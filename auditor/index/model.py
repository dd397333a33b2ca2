"""What the index knows about one source file: definitions, call sites, context blocks and
imports (frozen value objects), plus the line-counting and hashing conventions every stage
shares.

Line numbers are 1-based and count ``"\\n"``-terminated lines, as tree-sitter does: a form
feed or other Unicode line separator does not start a new line (use ``text.split("\\n")``,
not ``str.splitlines``, to map them back to text).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

INDEX_VERSION = 5
"""Version of the index format and extraction rules; part of the cache key. Bump it when
either changes so that stale cache entries are never read."""


TEXT_LIMIT = 300
"""Longest callee, argument or context-expression text kept, in characters."""


FUNCTION_KINDS: tuple[str, ...] = ("function", "method")


@dataclass(frozen=True, slots=True)
class Definition:
    """A function, method or class definition.

    ``start_line`` includes decorators/annotations. Lines ``body_start_line..end_line`` are
    the part a skeleton may elide (the body after the signature and, in Python, after the
    docstring); ``body_start_line == end_line + 1`` when nothing is elidable.
    """

    name: str
    qualname: str
    kind: str
    start_line: int
    end_line: int
    body_start_line: int
    decorators: tuple[str, ...]
    bases: tuple[str, ...]
    parent: str | None


@dataclass(frozen=True, slots=True)
class CallSite:
    """A call as written: ``callee`` with argument lists of chained calls dropped
    (``Order.objects.filter(x=1).update`` -> ``Order.objects.filter.update``)."""

    callee: str
    name: str
    line: int
    enclosing: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """One item of a Python ``with`` statement or one Java try-with-resources resource."""

    expression: str
    start_line: int
    end_line: int
    enclosing: str | None


@dataclass(frozen=True, slots=True)
class Import:
    """One imported module or symbol (``name`` is None for whole-module imports)."""

    module: str
    name: str | None
    alias: str | None
    line: int


@dataclass(frozen=True, slots=True)
class FileIndex:
    """Everything the later stages need to know about one source file's structure."""

    path: str
    language: str
    content_hash: str
    line_count: int
    definitions: tuple[Definition, ...]
    calls: tuple[CallSite, ...]
    context_blocks: tuple[ContextBlock, ...]
    imports: tuple[Import, ...]
    main_block: tuple[int, int] | None
    string_assignments: tuple[tuple[str, int], ...]
    has_errors: bool

    def enclosing_definition(
        self, line: int, kinds: tuple[str, ...] = FUNCTION_KINDS
    ) -> Definition | None:
        """Innermost definition of one of ``kinds`` whose span contains ``line``."""
        innermost: Definition | None = None
        for definition in self.definitions:
            if definition.start_line > line:
                break
            if (
                definition.kind in kinds
                and line <= definition.end_line
                and (innermost is None or definition.end_line <= innermost.end_line)
            ):
                innermost = definition
        return innermost


_AFTER_OPENING = re.compile(r"([(\[{]) ")


_BEFORE_CLOSING = re.compile(r" ([)\]}])")


_AROUND_MEMBER_ACCESS = re.compile(r" ?(\??\.) ?")


_QUOTES = "\"'`"


def normalise_whitespace(text: str) -> str:
    """Collapse whitespace runs to one space and drop spaces just inside brackets."""
    if " " not in text and text.isprintable():
        return text  # the common case: nothing to normalise
    text = " ".join(text.split())
    if "( " in text or "[ " in text or "{ " in text:
        text = _AFTER_OPENING.sub(r"\1", text)
    if " )" in text or " ]" in text or " }" in text:
        text = _BEFORE_CLOSING.sub(r"\1", text)
    return text


def count_lines(text: str) -> int:
    """Number of lines in ``text`` ("\\n"-separated; a final newline ends the last line)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def content_hash_of(text: str) -> str:
    """SHA-256 (hex) of the UTF-8 encoding of ``text``: the default content hash."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
