"""Tree-sitter grammars and query files for the languages auditor indexes.

Each language maps to an installed grammar package (``tree-sitter-python`` and friends; never
a package that downloads grammars at run time). Queries are package data next to this module,
named ``{language}-{name}.scm`` and loaded with importlib.resources, so teaching the index a
new construct means editing a query file, not Python branches.

A query file whose first line is ``; inherits: other`` starts with the text of
``other-{name}.scm`` (TSX reuses the TypeScript queries this way).

Capture conventions the index relies on (see ``auditor/index.py``):

* ``definitions``: ``@definition.function|method|class`` (the definition node), ``@name``,
  ``@body``, ``@receiver`` (Go); attribute patterns capture ``@owner`` (a definition node)
  with one of ``@decorator``, ``@base``, ``@outer`` (a wrapper whose span includes
  decorators) or ``@doc`` (a docstring).
* ``calls``: ``@call``, the callee as ``@callee`` or ``@object``/``@name``, and ``@args``.
* ``imports``: ``@import``, ``@module``, optional ``@name`` and ``@alias``; a pattern setting
  ``(#set! name "...")`` supplies a fixed imported name (JS default imports).
* ``contexts``: ``@block`` and ``@item`` (Python ``with`` items, Java resources).
* ``main`` (``@main``) and ``assignments`` (``@name``, ``@value``): Python module level.

Captures whose names start with ``_`` only serve predicates.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import tree_sitter

from auditor.errors import AuditorError

# Language name -> (grammar module, function returning the language pointer).
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "java": ("tree_sitter_java", "language"),
}

_INHERITS = "; inherits:"


class UnsupportedLanguageError(AuditorError):
    """A language was asked for that auditor has no tree-sitter grammar for."""


class QueryFileError(AuditorError):
    """A packaged query file is malformed (a bug in auditor, not in the audited code)."""


@cache
def language_for(language: str) -> tree_sitter.Language | None:
    """Return the tree-sitter Language for a language name, or None if unsupported."""
    grammar = GRAMMARS.get(language)
    if grammar is None:
        return None
    module_name, function_name = grammar
    module = importlib.import_module(module_name)
    return tree_sitter.Language(getattr(module, function_name)())


@cache
def parser_for(language: str) -> tree_sitter.Parser | None:
    """Return a parser for ``language`` (one per language and process), None if unsupported."""
    grammar = language_for(language)
    if grammar is None:
        return None
    return tree_sitter.Parser(grammar)


def query_text(language: str, name: str) -> str | None:
    """Return the text of query ``name`` for ``language`` with inheritance resolved.

    None when the language has no such query file (the construct does not exist there).
    """
    resource = resources.files("auditor.languages").joinpath(f"{language}-{name}.scm")
    if not resource.is_file():
        return None
    text = resource.read_text(encoding="utf-8")
    first_line = text.split("\n", 1)[0]
    if first_line.startswith(_INHERITS):
        parent = first_line[len(_INHERITS) :].strip()
        if parent == language:
            raise QueryFileError(f"{language}-{name}.scm inherits from itself")
        parent_text = query_text(parent, name)
        if parent_text is None:
            raise QueryFileError(
                f"{language}-{name}.scm inherits from missing {parent}-{name}.scm"
            )
        text = parent_text + "\n" + text
    return text


@cache
def query_for(language: str, name: str) -> tree_sitter.Query | None:
    """Return the compiled query ``name`` for ``language``, or None if there is none.

    Raises QueryFileError when a packaged query does not compile against its grammar.
    """
    grammar = language_for(language)
    text = query_text(language, name) if grammar is not None else None
    if grammar is None or text is None:
        return None
    try:
        return tree_sitter.Query(grammar, text)
    except tree_sitter.QueryError as error:
        raise QueryFileError(f"{language}-{name}.scm: {error}") from error


@dataclass(frozen=True)
class QueryBundle:
    """Several named queries compiled as one, so a single pass over a tree runs them all.

    ``pattern_names[i]`` and ``pattern_settings[i]`` are the query name (file) and the
    ``#set!`` properties of pattern ``i``.
    """

    query: tree_sitter.Query
    pattern_names: tuple[str, ...]
    pattern_settings: tuple[dict[str, str], ...]


@cache
def query_bundle(language: str, names: tuple[str, ...]) -> QueryBundle | None:
    """The queries ``names`` of ``language`` (those that exist) compiled together.

    None for an unsupported language or when none of the queries exists.
    """
    grammar = language_for(language)
    if grammar is None:
        return None
    texts: list[str] = []
    pattern_names: list[str] = []
    for name in names:
        query = query_for(language, name)
        text = query_text(language, name)
        if query is None or text is None:
            continue
        texts.append(text)
        pattern_names.extend([name] * query.pattern_count)
    if not texts:
        return None
    combined = tree_sitter.Query(grammar, "\n".join(texts))
    if combined.pattern_count != len(pattern_names):
        raise QueryFileError(f"{language} queries do not combine cleanly")
    settings = tuple(
        {
            key: value
            for key, value in combined.pattern_settings(index).items()
            if value is not None
        }
        for index in range(combined.pattern_count)
    )
    return QueryBundle(
        query=combined, pattern_names=tuple(pattern_names), pattern_settings=settings
    )
