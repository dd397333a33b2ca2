"""Work the static tx-outside-transaction pass must not repeat or do at all (issue 13's
static-pass benchmark), and the fast text helpers it uses in place of character walks."""

from __future__ import annotations

import random
import textwrap
from collections import Counter

import pytest

from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions import TxOptions, analyze_tx_outside_transaction
from auditor.analysis.transactions.scanning import closing_bracket
from auditor.analysis.transactions.sequences import Sequences
from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.index.extract import index_source
from auditor.languages import language_for_path
from auditor.rules.loader import Rule, load_rule

WRAPPERS = {
    "core/tracing.py": """
        from contextlib import contextmanager
        from django.db import transaction

        @contextmanager
        def traced_atomic():
            with transaction.atomic():
                yield
        """,
    "core/transactions.py": """
        from contextlib import contextmanager
        from .tracing import traced_atomic

        @contextmanager
        def commit_on_errors():
            with traced_atomic():
                yield

        @contextmanager
        def timed():
            yield
        """,
    "shop/tasks.py": """
        from celery import shared_task
        from core.transactions import commit_on_errors, timed

        def describe(order):
            return str(order)

        def label(order):
            return describe(order).upper()

        def store(order):
            order.save()

        @shared_task
        def close(order):
            with commit_on_errors():
                order.save()

        @shared_task
        def measure(order):
            with timed():
                order.save()

        @shared_task
        def rename(order):
            label(order)
            store(order)
            store(order)
        """,
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _prepared(files: dict[str, str]) -> tuple[dict, dict[str, str], CallGraph]:
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {path: index_source(path, text, language_for_path(path) or "") for path, text in texts.items()}
    return indexes, texts, CallGraph.build(indexes)


def test_wrapper_names_are_resolved_once_across_widening_rounds(rule: Rule, monkeypatch: pytest.MonkeyPatch):
    indexes, texts, graph = _prepared(WRAPPERS)
    resolved: Counter[tuple[str, str]] = Counter()
    resolve = graph.resolve

    def counting(path: str, name: str) -> FunctionRef | None:
        resolved[(path, name)] += 1
        return resolve(path, name)

    monkeypatch.setattr(graph, "resolve", counting)
    result = analyze_tx_outside_transaction(indexes, texts, rule, graph, options=TxOptions(min_severity="low"))
    # A boundary found on one widening round starts another, which asks about ``timed``
    # (no boundary) again.
    assert {finding.function for finding in result.findings} == {"measure", "rename"}
    assert resolved[("shop/tasks.py", "timed")] == 1
    assert max(resolved.values()) == 1


def test_functions_with_no_effect_below_them_are_not_walked(rule: Rule, monkeypatch: pytest.MonkeyPatch):
    indexes, texts, graph = _prepared(WRAPPERS)
    walked: list[FunctionRef] = []
    compute_path = Sequences._compute_path

    def recording(self: Sequences, ref: FunctionRef, off: frozenset[str], depth: int, receiver: FunctionRef | None, bound: frozenset = frozenset()) -> tuple:
        walked.append(ref)
        return compute_path(self, ref, off, depth, receiver, bound)

    monkeypatch.setattr(Sequences, "_compute_path", recording)
    result = analyze_tx_outside_transaction(indexes, texts, rule, graph, options=TxOptions(min_severity="low"))
    assert {finding.function for finding in result.findings} == {"measure", "rename"}
    names = {ref.qualname for ref in walked}
    assert {"rename", "store"} <= names
    assert not names & {"label", "describe"}


def _closing_paren_by_character(text: str, position: int) -> int | None:
    """The character walk ``closing_bracket`` replaces (the reference it must agree with)."""
    depth = 0
    quote: str | None = None
    index = position
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None


def _split_arguments_by_character(arguments: str) -> list[str]:
    """The character walk ``split_arguments`` replaces (the reference it must agree with)."""
    parts: list[str] = []
    depth = 0
    quote = ""
    current: list[str] = []
    escaped = False
    for char in arguments:
        if quote:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return parts


def _random_texts(count: int) -> list[str]:
    generator = random.Random(13)
    alphabet = "ab ,=()[]{}'\"`\\x1_*:"
    return ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 30))) for _ in range(count)]


@pytest.mark.parametrize(
    "text",
    ["", "a", "a, b", "a,", ",a", "a,,b", " a , b ", "f(a, b), c", "'a,b', c", '"a\\",b", c', "`a,b`, c",
     "x=[1, 2], y={'k': (3, 4)}", "a), b, c", "'unterminated, x", "a\\, b"],
)  # fmt: skip
def test_argument_split_matches_the_character_walk(text: str):
    assert split_arguments(text) == _split_arguments_by_character(text)


def test_argument_split_and_closing_paren_match_on_random_text():
    for text in _random_texts(20000):
        assert split_arguments(text) == _split_arguments_by_character(text), text
        for position in range(len(text) + 1):
            assert closing_bracket(text, position) == _closing_paren_by_character(text, position), (text, position)


def _closing_line_by_character(lines: list[str], line: int, column: int, comment: str | None) -> int:
    """The line-by-line walk a boundary call's extent was read with (the reference the
    multi-line ``closing_bracket`` must agree with): strings other than backtick templates
    end with their line, and ``comment`` starts a comment to the line's end."""
    depth = 0
    quote = ""
    for number in range(line, len(lines) + 1):
        text = lines[number - 1]
        index = column if number == line else 0
        while index < len(text):
            char = text[index]
            if quote:
                if char == "\\":
                    index += 1
                elif char == quote:
                    quote = ""
            elif char in "\"'`":
                quote = char
            elif char == comment:
                break
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
                if depth == 0:
                    return number
            index += 1
        if quote != "`":
            quote = ""
    return line


@pytest.mark.parametrize("comment", ["#", None])
def test_multiline_closing_bracket_matches_the_line_walk(comment: str | None):
    generator = random.Random(21)
    alphabet = "ab ()[]{}'\"`\\#\n"
    for _ in range(3000):
        text = "(" + "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 40)))
        lines = text.split("\n")
        end = closing_bracket(text, 0, quotes="\"'`", line_comment=comment, strings_end_at_newline=True)
        found = 1 if end is None else 1 + text.count("\n", 0, end)
        assert found == _closing_line_by_character(lines, 1, 0, comment), text
