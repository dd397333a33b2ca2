"""Index stage: what each source file defines, calls, imports and opens as a context.

Input: ``(path, text, language, content_hash)`` for every file the walk kept. Output: one
``FileIndex`` per path (definitions with qualified names and spans, call sites with callee
chains and their enclosing function, ``with``/try-with-resources blocks, imports, and a few
Python module-level facts), used by packing (skeletons), grounding and entry-point detection.

Extraction is driven by the tree-sitter query files in ``auditor/languages`` (see
``auditor.languages.grammars`` for the capture conventions); this module holds no
per-language branches. Indexes are cached on disk by content hash and language, under a
directory versioned by ``INDEX_VERSION``, both as one file per entry and as one pack file
per scan (so that repeating a scan reads a single file); many cache misses are parsed by
worker processes.

Line numbers are 1-based and count ``"\\n"``-terminated lines, as tree-sitter does: a form
feed or other Unicode line separator does not start a new line (use ``text.split("\\n")``,
not ``str.splitlines``, to map them back to text).
"""

from __future__ import annotations

import gc
import hashlib
import logging
import marshal
import multiprocessing
import os
import pickle
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, fields, make_dataclass, replace
from functools import cache
from itertools import starmap
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from tree_sitter import Node, QueryCursor

from auditor.storage.sealed import prune_least_recent, seal, unseal, write_atomically
from auditor.languages.grammars import (
    UnsupportedLanguageError,
    parser_for,
    query_bundle,
)
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

INDEX_VERSION = 2
"""Version of the index format and extraction rules; part of the cache key. Bump it when
either changes so that stale cache entries are never read."""

TEXT_LIMIT = 300
"""Longest callee, argument or context-expression text kept, in characters."""

FUNCTION_KINDS: tuple[str, ...] = ("function", "method")

logger = logging.getLogger(__name__)


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


# --------------------------------------------------------------------------- text helpers

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


def _normalise_callee(text: str) -> str:
    if " " not in text and text.isprintable():
        return text  # the common case, as in normalise_whitespace
    text = normalise_whitespace(text)
    return _AROUND_MEMBER_ACCESS.sub(r"\1", text) if " " in text else text


_SHORT_SPAN = TEXT_LIMIT * 4
"""Bounded texts of spans up to this many bytes are decoded whole (the first piece of the
piecewise decoding of longer spans has this size)."""


class _SourceText:
    """One file's source, as the UTF-8 bytes tree-sitter parsed and, when the text is
    ASCII (byte offsets are then character offsets), as the text itself: slicing the text
    gives what decoding a byte slice would, without the decoding."""

    __slots__ = ("ascii", "source")

    def __init__(self, text: str) -> None:
        self.source = text.encode("utf-8", "surrogatepass")
        self.ascii = text if text.isascii() else None

    def span(self, start: int, end: int) -> str:
        """The text of bytes ``start..end`` (undecodable bytes replaced)."""
        if self.ascii is not None:
            return self.ascii[start:end]
        return self.source[start:end].decode("utf-8", "replace")

    def bounded(self, start: int, end: int) -> str:
        """The normalised text of bytes ``start..end``, cut to ``TEXT_LIMIT``
        characters, decoding no more of a long span than needed."""
        if end - start <= _SHORT_SPAN:
            return normalise_whitespace(self.span(start, end))[:TEXT_LIMIT]
        limit = TEXT_LIMIT
        size = _SHORT_SPAN
        while True:
            stop = min(end, start + size)
            text = self.span(start, stop)
            if stop < end:
                text = text[:-1]  # the slice may end inside a multi-byte character
            text = normalise_whitespace(text)
            if len(text) >= limit or stop >= end:
                return text[:limit]
            size *= 4

    def without_spans(
        self,
        start: int,
        end: int,
        spans: Sequence[tuple[int, int]],
        span_starts: Sequence[int],
    ) -> str:
        """The text of bytes ``start..end`` with every span (sorted; argument lists)
        inside it removed."""
        index = bisect_left(span_starts, start)
        if index == len(spans) or span_starts[index] >= end:
            return self.span(start, end)  # the common case: nothing inside to remove
        pieces: list[bytes] = []
        cursor = start
        source = self.source
        while index < len(spans) and spans[index][0] < end:
            span_start, span_end = spans[index]
            if span_start >= cursor and span_end <= end:
                pieces.append(source[cursor:span_start])
                cursor = span_end
            index += 1
        pieces.append(source[cursor:end])
        return b"".join(pieces).decode("utf-8", "replace")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] == text[0]:
        return text[1:-1]
    return text


def _first_line(node: Node) -> int:
    return node.start_point.row + 1


def _last_line(node: Node) -> int:
    """1-based last line of a node; a node ending at column 0 ends on the line before."""
    end_row, end_column = node.end_point
    if end_column == 0 and end_row > node.start_point.row:
        return end_row
    return end_row + 1


def count_lines(text: str) -> int:
    """Number of lines in ``text`` ("\\n"-separated; a final newline ends the last line)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


QUERY_NAMES: tuple[str, ...] = (
    "definitions",
    "calls",
    "imports",
    "contexts",
    "main",
    "assignments",
)
"""The query files (``auditor/languages/{language}-{name}.scm``) the index runs."""

_Match = tuple[int, dict[str, list[Node]]]  # (pattern index in the bundle, captures)


@cache
def _pattern_groups(language: str) -> tuple[int, ...]:
    """For each pattern of the language's query bundle, the index in ``QUERY_NAMES`` of
    the query it comes from."""
    bundle = query_bundle(language, QUERY_NAMES)
    if bundle is None:
        return ()
    return tuple(QUERY_NAMES.index(name) for name in bundle.pattern_names)


def _run_queries(language: str, root: Node) -> tuple[list[_Match], ...]:
    """Run every index query over the tree in one pass; matches grouped by query, in the
    order of ``QUERY_NAMES``."""
    grouped: tuple[list[_Match], ...] = tuple([] for _ in QUERY_NAMES)
    bundle = query_bundle(language, QUERY_NAMES)
    if bundle is None:
        return grouped
    groups = _pattern_groups(language)
    for match in QueryCursor(bundle.query).matches(root):
        grouped[groups[match[0]]].append(match)
    return grouped


# --------------------------------------------------------------------------- extraction
#
# Extraction builds records (the tuples ``_record_of`` makes of a FileIndex) directly:
# worker processes send them back as they are, and ``index_source`` builds its FileIndex
# from them.

_DefinitionRecord = tuple[
    str, str, str, int, int, int, tuple[str, ...], tuple[str, ...], str | None
]
_CallRecord = tuple[str, str, int, str | None, str]
_ContextBlockRecord = tuple[str, int, int, str | None]
_ImportRecord = tuple[str, str | None, str | None, int]

_by_line_and_qualname = itemgetter(3, 1)
_by_line_and_callee = itemgetter(2, 0)


@dataclass(slots=True)
class _DefinitionParts:
    """A definition while its attributes are being collected (mutable, internal)."""

    kind: str
    name: str
    node: Node
    end_byte: int
    body: Node | None
    receiver: str | None
    start_byte: int
    start_line: int
    decorators: dict[int, Node] | None = None  # by start byte
    bases: dict[int, Node] | None = None  # by start byte
    doc: Node | None = None

    def include(self, node: Node) -> None:
        """Widen the definition's start to cover ``node`` (a decorator or wrapper)."""
        if node.start_byte < self.start_byte:
            self.start_byte = node.start_byte
            self.start_line = _first_line(node)


def _body_start_line(body: Node | None, doc: Node | None, end_line: int) -> int:
    """First line after the signature (and docstring); ``end_line + 1`` if none is left."""
    if body is None:
        return end_line + 1
    opening = body.child(0) if body.child_count else None
    if opening is not None and opening.type == "{":
        signature_end = _first_line(opening)
    else:
        before = body.prev_sibling
        signature_end = (
            _last_line(before) if before is not None else _first_line(body) - 1
        )
    start = signature_end + 1
    if doc is not None:
        start = max(start, _last_line(doc) + 1)
    return start if start <= end_line else end_line + 1


@cache
def _definition_kinds(language: str) -> dict[str, str]:
    """The ``@definition.KIND`` capture names of the language's queries, mapped to KIND."""
    bundle = query_bundle(language, QUERY_NAMES)
    if bundle is None:
        return {}
    names = map(bundle.query.capture_name, range(bundle.query.capture_count))
    return {
        name: name.removeprefix("definition.")
        for name in names
        if name.startswith("definition.")
    }


def _collect_definition_parts(
    matches: list[_Match], text: _SourceText, kinds: dict[str, str]
) -> list[_DefinitionParts]:
    parts: dict[tuple[int, int], _DefinitionParts] = {}
    attributes: list[dict[str, list[Node]]] = []
    for _, captures in matches:
        if "owner" in captures:
            attributes.append(captures)
            continue
        for capture_name, nodes in captures.items():
            kind = kinds.get(capture_name)
            if kind is None:
                continue
            node = nodes[0]
            key = node.byte_range
            names = captures.get("name")
            if key in parts or not names:
                continue
            receivers = captures.get("receiver")
            bodies = captures.get("body")
            parts[key] = _DefinitionParts(
                kind=kind,
                name=text.span(*names[0].byte_range),
                node=node,
                end_byte=key[1],
                body=bodies[0] if bodies else None,
                receiver=text.span(*receivers[0].byte_range) if receivers else None,
                start_byte=key[0],
                start_line=node.start_point.row + 1,
            )
    for captures in attributes:
        definition = parts.get(captures["owner"][0].byte_range)
        if definition is None:
            continue
        decorators = captures.get("decorator")
        if decorators:
            if definition.decorators is None:
                definition.decorators = {}
            for decorator in decorators:
                definition.decorators[decorator.start_byte] = decorator
                definition.include(decorator)
        bases = captures.get("base")
        if bases:
            if definition.bases is None:
                definition.bases = {}
            for base in bases:
                definition.bases[base.start_byte] = base
        for outer in captures.get("outer", ()):
            definition.include(outer)
        for doc in captures.get("doc", ()):
            definition.doc = doc
    return sorted(parts.values(), key=lambda part: (part.start_byte, -part.end_byte))


def _normalised_texts(
    nodes: dict[int, Node] | None, text: _SourceText, prefix: str = ""
) -> tuple[str, ...]:
    """The normalised texts of ``nodes`` (keyed by start byte), ``prefix`` removed
    first, in source order."""
    if not nodes:
        return ()
    return tuple(
        [
            normalise_whitespace(
                text.span(start, nodes[start].end_byte).removeprefix(prefix)
            )
            for start in sorted(nodes)
        ]
    )


def _extract_definitions(
    matches: list[_Match], text: _SourceText, kinds: dict[str, str]
) -> tuple[list[_DefinitionRecord], list[tuple[int, int, str]]]:
    """Definition records with qualnames, plus byte spans of functions/methods for
    enclosure."""
    definitions: list[_DefinitionRecord] = []
    function_spans: list[tuple[int, int, str]] = []
    # (end byte, qualname, kind) of the definitions enclosing the current one, outermost first
    open_definitions: list[tuple[int, str, str]] = []
    for part in _collect_definition_parts(matches, text, kinds):
        node = part.node
        end_byte = part.end_byte
        while open_definitions and open_definitions[-1][0] <= part.start_byte:
            open_definitions.pop()
        enclosing = open_definitions[-1] if open_definitions else None
        if part.receiver is not None:
            parent: str | None = part.receiver
        else:
            parent = enclosing[1] if enclosing is not None else None
        kind = part.kind
        if kind == "function" and enclosing is not None and enclosing[2] == "class":
            kind = "method"
        name = part.name
        qualname = f"{parent}.{name}" if parent else name
        end_line = _last_line(node)
        definitions.append(
            (
                name,
                qualname,
                kind,
                part.start_line,
                end_line,
                _body_start_line(part.body, part.doc, end_line),
                _normalised_texts(part.decorators, text, "@"),
                _normalised_texts(part.bases, text),
                parent,
            )
        )
        open_definitions.append((end_byte, qualname, kind))
        if kind in FUNCTION_KINDS:
            function_spans.append((node.start_byte, end_byte, qualname))
    definitions.sort(key=_by_line_and_qualname)
    function_spans.sort(key=lambda span: (span[0], -span[1]))
    return definitions, function_spans


def _innermost_spans(
    spans: Sequence[tuple[int, int, str]], positions: Sequence[int]
) -> list[str | None]:
    """For each position (ascending), the name of the innermost span containing it.

    ``spans`` are properly nested (syntax-tree nodes), sorted by (start, -end).
    """
    names: list[str | None] = []
    stack: list[tuple[int, int, str]] = []
    next_span = 0
    for position in positions:
        while next_span < len(spans) and spans[next_span][0] <= position:
            span = spans[next_span]
            while stack and stack[-1][1] <= span[0]:
                stack.pop()
            stack.append(span)
            next_span += 1
        while stack and stack[-1][1] <= position:
            stack.pop()
        names.append(stack[-1][2] if stack else None)
    return names


def _extract_calls(
    matches: list[_Match],
    text: _SourceText,
    function_spans: Sequence[tuple[int, int, str]],
) -> list[_CallRecord]:
    # call span -> (line, callee start, callee end, argument list span)
    raw_calls: dict[tuple[int, int], tuple[int, int, int, tuple[int, int] | None]] = {}
    removed: list[tuple[int, int]] = []  # argument lists and @drop nodes
    for _, captures in matches:
        arguments = captures.get("args")
        arguments_span = arguments[0].byte_range if arguments else None
        if arguments_span is not None:
            removed.append(arguments_span)
        drops = captures.get("drop")
        if drops is not None:
            removed.extend([node.byte_range for node in drops])
        call = captures["call"][0]
        key = call.byte_range
        if key in raw_calls:
            continue
        callee_nodes = captures.get("callee")
        if callee_nodes is not None:
            callee_start, callee_end = callee_nodes[0].byte_range
        else:  # Java: from the object (if any) to the method name
            parts = [*captures.get("object", ()), *captures.get("name", ())]
            if not parts:
                continue
            callee_start, callee_end = parts[0].start_byte, parts[-1].end_byte
        raw_calls[key] = (
            call.start_point.row + 1,
            callee_start,
            callee_end,
            arguments_span,
        )
    removed_spans = sorted(set(removed))
    removed_starts = [start for start, _ in removed_spans]
    ordered = sorted(raw_calls.items())
    enclosing_names = _innermost_spans(
        function_spans, [start for (start, _), _ in ordered]
    )
    source, ascii_text = text.source, text.ascii
    calls: list[_CallRecord] = []
    # The common cases (ASCII text, no argument list inside the callee, a short argument
    # list) are inlined: this loop runs for every call in the repository.
    for (_, (line, callee_start, callee_end, arguments_span)), enclosing in zip(
        ordered, enclosing_names, strict=True
    ):
        inner = bisect_left(removed_starts, callee_start)
        if ascii_text is not None and (
            inner == len(removed_starts) or removed_starts[inner] >= callee_end
        ):
            callee = ascii_text[callee_start:callee_end]
        else:
            callee = text.without_spans(
                callee_start, callee_end, removed_spans, removed_starts
            )
        if " " in callee or not callee.isprintable():
            callee = _normalise_callee(callee)
        if len(callee) > TEXT_LIMIT:
            callee = callee[:TEXT_LIMIT]
        if arguments_span is None:
            arguments_text = ""
        else:
            start, end = arguments_span
            if source[start : start + 1] == b"(" and source[end - 1 : end] == b")":
                start, end = start + 1, end - 1
            if ascii_text is not None and end - start <= _SHORT_SPAN:
                arguments_text = normalise_whitespace(ascii_text[start:end])[
                    :TEXT_LIMIT
                ]
            else:
                arguments_text = text.bounded(start, end)
        calls.append(
            (callee, callee.rpartition(".")[2], line, enclosing, arguments_text)
        )
    # Stable: calls with the same line and callee stay in source order.
    calls.sort(key=_by_line_and_callee)
    return calls


def _extract_context_blocks(
    matches: list[_Match],
    text: _SourceText,
    function_spans: Sequence[tuple[int, int, str]],
) -> list[_ContextBlockRecord]:
    items: dict[int, tuple[int, Node, Node]] = {}
    for _, captures in matches:
        block, item = captures["block"][0], captures["item"][0]
        items.setdefault(item.start_byte, (block.start_byte, block, item))
    ordered = sorted(items.values(), key=lambda entry: (entry[0], entry[2].start_byte))
    enclosing_names = _innermost_spans(
        function_spans, [start for start, _, _ in ordered]
    )
    return [
        (
            text.bounded(item.start_byte, item.end_byte),
            _first_line(block),
            _last_line(block),
            enclosing,
        )
        for (_, block, item), enclosing in zip(ordered, enclosing_names, strict=True)
    ]


def _capture_text(
    captures: dict[str, list[Node]],
    settings: dict[str, str],
    name: str,
    text: _SourceText,
) -> str | None:
    if name in settings:
        return settings[name]
    nodes = captures.get(name)
    if not nodes:
        return None
    return _unquote(normalise_whitespace(text.span(*nodes[0].byte_range)))


def _extract_imports(
    matches: list[_Match], text: _SourceText, settings: Sequence[dict[str, str]]
) -> list[_ImportRecord]:
    imports: set[_ImportRecord] = set()
    for pattern, captures in matches:
        pattern_settings = settings[pattern]
        module = _capture_text(captures, pattern_settings, "module", text)
        if module is None:
            continue
        imports.add(
            (
                module,
                _capture_text(captures, pattern_settings, "name", text),
                _capture_text(captures, pattern_settings, "alias", text),
                _first_line(captures["import"][0]),
            )
        )
    return sorted(
        imports,
        key=lambda item: (item[3], item[0], item[1] or "", item[2] or ""),
    )


def _extract_main_block(matches: list[_Match]) -> tuple[int, int] | None:
    spans = [
        (_first_line(captures["main"][0]), _last_line(captures["main"][0]))
        for _, captures in matches
    ]
    return min(spans) if spans else None


def _extract_string_assignments(
    matches: list[_Match], text: _SourceText
) -> list[tuple[str, int]]:
    assignments: set[tuple[str, int]] = set()
    for _, captures in matches:
        value = captures["value"][0]
        if any(child.type == "interpolation" for child in value.children):
            continue  # an f-string is not a literal
        name = captures["name"][0]
        assignments.add((text.span(*name.byte_range), _first_line(name)))
    return sorted(assignments, key=lambda item: (item[1], item[0]))


def content_hash_of(text: str) -> str:
    """SHA-256 (hex) of the UTF-8 encoding of ``text``: the default content hash."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _source_record(
    text: str, language: str, content_hash: str | None = None
) -> _Record:
    """The record (see ``_record_of``) of the index of one file's text; as
    ``index_source``."""
    parser = parser_for(language)
    if parser is None:
        raise UnsupportedLanguageError(f"no grammar for language {language!r}")
    source_text = _SourceText(text)
    root = parser.parse(source_text.source).root_node
    definitions, calls, imports, contexts, main, assignments = _run_queries(
        language, root
    )
    definition_records, function_spans = _extract_definitions(
        definitions, source_text, _definition_kinds(language)
    )
    bundle = query_bundle(language, QUERY_NAMES)
    return (
        language,
        content_hash if content_hash is not None else content_hash_of(text),
        count_lines(text),
        tuple(definition_records),
        tuple(_extract_calls(calls, source_text, function_spans)),
        tuple(_extract_context_blocks(contexts, source_text, function_spans)),
        tuple(
            _extract_imports(
                imports, source_text, bundle.pattern_settings if bundle else ()
            )
        ),
        _extract_main_block(main),
        tuple(_extract_string_assignments(assignments, source_text)),
        root.has_error,
    )


def index_source(
    path: str, text: str, language: str, content_hash: str | None = None
) -> FileIndex:
    """Index one file's text.

    Never raises on bad source: a file with syntax errors gives ``has_errors=True`` and
    whatever tree-sitter's error recovery still exposes. Raises UnsupportedLanguageError
    for a language without a grammar.
    """
    return _file_index_from_record(_source_record(text, language, content_hash), path)


# --------------------------------------------------------------------------- cache

_SAFE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")

_ENTRY_MAGIC = b"auditor-index-entry\n"
_PACK_MAGIC = b"auditor-index-pack\n"

MAX_PACKS = 16
"""Most pack files one cache directory keeps; the least recently used are deleted first."""

MAX_ENTRIES = 200_000
"""Most entry files one cache directory keeps (~1-3 GB at most); when a pack is written whole
and there are more, the oldest are deleted down to 80% of this (their files sit in packs
too, so deleting one costs at most a parse)."""

# A pack's delta (entries added since it was written whole) and its entries no longer used
# may together reach this share of its size (at least PACK_DELTA_MIN) before a full rewrite.
PACK_DELTA_SHARE = 0.125
PACK_DELTA_MIN = 64

PARALLEL_PARSE_THRESHOLD = 300
"""Parsing is spread over worker processes when more files than this need parsing."""

MAX_PARSE_WORKERS = 4
"""Most worker processes used for parsing (fewer when fewer CPUs are available)."""

_CacheKey = tuple[str, str]  # (content hash, language)
_Record = tuple[Any, ...]
"""A FileIndex without its path, as nested tuples of its fields in declaration order (the
form stored on disk with marshal and sent back by parsing workers)."""

_definition_fields = attrgetter(*(item.name for item in fields(Definition)))
_call_fields = attrgetter(*(item.name for item in fields(CallSite)))
_context_block_fields = attrgetter(*(item.name for item in fields(ContextBlock)))
_import_fields = attrgetter(*(item.name for item in fields(Import)))


def _record_of(index: FileIndex) -> _Record:
    return (
        index.language,
        index.content_hash,
        index.line_count,
        tuple(map(_definition_fields, index.definitions)),
        tuple(map(_call_fields, index.calls)),
        tuple(map(_context_block_fields, index.context_blocks)),
        tuple(map(_import_fields, index.imports)),
        index.main_block,
        index.string_assignments,
        index.has_errors,
    )


def _builder(cls: type) -> Any:
    """A constructor equivalent to ``cls(*values)`` for a frozen, slotted dataclass, about
    three times faster.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; the
    builder is a mutable twin with the same slots (plain, fast attribute stores) whose
    instance is then re-labelled as ``cls``. Python allows that ``__class__`` assignment
    only between identical layouts and raises TypeError otherwise, so a twin that drifted
    from ``cls`` fails loudly rather than building a wrong object.
    """

    def relabel(self: Any) -> None:
        self.__class__ = cls

    return make_dataclass(
        f"_{cls.__name__}Builder",
        [(item.name, item.type) for item in fields(cls)],
        namespace={"__post_init__": relabel},
        slots=True,
        eq=False,
        repr=False,
    )


# Decoding a cached scan builds hundreds of thousands of these, so they are built this way.
_build_definition = _builder(Definition)
_build_call = _builder(CallSite)
_build_context_block = _builder(ContextBlock)
_build_import = _builder(Import)
_build_file_index = _builder(FileIndex)


def _file_index_from_record(record: _Record, path: str) -> FileIndex:
    """Rebuild a FileIndex from its record; raises TypeError/ValueError if malformed."""
    (
        language,
        content_hash,
        line_count,
        definitions,
        calls,
        context_blocks,
        imports,
        main_block,
        string_assignments,
        has_errors,
    ) = record
    return _build_file_index(  # type: ignore[no-any-return]
        path,
        language,
        content_hash,
        line_count,
        tuple(starmap(_build_definition, definitions)),
        tuple(starmap(_build_call, calls)),
        tuple(starmap(_build_context_block, context_blocks)),
        tuple(starmap(_build_import, imports)),
        main_block,
        string_assignments,
        has_errors,
    )


def _shared_strings(record: _Record, shared: dict[str, str]) -> _Record:
    """``record`` with equal strings replaced by one object (the first met, kept in
    ``shared``), so that marshal stores each distinct string once and loading it creates
    one object per distinct string. The record's value is unchanged."""
    intern = shared.setdefault

    def optional(text: str | None) -> str | None:
        return None if text is None else intern(text, text)

    (
        language,
        content_hash,
        line_count,
        definitions,
        calls,
        context_blocks,
        imports,
        main_block,
        string_assignments,
        has_errors,
    ) = record
    return (
        intern(language, language),
        content_hash,
        line_count,
        tuple(
            [
                (
                    intern(name, name),
                    intern(qualname, qualname),
                    intern(kind, kind),
                    start_line,
                    end_line,
                    body_start_line,
                    tuple([intern(text, text) for text in decorators]),
                    tuple([intern(text, text) for text in bases]),
                    optional(parent),
                )
                for (
                    name,
                    qualname,
                    kind,
                    start_line,
                    end_line,
                    body_start_line,
                    decorators,
                    bases,
                    parent,
                ) in definitions
            ]
        ),
        tuple(
            [
                (
                    intern(callee, callee),
                    intern(name, name),
                    line,
                    optional(enclosing),
                    intern(arguments, arguments),
                )
                for callee, name, line, enclosing, arguments in calls
            ]
        ),
        tuple(
            [
                (
                    intern(expression, expression),
                    start_line,
                    end_line,
                    optional(enclosing),
                )
                for expression, start_line, end_line, enclosing in context_blocks
            ]
        ),
        tuple(
            [
                (intern(module, module), optional(name), optional(alias), line)
                for module, name, alias, line in imports
            ]
        ),
        main_block,
        tuple([(intern(name, name), line) for name, line in string_assignments]),
        has_errors,
    )


def _record_matches(record: object, key: _CacheKey) -> bool:
    return (
        isinstance(record, tuple)
        and len(record) > 2
        and record[1] == key[0]
        and record[0] == key[1]
    )


@dataclass(frozen=True)
class StoredPack:
    """What a scan's pack held when read: every key, the keys from its delta file, and the
    size of the pack file proper (0: no pack yet)."""

    keys: frozenset[_CacheKey]
    delta_keys: frozenset[_CacheKey]
    base_size: int


class IndexCache:
    """On-disk cache of FileIndex entries keyed by content hash and language.

    Everything lives under ``directory / f"v{INDEX_VERSION}"``: one entry file per content
    and language, and in ``packs/`` one pack file per scan name holding every entry that
    scan used last time, so that repeating a scan reads one file instead of thousands
    (plus a small delta file with entries added since the pack was last written whole).
    Files are marshalled tuples behind a magic header and a checksum, written atomically;
    an unreadable, corrupt or mismatched entry or pack counts as a miss (and is replaced by
    the next write). Failing to write is logged and otherwise ignored: the cache only saves
    time.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"v{INDEX_VERSION}"
        self._entries_unwritable = False  # after one failed entry write, stop trying (and warning)

    def entry_path(self, content_hash: str, language: str) -> Path:
        """Where the entry for this content and language is stored."""
        key = f"{content_hash}-{language}"
        if not _SAFE_KEY.fullmatch(key):
            key = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / key[:2] / f"{key}.index"

    def pack_path(self, name: str) -> Path:
        """Where the pack file of the scan called ``name`` is stored."""
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / "packs" / f"{digest[:32]}.pack"

    def get(self, content_hash: str, language: str, path: str) -> FileIndex | None:
        """The cached index for this content, re-pointed at ``path``; None on a miss."""
        key = (content_hash, language)
        return _decode_or_none(self._get_record(key, path), key, path)

    def put(self, index: FileIndex) -> None:
        """Store ``index`` (replacing any entry for the same content and language)."""
        self._put_record(_record_of(index))

    def _get_record(self, key: _CacheKey, path: str) -> object:
        """The stored record for ``key`` (not yet checked), or None."""
        try:
            return unseal(_ENTRY_MAGIC, self.entry_path(*key).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug(
                "ignoring unreadable index cache entry for %s: %s", path, error
            )
            return None

    def _put_record(self, record: _Record) -> None:
        if self._entries_unwritable:
            return
        target = self.entry_path(record[1], record[0])
        if not write_atomically(target, seal(_ENTRY_MAGIC, record)):
            self._entries_unwritable = True

    def delta_path(self, name: str) -> Path:
        """Where the records added to the pack of ``name`` since it was last written whole are kept."""
        return self.pack_path(name).with_suffix(".delta")

    def _read_sealed_dict(self, target: Path) -> dict[_CacheKey, _Record]:
        try:
            records = unseal(_PACK_MAGIC, target.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable index pack %s: %s", target, error)
            return {}
        if not isinstance(records, dict):
            logger.debug("ignoring malformed index pack %s", target)
            return {}
        return records

    def _read_pack(self, name: str) -> tuple[dict[_CacheKey, _Record], StoredPack]:
        """The records of a scan's pack and its delta (empty when missing or unreadable),
        and what was stored where; marks the pack used.

        Records are keyed by content, so any pack and any delta combine correctly, even
        when written by different processes."""
        target = self.pack_path(name)
        records = self._read_sealed_dict(target)
        base_size = len(records)
        delta = self._read_sealed_dict(self.delta_path(name))
        records.update(delta)
        if base_size:
            try:
                os.utime(target)  # pruning keeps the most recently used packs
            except OSError:
                pass
        return records, StoredPack(frozenset(records), frozenset(delta), base_size)

    def _write_delta(self, name: str, records: Mapping[_CacheKey, _Record]) -> None:
        """Replace the delta of a scan's pack by ``records`` (the pack itself is kept)."""
        write_atomically(self.delta_path(name), seal(_PACK_MAGIC, dict(sorted(records.items()))))

    def _write_pack(self, name: str, records: Mapping[_CacheKey, _Record]) -> None:
        """Replace a scan's pack by ``records``, then delete packs beyond ``MAX_PACKS``."""
        target = self.pack_path(name)
        shared: dict[str, str] = {}
        ordered = {
            (key[0], shared.setdefault(key[1], key[1])): _shared_strings(
                records[key], shared
            )
            for key in sorted(records)
        }
        if not write_atomically(target, seal(_PACK_MAGIC, ordered)):
            return
        self.delta_path(name).unlink(missing_ok=True)
        prune_least_recent(
            target.parent, "*.pack", MAX_PACKS, spare=target, companions=lambda pack: (pack.with_suffix(".delta"),)
        )
        self._prune_entries()

    def _prune_entries(self) -> None:
        """Delete the oldest entry files when there are more than ``MAX_ENTRIES``."""
        entries: list[os.DirEntry[str]] = []
        try:
            shards = [shard for shard in os.scandir(self.directory) if shard.is_dir() and len(shard.name) == 2]
            for shard in shards:
                entries.extend(entry for entry in os.scandir(shard.path) if entry.name.endswith(".index"))
        except OSError as error:
            logger.debug("cannot list index cache entries: %s", error)
            return
        if len(entries) <= MAX_ENTRIES:
            return
        aged: list[tuple[float, str]] = []
        for entry in entries:
            try:
                aged.append((entry.stat().st_mtime, entry.path))
            except OSError:
                continue  # removed meanwhile by another process
        aged.sort()
        for _, path in aged[: len(aged) - MAX_ENTRIES * 4 // 5]:
            Path(path).unlink(missing_ok=True)


def default_cache_dir() -> Path:
    """``$AUDITOR_CACHE_DIR/index``, else ``$XDG_CACHE_HOME/auditor/index``, else
    ``~/.cache/auditor/index``."""
    configured = os.environ.get("AUDITOR_CACHE_DIR")
    if configured:
        return Path(configured) / "index"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "auditor" / "index"


def scan_pack_name(paths: Iterable[str]) -> str:
    """The default pack name of a scan of ``paths``: the set of their directories cut to
    two levels, so that a scan of the same tree finds its pack again after files inside it
    are added, removed or edited (a pack is checked entry by entry, so sharing a name with
    another tree only costs time)."""
    directories = {"/".join(path.split("/")[:-1][:2]) for path in paths}
    return "\n".join(sorted(directories))


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _index_chunk(sources: list[tuple[str, str, str]]) -> bytes:
    """Worker-process entry point: the records of ``(text, language, content_hash)``
    sources, marshalled (module level, so that a spawned process can import it).

    Marshal rather than the pool's pickle: records are plain tuples, which marshal writes
    about four times faster. The collector is paused: records hold no cycles."""
    with collection_paused():
        return marshal.dumps([_source_record(*source) for source in sources])


def _parse_records(
    sources: list[tuple[str, str, str, str]],
) -> Iterator[tuple[FileIndex, _Record]]:
    """Index each source, yielding results in the order of ``sources``.

    More than ``PARALLEL_PARSE_THRESHOLD`` sources are parsed by a pool of spawned worker
    processes; if the pool cannot run here, the rest is parsed in this process.
    """
    workers = min(MAX_PARSE_WORKERS, _available_cpus())
    done = 0
    if (
        len(sources) > PARALLEL_PARSE_THRESHOLD
        and workers > 1
        and not multiprocessing.current_process().daemon  # daemons cannot have children
    ):
        size = max(8, -(-len(sources) // (workers * 16)))
        starts = range(0, len(sources), size)
        # Workers need no paths: they only get each source's text, language and hash.
        chunks = [
            [source[1:] for source in sources[start : start + size]] for start in starts
        ]
        try:
            with ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn")
            ) as executor:
                for start, payload in zip(starts, executor.map(_index_chunk, chunks)):
                    # The collector would re-scan every index decoded so far, over and
                    # over; it is paused while decoding (never across a yield).
                    with collection_paused():
                        records = marshal.loads(payload)
                        indexes = [
                            _file_index_from_record(record, source[0])
                            for source, record in zip(
                                sources[start : start + size], records, strict=True
                            )
                        ]
                    for index, record in zip(indexes, records):
                        yield index, record
                        done += 1
        except (OSError, BrokenProcessPool, pickle.PicklingError) as error:
            logger.warning(
                "parallel parsing failed, parsing in this process: %s", error
            )
    for path, text, language, content_hash in sources[done:]:
        index = index_source(path, text, language, content_hash)
        yield index, _record_of(index)


def _update_pack(
    cache: IndexCache,
    name: str,
    found: Mapping[_CacheKey, FileIndex],
    added: Mapping[_CacheKey, _Record],
    stored: StoredPack,
    unused: int,
) -> None:
    """Make the pack of ``name`` hold every entry in ``found`` (the entries this call used).

    Entries the pack lacked go to its small delta file, so an edit does not rewrite the
    whole pack (~0.5 s on a 4,000-file repository). The pack is rewritten whole, and the
    delta dropped, when there is no pack yet or when the delta plus the entries no longer
    used (old versions of edited files, deleted files) pass ``PACK_DELTA_SHARE`` of it.
    """
    missing = [key for key in found if key not in stored.keys]
    if not missing and unused == 0:
        return  # the pack already holds exactly what was used
    delta = {key: added[key] if key in added else _record_of(found[key]) for key in missing}
    for key in stored.delta_keys:
        if key in found:
            delta[key] = _record_of(found[key])
    limit = max(PACK_DELTA_MIN, int(len(found) * PACK_DELTA_SHARE))
    if stored.base_size and len(delta) + unused <= limit:
        if missing:
            cache._write_delta(name, delta)
        return
    cache._write_pack(name, {key: added[key] if key in added else _record_of(index) for key, index in found.items()})


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (restoring its previous state).

    For code that allocates hundreds of thousands of objects it keeps, such as decoding
    indexes or building the call graph: collections there would only re-scan live objects.
    On leaving the block, every object the collector tracks is moved to its oldest
    generation (``gc.freeze`` then ``gc.unfreeze``), so that the next young collection does
    not scan them all either; they stay collectable, by the next full collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def _decode_or_none(record: object, key: _CacheKey, path: str) -> FileIndex | None:
    """The FileIndex of a cached record for ``key``; None if absent, mismatched or malformed."""
    if record is None or not _record_matches(record, key):
        return None
    try:
        return _file_index_from_record(record, path)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        logger.debug("ignoring malformed index cache record for %s: %s", path, error)
        return None


def index_files(
    sources: Iterable[tuple[str, str, str, str]],
    cache: IndexCache | None = None,
    progress: ProgressCallback = no_progress,
    *,
    pack_name: str | None = None,
) -> dict[str, FileIndex]:
    """Index ``(path, text, language, content_hash)`` sources; returns path -> FileIndex.

    Only cache misses are parsed (by worker processes when there are many), and identical
    content (same hash and language) is parsed once. With a cache, entries are looked up in
    the pack ``pack_name`` (default: ``scan_pack_name`` of the paths), then in the entry
    files; afterwards the pack holds exactly the entries this call used. The result is
    ordered by path and does not depend on where entries came from. Emits
    ProgressEvent(stage="index") per file.
    """
    pending = sorted(sources, key=lambda source: source[0])
    total = len(pending)
    if cache is not None and pack_name is None:
        pack_name = scan_pack_name(source[0] for source in pending)
    found: dict[_CacheKey, FileIndex] = {}
    misses: dict[_CacheKey, list[tuple[str, str, str, str]]] = {}
    damaged: set[_CacheKey] = set()
    completed = 0
    with collection_paused():
        pack, stored = (
            cache._read_pack(pack_name)
            if cache is not None and pack_name is not None
            else ({}, StoredPack(frozenset(), frozenset(), 0))
        )
        for source in pending:
            path, _, language, content_hash = source
            key = (content_hash, language)
            if key in misses:
                misses[key].append(source)
                continue
            if key not in found:
                # Popping lets each record be freed once decoded, and leaves in the pack
                # only the entries this scan did not use.
                record = pack.pop(key, None)
                index = _decode_or_none(record, key, path)
                if index is None and record is not None:
                    damaged.add(key)  # stored but unusable: the pack must be repaired
                if index is None and cache is not None:
                    index = _decode_or_none(cache._get_record(key, path), key, path)
                if index is None:
                    misses[key] = [source]
                    continue
                found[key] = index
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
    added: dict[_CacheKey, _Record] = {}
    for index, record in _parse_records([group[0] for group in misses.values()]):
        key = (index.content_hash, index.language)
        found[key] = index
        added[key] = record
        if cache is not None:
            cache._put_record(record)
        for _ in misses[key]:
            completed += 1
            progress(ProgressEvent(stage="index", completed=completed, total=total))
    if cache is not None and pack_name is not None:
        if damaged:  # counted as missing, so that their records are written again
            stored = replace(stored, keys=stored.keys - damaged)
        _update_pack(cache, pack_name, found, added, stored, unused=len(pack))
    results: dict[str, FileIndex] = {}
    for path, _, language, content_hash in pending:
        index = found[(content_hash, language)]
        results[path] = index if index.path == path else replace(index, path=path)
    return results
