"""Reading: a listed candidate's bytes off disk, and its text out of those bytes.

:class:`FileReader` opens each candidate once, without following links out of the scan
root and without blocking on pipes, and answers with the bytes or a :class:`SkippedFile`
(vanished, unreadable, a link outside the root or looping, not a regular file, too
large). :func:`decode_text` turns bytes into text: UTF-8 (BOM dropped), UTF-16 and UTF-32
with a BOM, single-byte Windows-1252/Latin-1 text; else a skip reason (binary: a NUL byte
in the first 8 KiB; non-utf8: anything else undecodable).
"""

from __future__ import annotations

import os
import re
import stat

from auditor.storage.sealed import file_kind
from auditor.walk.files import UTF8, SkippedFile, SkipReason

__all__ = ["FileReader", "decode_text"]

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
# Never block on a named pipe, never follow a link where git would not (absent off POSIX).
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NONBLOCK


class FileReader:
    """Reads candidates below one scan root, each within ``max_file_bytes``.

    ``listed_by_git``: git lists regular files, links and submodule directories only,
    never a device (whose mere opening can act on hardware), so its paths are opened
    before any lstat; that needs O_NOFOLLOW, for links must be checked first.
    """

    def __init__(self, root: str, max_file_bytes: int, listed_by_git: bool) -> None:
        self._root = root
        self._max_file_bytes = max_file_bytes
        self._open_first = listed_by_git and bool(_NOFOLLOW)

    def read(self, path: str) -> bytes | SkippedFile:
        """The bytes of the regular file at root-relative ``path`` (a link followed only
        when it stays inside the root), or why it cannot be audited; never raises."""
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
        limit = self._max_file_bytes
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

    def _read_descriptor(self, path: str, descriptor: int, checked: bool) -> bytes | SkippedFile:
        """Read an open file, closing it. ``checked``: an lstat already found a
        regular file within the size limit, so anything else now was swapped in since."""
        limit = self._max_file_bytes
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
        return raw

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


def decode_text(raw: bytes) -> tuple[str, str] | tuple[SkipReason, str]:
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
