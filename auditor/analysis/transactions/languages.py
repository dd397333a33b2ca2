"""What the transaction analysis does differently per language, as data: one row per
language, read through :func:`traits` (a language without a row gets the defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageTraits:
    """How the analysis reads one language's files."""

    line_comment: str | None = None
    """What starts a comment to the line's end: brackets after it do not count when a
    boundary call's extent is scanned (only Python's is skipped so far)."""
    verdicts_read_file: bool = False
    """A model's verdict on a call depends on the file beyond the call (Go's imports,
    Java's field declarations), so verdicts are kept per file."""
    proxied_boundaries: bool = False
    """Boundary decorators work through a proxy (Spring's ``@Transactional``): a method
    calling another of its own class bypasses it and opens no transaction."""
    parse_functions_alone: bool = False
    """A function's body is parsed on its own, dedented, rather than inside the whole
    file's tree (Python functions are far shorter than their files)."""
    signature_defaults: bool = False
    """Parameters and their defaults are read from function signatures, so constant false
    arguments can switch a callee's effects off."""
    receivers: bool = False
    """Receivers' classes are read from the text (Django models, managers, properties)."""


_PYTHON = LanguageTraits(line_comment="#", parse_functions_alone=True, signature_defaults=True, receivers=True)

LANGUAGES: Mapping[str, LanguageTraits] = {
    "python": _PYTHON,
    "java": LanguageTraits(verdicts_read_file=True, proxied_boundaries=True),
    "go": LanguageTraits(verdicts_read_file=True),
}
"""The languages that differ from the defaults."""

_DEFAULT = LanguageTraits()
_FAMILY = {"tsx": "typescript"}


def traits(language: str) -> LanguageTraits:
    """The row of ``language`` (the defaults when it has none)."""
    return LANGUAGES.get(language, _DEFAULT)


def family(language: str) -> str:
    """The language a rule names for ``language`` (a rule for TypeScript covers TSX)."""
    return _FAMILY.get(language, language)
