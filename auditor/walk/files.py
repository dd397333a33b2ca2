"""What the walk produces for each candidate: an audited :class:`FileEntry` or a
:class:`SkippedFile` carrying a :class:`SkipReason` and a detail for the user."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from auditor.walk import placeholders

__all__ = ["DECODED_ENCODINGS", "UTF8", "FileEntry", "SkipReason", "SkippedFile"]


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
    FILE_DEADLINE = "file-deadline"


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

