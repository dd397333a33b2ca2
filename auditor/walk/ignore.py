"""Ignore files (``.gitignore``, ``.auditorignore``, ``.git/info/exclude``), evaluated the
way git evaluates them.

Input: a root directory and an ignore-file name; output: for a root-relative path, the
:class:`IgnorePattern` that excludes it, or None. git's algorithm: per-directory
evaluation, the deepest ignore file with a matching pattern decides, the last matching
pattern in it wins, '!' re-includes, and nothing below an excluded directory can be
re-included. One pattern's glob is matched by :mod:`auditor.walk.wildmatch` (why not
``pathspec``: see there); line syntax (comments, '!', trailing '/', anchoring, trailing
spaces) is parsed here.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from auditor.walk.wildmatch import GlobMatcher, NeverMatches, compile_glob

__all__ = [
    "AUDITORIGNORE",
    "GITIGNORE",
    "IgnoreFile",
    "IgnorePattern",
    "IgnoreTree",
    "parse_ignore_file",
    "read_ignore_file",
]

GITIGNORE = ".gitignore"
AUDITORIGNORE = ".auditorignore"
# Never block on a named pipe, never follow a link (absent off POSIX).
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _trim_trailing_spaces(line: str) -> str:
    """Drop trailing spaces that are not escaped with a backslash (as git does)."""
    last_space: int | None = None
    index = 0
    while index < len(line):
        char = line[index]
        if char == " ":
            if last_space is None:
                last_space = index
        elif char == "\\":
            index += 1
            if index >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        index += 1
    return line if last_space is None else line[:last_space]


@dataclass(frozen=True)
class IgnorePattern:
    """One compiled line of an ignore file; ``source`` is that file's root-relative path."""

    source: str
    text: str
    regex: GlobMatcher
    negated: bool
    directory_only: bool
    basename_only: bool


@dataclass(frozen=True)
class IgnoreFile:
    """The patterns of one ignore file, in file order."""

    patterns: tuple[IgnorePattern, ...]

    def last_match(self, relative_path: str, basename: str, is_dir: bool) -> IgnorePattern | None:
        """The last pattern matching a path relative to this file's directory, if any."""
        for pattern in reversed(self.patterns):
            if pattern.directory_only and not is_dir:
                continue
            subject = basename if pattern.basename_only else relative_path
            if pattern.regex.fullmatch(subject):
                return pattern
        return None


def _parse_ignore_line(source: str, line: str) -> IgnorePattern | None:
    """Compile one ignore-file line as git does, or None for blanks, comments, dead patterns."""
    if not line or line.startswith("#"):
        return None
    text = _trim_trailing_spaces(line)
    if not text:
        return None
    body = text
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    directory_only = body.endswith("/")
    if directory_only:
        body = body[:-1]
    basename_only = "/" not in body
    if body.startswith("/"):
        body = body[1:]
    try:
        regex = compile_glob(body)
    except (NeverMatches, re.error):
        # git's wildmatch gives up on such a pattern: it never matches anything.
        return None
    return IgnorePattern(source, text, regex, negated, directory_only, basename_only)


def parse_ignore_file(source: str, raw: bytes) -> IgnoreFile:
    """Compile the lines of an ignore file (BOM skipped, CRLF accepted, as git does)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    lines = raw.decode("utf-8", "surrogateescape").split("\n")
    patterns = []
    for line in lines:
        pattern = _parse_ignore_line(source, line.removesuffix("\r"))
        if pattern is not None:
            patterns.append(pattern)
    return IgnoreFile(tuple(patterns))


def read_ignore_file(absolute_path: str) -> bytes | None:
    """The bytes of an ignore file, or None when absent or unreadable (symlinks are not
    followed, like git since 2.32)."""
    try:
        descriptor = os.open(absolute_path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    except OSError:
        return None
    finally:
        os.close(descriptor)


class IgnoreTree:
    """git's exclusion rules for one ignore-file name (``.gitignore``, ``.auditorignore``)
    over the tree below ``root``.

    Ignore files are loaded lazily, once per directory. A path is excluded when one of its
    directories is excluded (nothing below an excluded directory can be re-included) or when
    the last pattern matching the path itself, in the deepest ignore file that has a matching
    pattern, is not a negation. ``extra_files`` (e.g. ``.git/info/exclude``) rank below every
    per-directory file and match paths relative to ``root``.
    """

    def __init__(self, root: str, file_name: str, extra_files: tuple[IgnoreFile, ...] = ()) -> None:
        self._root = root
        self._file_name = file_name
        self._extra_files = extra_files
        self._files: dict[str, IgnoreFile | None] = {}
        self._directory_matches: dict[str, IgnorePattern | None] = {}
        self._chains: dict[str, tuple[tuple[int, IgnoreFile], ...]] = {}

    def match(self, path: str, is_dir: bool) -> IgnorePattern | None:
        """The pattern excluding a root-relative path, or None when the path is kept."""
        parent = path.rpartition("/")[0]
        if parent:
            inherited = self._directory_match(parent)
            if inherited is not None:
                return inherited
        return self._own_match(path, parent, is_dir)

    def _directory_match(self, directory: str) -> IgnorePattern | None:
        if directory not in self._directory_matches:
            self._directory_matches[directory] = self.match(directory, is_dir=True)
        return self._directory_matches[directory]

    def _own_match(self, path: str, parent: str, is_dir: bool) -> IgnorePattern | None:
        chain = self._chain(parent)
        if not chain and not self._extra_files:
            return None  # the common case: no ignore file applies to this directory
        basename = path.rpartition("/")[2]
        for prefix_length, ignore_file in reversed(chain):
            pattern = ignore_file.last_match(path[prefix_length:], basename, is_dir)
            if pattern is not None:
                return None if pattern.negated else pattern
        for ignore_file in self._extra_files:
            pattern = ignore_file.last_match(path, basename, is_dir)
            if pattern is not None:
                return None if pattern.negated else pattern
        return None

    def _chain(self, directory: str) -> tuple[tuple[int, IgnoreFile], ...]:
        """The ignore files of ``directory`` and the directories above it, outermost first,
        each with the length of the path prefix (its directory and a '/') that paths below
        it drop to become relative to it."""
        if directory not in self._chains:
            above = self._chain(directory.rpartition("/")[0]) if directory else ()
            ignore_file = self._load(directory)
            if ignore_file is None:
                self._chains[directory] = above
            else:
                self._chains[directory] = (*above, (len(directory) + 1 if directory else 0, ignore_file))
        return self._chains[directory]

    def _load(self, directory: str) -> IgnoreFile | None:
        if directory not in self._files:
            source = f"{directory}/{self._file_name}" if directory else self._file_name
            raw = read_ignore_file(os.path.join(self._root, source))
            ignore_file = None if raw is None else parse_ignore_file(source, raw)
            self._files[directory] = ignore_file if ignore_file is not None and ignore_file.patterns else None
        return self._files[directory]


