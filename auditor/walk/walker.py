"""Walk stage: decide which files of a repository are audited, and read them once.

Input: a scan root (a directory, possibly a subdirectory of a git work tree) and
:class:`WalkOptions`. Output: a :class:`WalkResult` holding every audited file as a decoded
:class:`FileEntry` and every other candidate as a :class:`SkippedFile` with its reason.

The candidate set is git's own view of the tree: inside a git work tree it is exactly what
``git ls-files -co --exclude-standard`` lists (tracked plus untracked-but-not-ignored);
outside git (or when git is unavailable) the same ``.gitignore`` rules are applied by
:class:`_IgnoreTree`, which follows git's algorithm (per-directory evaluation, deepest
ignore file first, last matching pattern wins, no re-inclusion below an excluded
directory). Gitignored paths are not candidates and are not reported, as git does not list
them. Every other exclusion is reported: ``.auditorignore`` files (gitignore syntax,
nested), ``--include``/``--exclude`` globs, default exclusions for token sinks (lockfiles,
minified bundles, vendored dependencies, generated code, binaries, oversized files) and
files that cannot be read as text. Text is UTF-8 (BOM dropped); UTF-16 and UTF-32 with a
BOM and single-byte Windows-1252/Latin-1 text are decoded too, with the encoding noted on
the entry (``FileEntry.encoding``) so reports can say so. A single bad file never stops the
walk.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from auditor.errors import UsageError
from auditor.languages import language_for_path
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.storage.sealed import file_kind
from auditor.walk import placeholders
from auditor.walk.globs import GlobSet

__all__ = [
    "FileEntry",
    "SkipReason",
    "SkippedFile",
    "WalkOptions",
    "WalkResult",
    "walk",
]

_STAGE = "walk"
_PROGRESS_EVERY = 200
# Content sniffing looks for a NUL byte in this many leading bytes (git uses the same size).
_BINARY_PROBE_BYTES = 8192
_UTF8_BOM = b"\xef\xbb\xbf"
# Longest first: a UTF-32-LE BOM starts with the UTF-16-LE one.
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
# A well-formed UTF-8 multi-byte sequence: a file holding one is UTF-8 with damage, not
# single-byte text (Latin-1 text practically never pairs a lead byte with continuations).
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}"
)
# C0 controls no text file holds (tab, newline, vertical tab, form feed, carriage return
# and escape excepted): their presence rules out single-byte text.
_NON_TEXT_CONTROLS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_GITIGNORE = ".gitignore"
_AUDITORIGNORE = ".auditorignore"
# Never block on a named pipe, never follow a link where git would not (absent off POSIX).
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NONBLOCK


class SkipReason(str, Enum):
    """Why a candidate file is not audited; the values are the strings users see."""

    AUDITORIGNORE = "auditorignore"
    EXCLUDED = "excluded"
    NOT_INCLUDED = "not-included"
    LOCKFILE = "lockfile"
    MINIFIED = "minified"
    VENDORED = "vendored"
    GENERATED = "generated"
    BINARY = "binary"
    TOO_LARGE = "too-large"
    NON_UTF8 = "non-utf8"
    UNREADABLE = "unreadable"
    VANISHED = "vanished"
    SYMLINK_OUTSIDE = "symlink-outside-root"
    SYMLINK_LOOP = "symlink-loop"
    NOT_A_FILE = "not-a-file"
    SUBMODULE = placeholders.SUBMODULE
    NESTED_REPOSITORY = placeholders.NESTED_REPOSITORY
    PLACEHOLDER = placeholders.PLACEHOLDER


@dataclass(frozen=True)
class FileEntry:
    """One audited file: its root-relative '/'-separated path and its decoded text.

    ``encoding`` is the codec the text was decoded with: ``UTF8`` for nearly every file,
    else one of ``DECODED_ENCODINGS`` (``content_hash`` and ``size`` are of the bytes on disk).
    """

    path: str
    size: int
    language: str | None
    text: str
    content_hash: str
    encoding: str = "utf-8"


UTF8 = "utf-8"
DECODED_ENCODINGS = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "cp1252")
"""The encodings besides UTF-8 a file can be decoded from (noted on its ``FileEntry``)."""


@dataclass(frozen=True)
class SkippedFile:
    """One candidate that is not audited, with the reason and a human-readable detail."""

    path: str
    reason: SkipReason
    detail: str = ""


@dataclass(frozen=True)
class WalkOptions:
    """What to walk: include/exclude globs (gitignore syntax, root-relative) and limits."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_bytes: int = 1_000_000
    default_excludes: bool = True
    use_gitignore: bool = True


@dataclass(frozen=True)
class WalkResult:
    """The walk's outcome: audited files sorted by path, skipped files by (path, reason)."""

    root: Path
    git_root: Path | None
    files: tuple[FileEntry, ...]
    skipped: tuple[SkippedFile, ...]


# --------------------------------------------------------------------------------------
# Default exclusions for token sinks
# --------------------------------------------------------------------------------------

_LOCKFILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "bun.lockb",
        "deno.lock",
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "conda-lock.yml",
        "Cargo.lock",
        "go.sum",
        "go.work.sum",
        "composer.lock",
        "Gemfile.lock",
        "Podfile.lock",
        "pubspec.lock",
        "mix.lock",
        "flake.lock",
        "packages.lock.json",
        "gradle.lockfile",
        "Package.resolved",
    }
)

_VENDORED_DIRECTORIES = frozenset(
    {
        "node_modules",
        "bower_components",
        "jspm_packages",
        "vendor",
        "third_party",
        "third-party",
        "thirdparty",
        "site-packages",
        "dist-packages",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".yarn",
        ".pnpm-store",
        "Pods",
        "Carthage",
    }
)

_MINIFIED_NAME = re.compile(r"[.-]min\.(?:js|mjs|cjs|css)$", re.IGNORECASE)
_MINIFIABLE_SUFFIXES = frozenset({".js", ".mjs", ".cjs", ".css"})
# A hand-written script or stylesheet never averages this many characters per line.
_MINIFIED_AVERAGE_LINE = 200
_MINIFIED_MIN_CHARS = 2048

_GENERATED_NAME = re.compile(
    r"(?:_pb2(?:_grpc)?\.pyi?|\.pb(?:\.gw)?\.go|_grpc\.pb\.go|\.pb\.(?:cc|h|c)|\.g\.dart"
    r"|\.freezed\.dart|\.designer\.cs|\.(?:js|mjs|cjs|css)\.map)$"
    r"|\.generated\.",
    re.IGNORECASE,
)
# Markers generators write near the top of a file ("// Code generated ... DO NOT EDIT.",
# "@generated", "<auto-generated>"). Django's "# Generated by Django" carries no
# "do not edit", so migrations stay audited.
_GENERATED_HEADER = re.compile(
    r"^\W{0,8}(?:code generated|auto-?generated|automatically generated|generated by"
    r"|this file (?:is|was|has been) (?:auto-?|automatically )?generated)\b"
    r"[\s\S]{0,240}?\bdo not (?:edit|modify)\b"
    r"|@generated\b|<auto-generated",
    re.IGNORECASE | re.MULTILINE,
)
_GENERATED_HEADER_CHARS = 2048
_GENERATED_HINTS = ("do not edit", "do not modify", "@generated", "<auto-generated")

_BINARY_SUFFIXES = frozenset(
    {
        # images
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".ico", ".icns",
        ".psd", ".heic", ".avif", ".svgz",
        # documents
        ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt",
        # archives and packages
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war",
        ".ear", ".whl", ".egg", ".apk", ".dmg", ".iso", ".deb", ".rpm", ".lockb",
        # compiled objects
        ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".lib", ".obj", ".class", ".pyc",
        ".pyo", ".pyd", ".wasm", ".bin",
        # fonts
        ".woff", ".woff2", ".ttf", ".otf", ".eot",
        # audio and video
        ".mp3", ".mp4", ".m4a", ".wav", ".flac", ".ogg", ".mov", ".avi", ".mkv", ".webm",
        # databases and data blobs
        ".sqlite", ".sqlite3", ".db", ".npy", ".npz", ".pkl", ".pickle", ".parquet", ".h5",
        ".hdf5", ".onnx", ".pt", ".pth", ".safetensors", ".ckpt",
    }
)


def _suffix(name: str) -> str:
    """The lower-cased extension of a file name, with its dot ('' when there is none)."""
    stem, dot, extension = name.rpartition(".")
    return f".{extension.lower()}" if dot and stem else ""


def _path_exclusion(path: str) -> SkippedFile | None:
    """The default exclusion a path earns by its name alone, if any."""
    *directories, name = path.split("/")
    for directory in directories:
        if directory in _VENDORED_DIRECTORIES:
            return SkippedFile(path, SkipReason.VENDORED, f"inside {directory}/")
    if name in _LOCKFILES:
        return SkippedFile(path, SkipReason.LOCKFILE, "dependency lockfile")
    if _MINIFIED_NAME.search(name):
        return SkippedFile(path, SkipReason.MINIFIED, "minified file name")
    if _GENERATED_NAME.search(name):
        return SkippedFile(path, SkipReason.GENERATED, "generated file name")
    suffix = _suffix(name)
    if suffix in _BINARY_SUFFIXES:
        return SkippedFile(path, SkipReason.BINARY, f"binary file type '{suffix}'")
    return None


def _content_exclusion(path: str, text: str) -> SkippedFile | None:
    """The default exclusion a decoded file earns by its content, if any."""
    if _suffix(path.rpartition("/")[2]) in _MINIFIABLE_SUFFIXES and len(text) >= _MINIFIED_MIN_CHARS:
        average = len(text) // (text.count("\n") + 1)
        if average > _MINIFIED_AVERAGE_LINE:
            return SkippedFile(path, SkipReason.MINIFIED, f"average line length {average:,} characters")
    header = text[:_GENERATED_HEADER_CHARS]
    # Cheap substring checks first: the full pattern only runs on headers that could match.
    if _has_generated_hint(header.lower()) and _GENERATED_HEADER.search(header):
        return SkippedFile(path, SkipReason.GENERATED, "generated-code marker in the file header")
    return None


def _has_generated_hint(folded_header: str) -> bool:
    """Whether a lower-cased header holds one of the substrings every generated-code
    marker contains (a loop rather than any() over a generator: it runs for every file)."""
    for marker in _GENERATED_HINTS:
        if marker in folded_header:
            return True
    return False


# --------------------------------------------------------------------------------------
# gitignore rules, evaluated the way git evaluates them
# --------------------------------------------------------------------------------------

_CHARACTER_CLASSES: dict[str, str] = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9a-fA-F",
}


class _NeverMatches(Exception):
    """git's wildmatch aborts on this pattern (an unterminated bracket, a lone backslash)."""


def _translate_bracket(glob: str, start: int) -> tuple[str, int]:
    """Translate the bracket expression opening at ``glob[start]``; return (regex, next index).

    Mirrors git's wildmatch: '!' or '^' negates, ']' first is literal, ranges, backslash
    escapes, POSIX classes; a bracket never matches '/'.
    """
    index = start + 1
    negated = index < len(glob) and glob[index] in "!^"
    if negated:
        index += 1
    items: list[str] = []
    first = True
    while True:
        if index >= len(glob):
            raise _NeverMatches
        char = glob[index]
        if char == "]" and not first:
            index += 1
            break
        first = False
        if char == "\\":
            index += 1
            if index >= len(glob):
                raise _NeverMatches
            char = glob[index]
        elif char == "[" and glob.startswith(":", index + 1):
            close = glob.find("]", index + 2)
            if close < 0:
                raise _NeverMatches
            if glob[close - 1] == ":" and close - 1 >= index + 2:
                name = glob[index + 2 : close - 1]
                if name not in _CHARACTER_CLASSES:
                    raise _NeverMatches
                items.append(_CHARACTER_CLASSES[name])
                index = close + 1
                continue
        # A range needs a following character that does not close the bracket.
        if glob.startswith("-", index + 1) and index + 2 < len(glob) and glob[index + 2] != "]":
            high_index = index + 2
            high = glob[high_index]
            if high == "\\":
                high_index += 1
                if high_index >= len(glob):
                    raise _NeverMatches
                high = glob[high_index]
            if char <= high:
                items.append(f"{re.escape(char)}-{re.escape(high)}")
            index = high_index + 1
            continue
        items.append(re.escape(char))
        index += 1
    members = "".join(items)
    if negated:
        return f"[^/{members}]", index
    if not members:
        return "(?!)", index
    return f"(?!/)[{members}]", index


_STAR = "[^/]*"
_DIRECTORIES = "(?:.*/)?"
_ANYTHING = ".*"
_UNBOUNDED = (_STAR, _DIRECTORIES, _ANYTHING)


def _glob_atoms(glob: str) -> list[str]:
    """Translate a git wildmatch pattern (with WM_PATHNAME) into regex atoms: each matches
    one character, or is one of the unbounded ``_STAR`` ('*', never '/'), ``_DIRECTORIES``
    ('**/': nothing or anything ending in '/') and ``_ANYTHING`` (a final '**').

    '**' spans directories when it starts a segment and ends the pattern or precedes '/'.
    git compares the literal prefix (everything before the first special character)
    separately and hands wildmatch only the rest, so a '**' right after that prefix also
    counts as starting a segment ('b**/a' matches 'b/x/a' and 'ba'). Consecutive '**/'
    collapse into one, as they match the same paths. Raises :class:`_NeverMatches` when
    git's wildmatch would abort on the pattern.
    """
    first_special = next((index for index, char in enumerate(glob) if char in "*?[\\"), -1)
    parts: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if char == "*":
            end = index
            while end < len(glob) and glob[end] == "*":
                end += 1
            at_segment_start = index in (0, first_special) or glob[index - 1] == "/"
            if end - index >= 2 and at_segment_start and (end == len(glob) or glob[end] == "/"):
                if end == len(glob):
                    atom = _ANYTHING
                else:
                    atom = _DIRECTORIES
                    end += 1
                if parts and parts[-1] == _DIRECTORIES:
                    parts.pop()  # '**/**/' is '**/', '**/**' is '**'
                parts.append(atom)
            else:
                parts.append(_STAR)
            index = end
        elif char == "?":
            parts.append("[^/]")
            index += 1
        elif char == "[":
            regex, index = _translate_bracket(glob, index)
            parts.append(regex)
        elif char == "\\":
            if index + 1 >= len(glob):
                raise _NeverMatches
            parts.append(re.escape(glob[index + 1]))
            index += 2
        else:
            parts.append(re.escape(char))
            index += 1
    return parts


def _translate_glob(glob: str) -> str:
    """The regex equivalent of a git wildmatch pattern (see :func:`_glob_atoms`)."""
    return "".join(_glob_atoms(glob))


class _GlobAutomaton:
    """A wildmatch pattern matched by simulating its automaton: time proportional to the
    subject's length times the pattern's, whatever the pattern (a backtracking regex takes
    exponential time on '*a*a*a…b' or repeated '**/' shapes).

    State ``i`` waits for atom ``i``; ``-i - 1`` is inside a ``_DIRECTORIES`` atom ``i``
    after at least one character, which it may leave only after a '/'.
    """

    __slots__ = ("_atoms", "_singles", "_end")

    def __init__(self, atoms: list[str]) -> None:
        self._atoms = atoms
        self._singles = [None if atom in _UNBOUNDED else re.compile(atom, re.DOTALL) for atom in atoms]
        self._end = len(atoms)

    def _closure(self, states: set[int]) -> set[int]:
        pending = [state for state in states if state >= 0]
        while pending:
            state = pending.pop()
            if state < self._end and self._atoms[state] in _UNBOUNDED and state + 1 not in states:
                states.add(state + 1)
                pending.append(state + 1)
        return states

    def fullmatch(self, subject: str) -> bool:
        """Whether the whole of ``subject`` matches the pattern."""
        atoms, singles, end = self._atoms, self._singles, self._end
        states = self._closure({0})
        for char in subject:
            following: set[int] = set()
            for state in states:
                if state < 0:
                    inside = -state - 1
                    following.add(state)
                    if char == "/":
                        following.add(inside + 1)
                    continue
                if state == end:
                    continue
                atom = atoms[state]
                if atom == _STAR:
                    if char != "/":
                        following.add(state)
                elif atom == _ANYTHING:
                    following.add(state)
                elif atom == _DIRECTORIES:
                    following.add(-state - 1)
                    if char == "/":
                        following.add(state + 1)
                elif singles[state].fullmatch(char):  # type: ignore[union-attr]
                    following.add(state + 1)
            if not following:
                return False
            states = self._closure(following)
        return end in states


def _compile_glob(glob: str) -> re.Pattern[str] | _GlobAutomaton:
    """A matcher for a wildmatch pattern, linear in the subject's length: a regex when it
    has at most one unbounded atom that can backtrack (a final '**' never does), else an
    automaton."""
    atoms = _glob_atoms(glob)
    backtracking = sum(1 for atom in atoms[:-1] if atom in _UNBOUNDED)
    if atoms and atoms[-1] in (_STAR, _DIRECTORIES):
        backtracking += 1
    if backtracking <= 1:
        return re.compile("".join(atoms), re.DOTALL)
    return _GlobAutomaton(atoms)


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
class _IgnorePattern:
    """One compiled line of an ignore file; ``source`` is that file's root-relative path."""

    source: str
    text: str
    regex: re.Pattern[str] | _GlobAutomaton
    negated: bool
    directory_only: bool
    basename_only: bool


@dataclass(frozen=True)
class _IgnoreFile:
    """The patterns of one ignore file, in file order."""

    patterns: tuple[_IgnorePattern, ...]

    def last_match(self, relative_path: str, basename: str, is_dir: bool) -> _IgnorePattern | None:
        """The last pattern matching a path relative to this file's directory, if any."""
        for pattern in reversed(self.patterns):
            if pattern.directory_only and not is_dir:
                continue
            subject = basename if pattern.basename_only else relative_path
            if pattern.regex.fullmatch(subject):
                return pattern
        return None


def _parse_ignore_line(source: str, line: str) -> _IgnorePattern | None:
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
        regex = _compile_glob(body)
    except (_NeverMatches, re.error):
        # git's wildmatch gives up on such a pattern: it never matches anything.
        return None
    return _IgnorePattern(source, text, regex, negated, directory_only, basename_only)


def _parse_ignore_file(source: str, raw: bytes) -> _IgnoreFile:
    """Compile the lines of an ignore file (BOM skipped, CRLF accepted, as git does)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    lines = raw.decode("utf-8", "surrogateescape").split("\n")
    patterns = []
    for line in lines:
        pattern = _parse_ignore_line(source, line.removesuffix("\r"))
        if pattern is not None:
            patterns.append(pattern)
    return _IgnoreFile(tuple(patterns))


def _read_ignore_file(absolute_path: str) -> bytes | None:
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


class _IgnoreTree:
    """git's exclusion rules for one ignore-file name (``.gitignore``, ``.auditorignore``)
    over the tree below ``root``.

    Ignore files are loaded lazily, once per directory. A path is excluded when one of its
    directories is excluded (nothing below an excluded directory can be re-included) or when
    the last pattern matching the path itself, in the deepest ignore file that has a matching
    pattern, is not a negation. ``extra_files`` (e.g. ``.git/info/exclude``) rank below every
    per-directory file and match paths relative to ``root``.
    """

    def __init__(self, root: str, file_name: str, extra_files: tuple[_IgnoreFile, ...] = ()) -> None:
        self._root = root
        self._file_name = file_name
        self._extra_files = extra_files
        self._files: dict[str, _IgnoreFile | None] = {}
        self._directory_matches: dict[str, _IgnorePattern | None] = {}
        self._chains: dict[str, tuple[tuple[int, _IgnoreFile], ...]] = {}

    def match(self, path: str, is_dir: bool) -> _IgnorePattern | None:
        """The pattern excluding a root-relative path, or None when the path is kept."""
        parent = path.rpartition("/")[0]
        if parent:
            inherited = self._directory_match(parent)
            if inherited is not None:
                return inherited
        return self._own_match(path, parent, is_dir)

    def _directory_match(self, directory: str) -> _IgnorePattern | None:
        if directory not in self._directory_matches:
            self._directory_matches[directory] = self.match(directory, is_dir=True)
        return self._directory_matches[directory]

    def _own_match(self, path: str, parent: str, is_dir: bool) -> _IgnorePattern | None:
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

    def _chain(self, directory: str) -> tuple[tuple[int, _IgnoreFile], ...]:
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

    def _load(self, directory: str) -> _IgnoreFile | None:
        if directory not in self._files:
            source = f"{directory}/{self._file_name}" if directory else self._file_name
            raw = _read_ignore_file(os.path.join(self._root, source))
            ignore_file = None if raw is None else _parse_ignore_file(source, raw)
            self._files[directory] = ignore_file if ignore_file is not None and ignore_file.patterns else None
        return self._files[directory]


# --------------------------------------------------------------------------------------
# Listing candidates
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Listing:
    """Candidate paths (root-relative) plus directories that could not be listed, and
    whether git listed them (so none is a device, a pipe or a socket)."""

    git_root: Path | None
    candidates: tuple[str, ...]
    skipped: tuple[SkippedFile, ...]
    listed_by_git: bool = False


class _GitUnavailable(Exception):
    """git could not give its view of the tree; the message says why."""


class _GitMissing(_GitUnavailable):
    """The git executable could not be started at all."""


def _run_git(root: Path, *arguments: str) -> bytes:
    """Run git in ``root`` and return its stdout, or raise :class:`_GitUnavailable`."""
    environment = {**os.environ, "LC_ALL": "C", "LANGUAGE": "C"}
    try:
        completed = subprocess.run(
            ["git", "-C", str(root), *arguments],
            capture_output=True,
            check=False,
            env=environment,
            stdin=subprocess.DEVNULL,
        )
    except OSError as error:
        raise _GitMissing(f"git could not be run: {error.strerror or error}") from error
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitUnavailable(message[0] if message else f"git exited with status {completed.returncode}")
    return completed.stdout


def _git_toplevel(root: Path) -> Path | None:
    """The work-tree top containing ``root``, None outside git; raises :class:`_GitUnavailable`
    when git fails for another reason (missing, dubious ownership, ...)."""
    try:
        output = _run_git(root, "rev-parse", "--show-toplevel")
    except _GitMissing:
        # Without git, only a .git entry says whether git's view was wanted.
        if _looks_like_git(root):
            raise
        return None
    except _GitUnavailable as error:
        if "not a git repository" in str(error).lower():
            return None
        raise
    top = os.fsdecode(output.rstrip(b"\n"))
    if not top:
        raise _GitUnavailable("git did not report a work-tree top")
    return Path(top).resolve()


def _looks_like_git(root: Path) -> bool:
    """Whether ``root`` or a directory above it has a ``.git`` entry."""
    return any(os.path.lexists(directory / ".git") for directory in (root, *root.parents))


def _list_with_git(root: Path) -> tuple[str, ...]:
    """Paths git lists below ``root``: tracked plus untracked-but-not-ignored."""
    output = _run_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    paths = {os.fsdecode(item).rstrip("/") for item in output.split(b"\0") if item}
    # Unmerged files are listed once per stage; the set removes the duplicates.
    return tuple(sorted(paths))


def _list_with_filesystem(root: Path, use_gitignore: bool) -> _Listing:
    """Walk the tree (never following directory links, never entering ``.git``), pruning
    what the ``.gitignore`` files (and ``.git/info/exclude`` at the root) exclude."""
    root_text = str(root)
    gitignore: _IgnoreTree | None = None
    if use_gitignore:
        extra: tuple[_IgnoreFile, ...] = ()
        info_exclude = ".git/info/exclude"
        raw = _read_ignore_file(os.path.join(root_text, info_exclude))
        if raw is not None:
            extra = (_parse_ignore_file(info_exclude, raw),)
        gitignore = _IgnoreTree(root_text, _GITIGNORE, extra)
    candidates: list[str] = []
    skipped: list[SkippedFile] = []
    pending = [""]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(os.path.join(root_text, directory) if directory else root_text) as scan:
                entries = list(scan)
        except FileNotFoundError:
            skipped.append(SkippedFile(directory, SkipReason.VANISHED, "directory disappeared during the walk"))
            continue
        except OSError as error:
            if not directory:
                raise UsageError(f"cannot read directory {root}: {error.strerror or error}") from error
            skipped.append(SkippedFile(directory, SkipReason.UNREADABLE, f"cannot list directory: {error.strerror}"))
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            path = f"{directory}/{entry.name}" if directory else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if gitignore is not None and gitignore.match(path, is_dir) is not None:
                continue
            if is_dir:
                pending.append(path)
            else:
                candidates.append(path)
    return _Listing(None, tuple(sorted(candidates)), tuple(skipped))


def _list_candidates(root: Path, use_gitignore: bool, progress: ProgressCallback) -> _Listing:
    """git's view of the candidates when ``root`` is in a work tree, else the filesystem's."""
    try:
        git_root = _git_toplevel(root)
    except _GitUnavailable as error:
        progress(
            ProgressEvent(
                _STAGE,
                message=f"git is unavailable ({error}); applying .gitignore rules without it",
            )
        )
        return _list_with_filesystem(root, use_gitignore)
    if git_root is None or not use_gitignore:
        listing = _list_with_filesystem(root, use_gitignore)
        return _Listing(git_root, listing.candidates, listing.skipped)
    try:
        candidates = _list_with_git(root)
    except _GitUnavailable as error:
        progress(
            ProgressEvent(
                _STAGE,
                message=f"git ls-files failed ({error}); applying .gitignore rules without it",
            )
        )
        listing = _list_with_filesystem(root, use_gitignore)
        return _Listing(git_root, listing.candidates, listing.skipped)
    if not candidates:
        progress(ProgressEvent(_STAGE, message=f"git lists no files under {root} (is it ignored?)"))
    return _Listing(git_root, candidates, (), listed_by_git=True)


# --------------------------------------------------------------------------------------
# Classifying and reading candidates
# --------------------------------------------------------------------------------------


def _is_utf8_text(path: str) -> bool:
    """Whether a decoded file name came from valid UTF-8 (no surrogate escapes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Classifier:
    """Turns one candidate path into a FileEntry or a SkippedFile; never raises for a file."""

    def __init__(
        self, root: Path, options: WalkOptions, git_root: Path | None = None, listed_by_git: bool = False
    ) -> None:
        self._root = str(root)
        self._options = options
        # Inside a work tree, .auditorignore files apply from the top down, like .gitignore:
        # scanning a subdirectory still honours the ones in the directories above it.
        ignore_root, self._ignore_prefix = self._root, ""
        if git_root is not None and root != git_root and root.is_relative_to(git_root):
            ignore_root, self._ignore_prefix = str(git_root), root.relative_to(git_root).as_posix() + "/"
        self._auditorignore = _IgnoreTree(ignore_root, _AUDITORIGNORE)
        # Compiled once, into one matcher (auditor.walk.globs); an invalid glob is a usage error.
        self._include = GlobSet(options.include, "--include") if options.include else None
        self._exclude = GlobSet(options.exclude, "--exclude") if options.exclude else None
        self._languages: dict[str, str | None] = {}
        # git lists regular files, links and submodule directories only, never a device
        # (whose mere opening can act on hardware), so its paths are opened before any
        # lstat; that needs O_NOFOLLOW, for links must be checked first.
        self._open_first = listed_by_git and bool(_NOFOLLOW)

    def classify(self, path: str) -> FileEntry | SkippedFile:
        """Apply the exclusions in order (user's ignores, globs, defaults, disk), then read."""
        if not path.isascii() and not _is_utf8_text(path):
            # Later stages and reports handle text only; show the raw bytes escaped.
            shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return SkippedFile(shown, SkipReason.NON_UTF8, "file name is not valid UTF-8")
        ignored = self._auditorignore.match(self._ignore_prefix + path, is_dir=False)
        if ignored is not None:
            detail = f"matched pattern '{ignored.text}' in {ignored.source}"
            return SkippedFile(path, SkipReason.AUDITORIGNORE, detail)
        if self._exclude is not None:
            glob = self._exclude.matched(path)
            if glob is not None:
                return SkippedFile(path, SkipReason.EXCLUDED, f"matched pattern '{glob}'")
        if self._include is not None and not self._include.selects(path):
            return SkippedFile(path, SkipReason.NOT_INCLUDED, "no --include pattern matched")
        if self._options.default_excludes:
            excluded = _path_exclusion(path)
            if excluded is not None:
                return excluded
        return self._read(path)

    def _read(self, path: str) -> FileEntry | SkippedFile:
        absolute = os.path.join(self._root, path)
        if self._open_first:
            try:
                descriptor = os.open(absolute, _READ_FLAGS | _NOFOLLOW)
            except OSError:
                pass  # a link, or a file gone or unreadable: the path below words why
            else:
                return self._read_descriptor(path, descriptor, checked=False)
        try:
            status = os.lstat(absolute)
        except FileNotFoundError:
            return SkippedFile(path, SkipReason.VANISHED, "listed but not on disk")
        except OSError as error:
            return SkippedFile(path, SkipReason.UNREADABLE, error.strerror or str(error))
        if stat.S_ISLNK(status.st_mode):
            outcome = self._follow_link(path, absolute)
            if isinstance(outcome, SkippedFile):
                return outcome
            status = outcome
        if not stat.S_ISREG(status.st_mode):
            return SkippedFile(path, SkipReason.NOT_A_FILE, file_kind(status.st_mode))
        limit = self._options.max_file_bytes
        if status.st_size > limit:
            return SkippedFile(path, SkipReason.TOO_LARGE, f"{status.st_size:,} bytes > {limit:,}")
        try:
            descriptor = os.open(absolute, _READ_FLAGS)
        except FileNotFoundError:
            return SkippedFile(path, SkipReason.VANISHED, "disappeared during the walk")
        except IsADirectoryError:
            return SkippedFile(path, SkipReason.NOT_A_FILE, "directory")
        except OSError as error:
            return SkippedFile(path, SkipReason.UNREADABLE, error.strerror or str(error))
        return self._read_descriptor(path, descriptor, checked=True)

    def _read_descriptor(self, path: str, descriptor: int, checked: bool) -> FileEntry | SkippedFile:
        """Read and decode an open file, closing it. ``checked``: an lstat already found a
        regular file within the size limit, so anything else now was swapped in since."""
        limit = self._options.max_file_bytes
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                if not checked:
                    detail = file_kind(status.st_mode)
                elif stat.S_ISDIR(status.st_mode):
                    detail = "directory"
                else:
                    detail = "replaced during the walk"
                return SkippedFile(path, SkipReason.NOT_A_FILE, detail)
            if not checked and status.st_size > limit:
                return SkippedFile(path, SkipReason.TOO_LARGE, f"{status.st_size:,} bytes > {limit:,}")
            raw = _read_up_to(descriptor, limit + 1, status.st_size)
        except OSError as error:
            return SkippedFile(path, SkipReason.UNREADABLE, error.strerror or str(error))
        finally:
            os.close(descriptor)
        if len(raw) > limit:
            return SkippedFile(path, SkipReason.TOO_LARGE, f"more than {limit:,} bytes")
        return self._decode(path, raw)

    def _follow_link(self, path: str, absolute: str) -> os.stat_result | SkippedFile:
        """The target's status for a link that stays inside the root, else why it is skipped."""
        try:
            target = os.path.realpath(absolute, strict=True)
        except (OSError, RuntimeError):
            return SkippedFile(path, SkipReason.SYMLINK_LOOP, "broken or looping symbolic link")
        if target != self._root and not target.startswith(self._root + os.sep):
            return SkippedFile(path, SkipReason.SYMLINK_OUTSIDE, "symbolic link to a path outside the scan root")
        try:
            return os.stat(absolute)
        except FileNotFoundError:
            return SkippedFile(path, SkipReason.VANISHED, "link target disappeared during the walk")
        except OSError as error:
            return SkippedFile(path, SkipReason.UNREADABLE, error.strerror or str(error))

    def _decode(self, path: str, raw: bytes) -> FileEntry | SkippedFile:
        decoded = _decode_text(raw)
        if isinstance(decoded, tuple) and isinstance(decoded[0], SkipReason):
            return SkippedFile(path, decoded[0], decoded[1])
        text, encoding = decoded
        if self._options.default_excludes:
            excluded = _content_exclusion(path, text)
            if excluded is not None:
                return excluded
        return FileEntry(
            path=path,
            size=len(raw),
            language=self._language(path),
            text=text,
            content_hash=hashlib.sha256(raw).hexdigest(),
            encoding=encoding,
        )

    def _language(self, path: str) -> str | None:
        """``language_for_path(path)``, remembered per extension (which alone decides it)."""
        suffix = _suffix(path.rpartition("/")[2])
        if suffix not in self._languages:
            self._languages[suffix] = language_for_path(path)
        return self._languages[suffix]


def _decode_text(raw: bytes) -> tuple[str, str] | tuple[SkipReason, str]:
    """(text, encoding) of a file's bytes, or (skip reason, detail) when it is not text."""
    for bom, encoding in _WIDE_BOMS:
        if raw.startswith(bom):
            try:
                return raw[len(bom) :].decode(encoding), encoding
            except UnicodeDecodeError as error:
                return SkipReason.NON_UTF8, f"invalid {encoding.upper()} at byte {error.start + len(bom):,}"
    if raw.find(b"\0", 0, _BINARY_PROBE_BYTES) >= 0:
        return SkipReason.BINARY, "NUL byte in the first 8 KiB"
    has_bom = raw.startswith(_UTF8_BOM)
    try:
        # The whole file is decoded: a prefix could cut a multibyte character in two.
        # One leading BOM is dropped (as the "utf-8-sig" codec does, error offsets
        # then count from after it).
        return (raw[3:].decode("utf-8") if has_bom else raw.decode("utf-8")), UTF8
    except UnicodeDecodeError as error:
        invalid = SkipReason.NON_UTF8, f"invalid UTF-8 at byte {error.start:,}"
    if has_bom or _UTF8_MULTIBYTE.search(raw):
        return invalid  # UTF-8 with a damaged byte: decoding it otherwise would garble the rest
    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:
        return invalid  # a byte cp1252 leaves undefined (a Latin-1 C1 control): not text
    if _NON_TEXT_CONTROLS.search(text):
        return SkipReason.NON_UTF8, "not UTF-8, and control characters rule out single-byte text"
    return text, "cp1252"


def _read_up_to(descriptor: int, limit: int, expected_size: int) -> bytes:
    """Read from ``descriptor`` until end of file or ``limit`` bytes, whichever is first.

    ``expected_size`` (the size a stat reported) sizes the first read; a file that grew
    since is still read to its end.
    """
    chunks: list[bytes] = []
    remaining = limit
    request = min(limit, expected_size + 1)
    while remaining > 0:
        chunk = os.read(descriptor, min(remaining, request))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
        request = remaining
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def _resolve_root(root: Path) -> Path:
    """The resolved scan root; a missing path or a non-directory is a usage error."""
    path = Path(root)
    if not path.exists():
        if path.is_symlink():
            raise UsageError(f"broken or looping symbolic link: {path} (its target cannot be resolved)")
        raise UsageError(f"path does not exist: {path}")
    if not path.is_dir():
        raise UsageError(f"not a directory: {path}")
    return path.resolve()


def walk(root: Path, options: WalkOptions = WalkOptions(), progress: ProgressCallback = no_progress) -> WalkResult:
    """List the candidates under ``root`` and classify each one.

    Every candidate appears exactly once, either in ``files`` (decoded UTF-8, BOM stripped)
    or in ``skipped`` with its reason; gitignored paths are not candidates. Raises
    :class:`UsageError` for a missing or non-directory root, an invalid glob or a
    non-positive size limit; a single bad file never raises.
    """
    if options.max_file_bytes <= 0:
        raise UsageError(f"the file size limit must be positive, not {options.max_file_bytes}")
    scan_root = _resolve_root(root)
    listing = _list_candidates(scan_root, options.use_gitignore, progress)
    classifier = _Classifier(scan_root, options, listing.git_root, listing.listed_by_git)
    total = len(listing.candidates)
    progress(ProgressEvent(_STAGE, completed=0, total=total))
    files: list[FileEntry] = []
    skipped: list[SkippedFile] = list(listing.skipped)
    for completed, path in enumerate(listing.candidates, start=1):
        outcome = classifier.classify(path)
        stand_in = placeholders.recognise_stand_in(scan_root, outcome)
        if stand_in is not None:
            outcome = SkippedFile(outcome.path, SkipReason(stand_in.reason), stand_in.detail)
        if isinstance(outcome, FileEntry):
            files.append(outcome)
        else:
            skipped.append(outcome)
        if completed % _PROGRESS_EVERY == 0 and completed < total:
            progress(ProgressEvent(_STAGE, completed=completed, total=total))
    progress(ProgressEvent(_STAGE, completed=total, total=total))
    return WalkResult(
        root=scan_root,
        git_root=listing.git_root,
        files=tuple(sorted(files, key=lambda entry: entry.path)),
        skipped=tuple(sorted(skipped, key=lambda item: (item.path, item.reason.value))),
    )
