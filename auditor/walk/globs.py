"""``--include`` and ``--exclude`` globs: one root-level list of gitignore-syntax patterns,
compiled once into a matcher that answers for a path in time independent of how many
patterns are literal paths.

The semantics are ``pathspec.GitIgnoreSpec``'s reference (``backend="simple"``)
implementation: every pattern is translated by pathspec; a pattern matches a path itself
(a "file" match) or one of its directories (a "directory" match); the last pattern with a
file match decides, else the last with a directory match; a '!' pattern deciding means no
match. pathspec's simple backend tries every pattern on every path (about 5 ms per pattern
per 50,000 paths), and its re2 backend exists only when ``google-re2`` happens to be
installed (and then names, for a path matched both ways, the last directory pattern
rather than the last file pattern). :class:`GlobList` splits each translated pattern into
its file and directory variants, as pathspec's re2 backend does, and answers literal
variants (no wildcard: the common shape of long lists) with dictionary look-ups; only
wildcard variants are tried one by one, behind a combined regex that rules most paths out
in one call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pathspec

from auditor.errors import UsageError

__all__ = ["GlobList"]

# The endings pathspec's gitignore translation puts on a regex (pathspec 1.x,
# pathspec.patterns.gitignore.spec): an optional or a required directory marker.
_OPTIONAL_DIRECTORY = "(?:(?P<ps_d>/)|$)"
_REQUIRED_DIRECTORY = "(?P<ps_d>/)"
_ANY_DIRECTORY_PREFIX = "^(?:.+/)?"
_ESCAPED_CHARACTER = re.compile(r"\\(.)", re.DOTALL)


@dataclass(frozen=True)
class _Variant:
    """One way a pattern matches: a regex (anchored at the path's start), whether a match
    is a file match, and, when the regex is a literal, how to look it up instead."""

    index: int
    regex: str
    is_file: bool
    literal: str | None
    whole_path: bool
    exact: bool


def _variants(index: int, regex: str) -> list[_Variant]:
    """The file and directory variants of pathspec's regex for pattern ``index``."""
    if regex.endswith(_OPTIONAL_DIRECTORY):
        base = regex[: -len(_OPTIONAL_DIRECTORY)]
        return [_variant(index, base, "$", is_file=True), _variant(index, base, "/", is_file=False)]
    if regex.endswith(_REQUIRED_DIRECTORY):
        return [_variant(index, regex[: -len(_REQUIRED_DIRECTORY)], "/", is_file=False)]
    return [_variant(index, regex, "", is_file=True)]


def _variant(index: int, base: str, ending: str, is_file: bool) -> _Variant:
    """A variant, with its literal form when ``base`` is a literal path or name."""
    regex = base + ending
    if not regex.startswith("^"):
        # pathspec searches; these few unanchored regexes ('.', '/') match where they start.
        regex = rf"[\s\S]*?(?:{regex})"
    if ending and base.startswith(_ANY_DIRECTORY_PREFIX):
        body, whole_path = base[len(_ANY_DIRECTORY_PREFIX) :], False
    elif ending and base.startswith("^"):
        body, whole_path = base[1:], True
    else:
        return _Variant(index, regex, is_file, None, False, False)
    literal = _ESCAPED_CHARACTER.sub(r"\1", body)
    if re.escape(literal) != body or not literal or (not whole_path and "/" in literal):
        literal = None
    return _Variant(index, regex, is_file, literal, whole_path, exact=ending == "$")


class _Tier:
    """The variants of one kind (file or directory): literal tables and wildcard regexes."""

    def __init__(self, variants: list[_Variant]) -> None:
        # (whole path?, exact?) -> literal -> highest pattern index.
        self._tables: dict[tuple[bool, bool], dict[str, int]] = {}
        wildcards: list[_Variant] = []
        for variant in variants:
            if variant.literal is None:
                wildcards.append(variant)
                continue
            table = self._tables.setdefault((variant.whole_path, variant.exact), {})
            table[variant.literal] = max(variant.index, table.get(variant.literal, -1))
        wildcards.sort(key=lambda variant: -variant.index)
        self._wildcards = [(variant.index, re.compile(variant.regex)) for variant in wildcards]
        self._any_wildcard = (
            re.compile("|".join(f"(?:{variant.regex})" for variant in wildcards)) if wildcards else None
        )

    def last_match(self, path: str, directories: list[str], prefixes: list[str]) -> int:
        """The highest index of a pattern with a variant of this tier matching ``path``
        (-1 for none); ``directories`` and ``prefixes`` are its directory names and paths."""
        best = -1
        for (whole_path, exact), table in self._tables.items():
            if exact:
                keys = [path] if whole_path else [path.rpartition("/")[2]]
            else:
                keys = prefixes if whole_path else directories
            for key in keys:
                best = max(best, table.get(key, -1))
        if self._any_wildcard is not None and self._any_wildcard.match(path):
            for index, regex in self._wildcards:
                if index <= best:
                    break
                if regex.match(path):
                    return index
        return best


class GlobList:
    """Compiled ``--include`` or ``--exclude`` globs (gitignore syntax, root-relative)."""

    def __init__(self, patterns: tuple[str, ...], flag: str) -> None:
        """Compile ``patterns``; an invalid one is a :class:`UsageError` naming ``flag``."""
        try:
            self._spec = pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
        except ValueError as error:
            raise UsageError(f"invalid {flag} pattern: {error}") from error
        variants = [
            variant
            for index, pattern in enumerate(self._spec.patterns)
            if pattern.include is not None and pattern.regex is not None
            for variant in _variants(index, pattern.regex.pattern)
        ]
        self._files = _Tier([variant for variant in variants if variant.is_file])
        self._directories = _Tier([variant for variant in variants if not variant.is_file])

    def matched(self, path: str) -> str | None:
        """The glob that selects root-relative ``path`` (its last matching pattern, unless
        that is a '!' pattern), if any."""
        if "\n" in path:
            # '.' and '$' treat a newline specially; such rare paths take pathspec's own loop.
            index = self._spec.check_file(path).index
        else:
            directories = path.split("/")[:-1]
            prefixes = ["/".join(directories[: count + 1]) for count in range(len(directories))]
            index = self._files.last_match(path, directories, prefixes)
            if index < 0:
                index = self._directories.last_match(path, directories, prefixes)
            if index < 0:
                return None
        if index is None or not self._spec.patterns[index].include:
            return None
        return str(self._spec.patterns[index].pattern)
