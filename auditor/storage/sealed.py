"""Cache files: the on-disk conventions every auditor cache shares.

- *Sealed* values: a magic header naming the file's kind, a CRC-32 of the payload, then the
  value marshalled (plain tuples, dicts and strings only). Reading checks both, so a
  truncated, damaged or foreign file is an error the caller turns into a cache miss.
- *Atomic* replacement: a temporary file in the target's directory renamed over it, so
  concurrent readers see the old file or the new one, never half of one.
- *Bounded* directories: the least recently used files beyond a count are deleted.
- *Regular files only*: a cache file is opened without following a symbolic link and read
  only when it is a regular file no larger than its kind's limit. A link, a named pipe, a
  device (``/dev/zero``), a socket or a directory in its place is a damaged entry
  (:class:`DamagedEntry`, a ValueError), never a hang, an unbounded read or a write
  through the link. Files are only ever written into a directory that is not itself a
  link.

Failing to write is logged and reported as False: a cache only ever saves time.
"""

from __future__ import annotations

import errno
import logging
import marshal
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

logger = logging.getLogger(__name__)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

MAX_ENTRY_BYTES = 256 * 1024 * 1024
"""Largest cache file any store reads (a pack of a very large repository is tens of MB):
anything larger is damaged, not read."""


class DamagedEntry(ValueError):
    """A cache file that is not a regular file of a plausible size (a link, a pipe, a
    device, a directory, a file over its limit)."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def read_regular_file(path: Path, max_bytes: int = MAX_ENTRY_BYTES) -> bytes:
    """The bytes of ``path`` when it is a regular file (not a link) of at most ``max_bytes``.

    Raises FileNotFoundError when absent, :class:`DamagedEntry` for anything else in its
    place (checked before opening, so a device is never opened, and again on the open
    descriptor, so a swap in between is caught), OSError when unreadable.
    """
    status = os.lstat(path)
    if not stat.S_ISREG(status.st_mode):
        raise DamagedEntry(f"{file_kind(status.st_mode)} in place of a cache file")
    if status.st_size > max_bytes:
        raise DamagedEntry(f"{status.st_size:,} bytes > the {max_bytes:,}-byte limit")
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise DamagedEntry("symbolic link in place of a cache file") from error
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise DamagedEntry(f"{file_kind(status.st_mode)} in place of a cache file")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, max(status.st_size + 1, 65536)))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise DamagedEntry(f"grew past the {max_bytes:,}-byte limit while read")
    return data


def writable_directory(directory: Path) -> bool:
    """Whether cache files may be created in ``directory``: it is not a symbolic link
    (an entry's directory replaced by a link would send writes outside the cache)."""
    try:
        return not stat.S_ISLNK(os.lstat(directory).st_mode)
    except FileNotFoundError:
        return True  # created by the writer
    except OSError:
        return False


def seal(magic: bytes, value: object) -> tuple[bytes, bytes]:
    """A header (``magic`` and a CRC-32 of the marshalled ``value``) and the marshalled
    value, to be written one after the other (not joined: a value can be large)."""
    return seal_marshalled(magic, marshal.dumps(value))


def seal_marshalled(magic: bytes, payload: bytes) -> tuple[bytes, bytes]:
    """``seal`` of the value whose marshal bytes are ``payload`` (marshalled already)."""
    return magic + zlib.crc32(payload).to_bytes(4, "big"), payload


def unseal(magic: bytes, data: bytes) -> object:
    """The value ``seal`` stored; raises ValueError/EOFError/TypeError if ``data`` is not one."""
    header = len(magic) + 4
    if len(data) < header or not data.startswith(magic):
        raise ValueError("not an auditor cache file of this kind")
    payload = memoryview(data)[header:]
    if zlib.crc32(payload) != int.from_bytes(data[len(magic) : header], "big"):
        raise ValueError("checksum mismatch")
    return marshal.loads(payload)


def write_atomically(target: Path, chunks: Iterable[bytes]) -> bool:
    """Replace ``target`` by the concatenated ``chunks`` in one rename
    (``auditor.storage.atomic.replace_file``); False (logged) when that fails: a cache
    that cannot be written never fails a scan."""
    from auditor.storage.atomic import replace_file

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not writable_directory(target.parent):
            raise OSError(errno.ELOOP, "the directory is a symbolic link")
        replace_file(target, chunks, prefix=".tmp-", suffix=target.suffix, report=False)
        return True
    except OSError as error:
        logger.warning("could not write cache file %s: %s", target, error)
        return False


def prune_least_recent(
    directory: Path,
    pattern: str,
    keep: int,
    *,
    spare: Path | None = None,
    companions: Callable[[Path], Iterable[Path]] = lambda path: (),
) -> None:
    """Delete the files of ``directory`` matching ``pattern`` beyond the ``keep`` most
    recently modified (never ``spare``), each with its ``companions``. Temporary files being
    written (``.tmp-*``) are left alone; files removed meanwhile by another process are skipped."""
    aged: list[tuple[float, str, Path]] = []
    for path in directory.glob(pattern):
        if path.name.startswith(".tmp-"):
            continue
        try:
            aged.append((path.stat().st_mtime, path.name, path))
        except OSError:
            continue
    aged.sort(reverse=True)
    for _, _, stale in aged[keep:]:
        if stale == spare:
            continue
        stale.unlink(missing_ok=True)
        for companion in companions(stale):
            companion.unlink(missing_ok=True)
