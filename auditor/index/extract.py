"""Extraction: one source file's text parsed into its ``FileIndex``.

Input: a file's path, text and language (and optionally its content hash and a parse
budget in seconds). Output: ``index_source``'s ``FileIndex`` (definitions with qualified
names and spans, call sites with callee chains and their enclosing function,
``with``/try-with-resources blocks, imports, the ``__main__`` block and module-level string
assignments), or, for the cache and the worker processes, the same as a plain record
(``_source_record``). Caching is ``auditor.index.cache``'s; parsing many files in worker
processes, ``auditor.index.indexer``'s.

Extraction is driven by the tree-sitter query files in ``auditor/languages`` (see
``auditor.languages.grammars`` for the capture conventions). Two facts are code, not
queries: Java's overloaded methods get distinct qualnames (``Class.name~2``), and a Go
``func`` literal that runs on its own (a goroutine, a scheduled callback, an HTTP handler
literal) becomes a definition of its own.

Line numbers are 1-based and count ``"\n"``-terminated lines, as tree-sitter does: a form
feed or other Unicode line separator does not start a new line (use ``text.split("\n")``,
not ``str.splitlines``, to map them back to text).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from operator import itemgetter

from tree_sitter import Node, QueryCursor

from auditor.index.cache import _file_index_from_record, _Record
from auditor.index.model import (
    _AROUND_MEMBER_ACCESS,
    _QUOTES,
    FUNCTION_KINDS,
    TEXT_LIMIT,
    FileIndex,
    content_hash_of,
    count_lines,
    normalise_whitespace,
)
from auditor.languages.grammars import (
    UnsupportedLanguageError,
    parser_for,
    query_bundle,
)


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

    __slots__ = ("ascii", "source", "_resumable")

    def __init__(self, text: str) -> None:
        self.source = text.encode("utf-8", "surrogatepass")
        self.ascii = text if text.isascii() else None
        # start -> (end, next span index, cursor, bytes kept) of a without_spans text
        self._resumable: dict[int, tuple[int, int, int, bytearray]] = {}

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
        inside it removed, cut once more than ``_SHORT_SPAN`` bytes are kept (callees
        are cut to ``TEXT_LIMIT`` characters)."""
        index = bisect_left(span_starts, start)
        if index == len(spans) or span_starts[index] >= end:
            return self.span(start, end)  # the common case: nothing inside to remove
        # Linear in the file, not in the square of a call chain's length: the callees of
        # `a.b().b()…` all start at `a` and each extends the one before, so the text kept
        # for a start is resumed rather than rebuilt; spans nested in a removed one are
        # jumped over, and the text stops growing past what any callee keeps.
        resumable = self._resumable.get(start)
        if resumable is not None and resumable[0] <= end:
            _, index, cursor, stored = resumable
            kept = bytearray(stored)  # the stored state stays valid for its own range
        else:
            cursor, kept = start, bytearray()
        source = self.source
        straddled = False
        while index < len(spans) and spans[index][0] < end and len(kept) <= _SHORT_SPAN:
            span_start, span_end = spans[index]
            if span_start >= cursor and span_end <= end:
                kept += source[cursor : min(span_start, cursor + _SHORT_SPAN + 1 - len(kept))]
                cursor = span_end
                index = bisect_left(span_starts, span_end, index + 1)
                continue
            straddled = straddled or span_start >= cursor  # a longer range would remove it
            index += 1
        if not straddled:
            self._resumable[start] = (end, index, cursor, kept)
        tail = source[cursor : min(end, cursor + _SHORT_SPAN + 1 - len(kept))] if len(kept) <= _SHORT_SPAN else b""
        return (bytes(kept) + tail).decode("utf-8", "replace")


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


MAX_QUERY_DEPTH = 60_000
"""Deepest syntax-tree level a query match may start at. tree-sitter's query cursor keeps
depths in 16 bits: past 65,535 levels (a chain of 33,000 calls) it slows to minutes, so
matches nested deeper than this are not indexed."""


class ParseBudgetExceeded(Exception):
    """Indexing one file took longer than its budget (the message says how long)."""


def _run_queries(
    language: str, root: Node, deadline: float | None = None
) -> tuple[list[_Match], ...]:
    """Run every index query over the tree in one pass; matches grouped by query, in the
    order of ``QUERY_NAMES``. Raises ParseBudgetExceeded once ``time.monotonic()`` passes
    ``deadline`` by the time they return."""
    grouped: tuple[list[_Match], ...] = tuple([] for _ in QUERY_NAMES)
    bundle = query_bundle(language, QUERY_NAMES)
    if bundle is None:
        return grouped
    groups = _pattern_groups(language)
    matches = QueryCursor(bundle.query)
    matches.set_max_start_depth(MAX_QUERY_DEPTH)
    found = matches.matches(root)
    if deadline is not None and time.monotonic() > deadline:
        # tree-sitter 0.26's progress callback crashes on query bundles with predicates,
        # so the budget is checked when the queries return rather than while they run.
        raise ParseBudgetExceeded("the index queries ran past the file's parse budget")
    for match in found:
        grouped[groups[match[0]]].append(match)
    return grouped


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


_OVERLOADING_LANGUAGES = frozenset({"java"})
"""Languages where one class may define several methods of one name (by signature)."""


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
        if "owner" in captures or "outer" in captures:
            attributes.append(captures)
            continue
        for capture_name, nodes in captures.items():
            kind = kinds.get(capture_name)
            if kind is None:
                continue
            node = nodes[0]
            key = node.byte_range
            names = captures.get("name")
            if kind == "closure" and _runs_on_its_own(node):
                names = [node]  # named below, from its enclosing function (``outer.func1``)
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
    # A wrapper (@outer) captured with its definition (@owner) stands for that definition
    # in patterns that capture attributes of the wrapper only.
    wrapped = {
        captures["outer"][0].byte_range: captures["owner"][0].byte_range
        for captures in attributes
        if "owner" in captures and "outer" in captures
    }
    for captures in attributes:
        if "owner" in captures:
            owner = captures["owner"][0].byte_range
        else:
            owner = wrapped.get(captures["outer"][0].byte_range, (-1, -1))
        definition = parts.get(owner)
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
                text.span(start, _end_before_comments(nodes[start])).removeprefix(prefix)
            )
            for start in sorted(nodes)
        ]
    )


def _end_before_comments(node: Node) -> int:
    """Where ``node``'s text ends, less the comments tree-sitter counts as its last children
    (a Python ``decorator`` holds the comment after it: ``@transaction.atomic  # paranoia``)."""
    end = node.end_byte
    for child in reversed(node.children):
        if child.type != "comment":
            return child.end_byte if child.end_byte < end else end
    return end


# The parameter an HTTP handler literal takes (net/http, echo, gin, fiber): it runs per
# request, never where it is written.
_GO_HANDLER_PARAMETERS = (b"http.ResponseWriter", b"echo.Context", b"gin.Context", b"fiber.Ctx")
_GO_SCHEDULERS = frozenset({b"AddFunc", b"AddJob", b"AfterFunc", b"Schedule", b"Go"})


def _runs_on_its_own(literal: Node) -> bool:
    """Whether a Go ``func`` literal runs apart from the code around it: a goroutine
    (``go func() {...}()``), a literal without parameters handed to a scheduler (a cron job,
    ``time.AfterFunc``, errgroup ``Go``), or an HTTP handler literal handed to a call or returned (a
    middleware's ``http.HandlerFunc(func(w, r) {...})``). Another callback with parameters (a transaction's ``func(tx *sql.Tx)``,
    a comparator) runs inside the call and stays part of its function. The call of a
    goroutine started by name (``go worker(queue)``) runs on its own too (its argument
    calls, evaluated before it starts, go with it: an approximation)."""
    parent = literal.parent
    if literal.type == "call_expression":
        return parent is not None and parent.type == "go_statement"
    if parent is not None and parent.type == "call_expression":
        return parent.parent is not None and parent.parent.type == "go_statement"
    parameters = literal.child_by_field_name("parameters")
    if parameters is None:
        return False
    text = parameters.text or b""
    if any(name in text for name in _GO_HANDLER_PARAMETERS):
        return True
    return parameters.named_child_count == 0 and _scheduled(literal)


def _scheduled(literal: Node) -> bool:
    """Whether a parameterless literal is handed to a scheduler (``cron.AddFunc``,
    ``time.AfterFunc``, errgroup ``g.Go``) rather than run by the call (``backoff.Retry``,
    ``once.Do``)."""
    arguments = literal.parent
    call = arguments.parent if arguments is not None and arguments.type == "argument_list" else None
    function = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
    name = (function.text or b"").rsplit(b".", 1)[-1] if function is not None else b""
    return name in _GO_SCHEDULERS


def _extract_definitions(
    matches: list[_Match],
    text: _SourceText,
    kinds: dict[str, str],
    overloads: bool = False,
) -> tuple[list[_DefinitionRecord], list[tuple[int, int, str]]]:
    """Definition records with qualnames, plus byte spans of functions/methods for
    enclosure. With ``overloads`` (Java), the second and later methods of one name in a
    class get the qualname ``Class.name~2``, ``~3``...: their bodies stay apart (their
    ``name`` is unchanged, so a call by name finds the first)."""
    seen_methods: dict[str, int] = {}
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
        if kind == "closure":
            if parent is None:
                continue  # a literal outside any function (a package-level var) runs when called
            kind = "function"
            seen_methods[f"{parent}.<closure>"] = number = seen_methods.get(f"{parent}.<closure>", 0) + 1
            name = f"func{number}"
        qualname = f"{parent}.{name}" if parent else name
        if overloads and kind in FUNCTION_KINDS:
            seen_methods[qualname] = seen_methods.get(qualname, 0) + 1
            if seen_methods[qualname] > 1:
                qualname = f"{qualname}~{seen_methods[qualname]}"
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
        if arguments:
            arguments_span: tuple[int, int] | None = arguments[0].byte_range
        else:
            # A pattern may leave the argument list to the call's `arguments` field:
            # capturing it in the query costs time quadratic in a call chain's length.
            field = captures["call"][0].child_by_field_name("arguments")
            arguments_span = field.byte_range if field is not None else None
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
            # Bounded: a callee is cut to TEXT_LIMIT characters below anyway.
            callee = ascii_text[callee_start : min(callee_end, callee_start + _SHORT_SPAN)]
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


def _source_record(
    text: str,
    language: str,
    content_hash: str | None = None,
    budget_seconds: float | None = None,
) -> _Record:
    """The record (see ``_record_of``) of the index of one file's text; as
    ``index_source``. Raises ParseBudgetExceeded when ``budget_seconds`` run out first."""
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    parser = parser_for(language)
    if parser is None:
        raise UnsupportedLanguageError(f"no grammar for language {language!r}")
    source_text = _SourceText(text)
    root = parser.parse(source_text.source).root_node
    definitions, calls, imports, contexts, main, assignments = _run_queries(
        language, root, deadline
    )
    definition_records, function_spans = _extract_definitions(
        definitions, source_text, _definition_kinds(language), overloads=language in _OVERLOADING_LANGUAGES
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
    path: str,
    text: str,
    language: str,
    content_hash: str | None = None,
    budget_seconds: float | None = None,
) -> FileIndex:
    """Index one file's text.

    Never raises on bad source: a file with syntax errors gives ``has_errors=True`` and
    whatever tree-sitter's error recovery still exposes. Raises UnsupportedLanguageError
    for a language without a grammar, ParseBudgetExceeded when ``budget_seconds`` run out.
    """
    return _file_index_from_record(
        _source_record(text, language, content_hash, budget_seconds), path
    )
