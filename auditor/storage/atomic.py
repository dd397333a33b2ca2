"""Writing an output file whole or not at all, and never through a link.

A report is written to a temporary file in the destination's directory and renamed over
the destination (``os.replace``): a full disk or an interruption leaves the previous report
as it was, never a truncated one, and a symbolic link planted at the output path (a
repository can commit ``auditor.sarif -> ../victim.txt``) is replaced by the report, its
target left untouched. A character device or a named pipe the user names directly
(``-o /dev/null``, ``-o /dev/stdout`` is a link: see below) is written in place, never
replaced: renaming over it, as root, would replace the system's device node. A link at the
output path is still replaced, even one to a device, never followed. :func:`check_writable`
finds an unwritable destination before the work that produces the report runs.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from auditor.errors import AuditorError, UsageError

# Errors that are the machine's state (a full disk, a quota, a failing device), not a
# wrong path the user gave: exit 2, not a usage error.
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


class OutputError(AuditorError):
    """An output could not be written for a reason of the machine's (a full disk): exit 2."""


def write_atomically(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with a regular file holding ``data`` (text as UTF-8), or leave it as
    it was. A link at ``path`` is replaced, not followed. Raises :class:`OutputError` for a
    full disk or a failing device, :class:`UsageError` for a path that cannot be written."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if _is_stream(target):
            _write_stream(target, payload)
            return
        _refuse_directory(target)
        replace_file(target, (payload,), prefix=f".{target.name}.", suffix=".tmp", report=True)
    except OSError as error:
        raise _output_error(target, error) from error


def replace_file(target: Path, chunks: Iterable[bytes], *, prefix: str, suffix: str, report: bool) -> None:
    """The one rename-over mechanism, for outputs and cache files alike: ``chunks`` go to a
    temporary file beside ``target`` (named ``prefix``...``suffix``, removed on failure),
    then renamed over ``target``. A ``report`` is flushed to the disk first and gets the
    umask's permissions; a cache entry is not flushed and stays private to the user, as
    ``mkstemp`` made it. Raises OSError."""
    directory = target.parent if str(target.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.writelines(chunks)
            if report:
                handle.flush()
                os.fsync(handle.fileno())
                os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def check_writable(path: Path, *, create_parents: bool = False) -> None:
    """Raise :class:`UsageError` (or :class:`OutputError` for a full disk) now when
    :func:`write_atomically` could not write ``path`` later: its directory is missing or
    not writable, or the path is a directory. Creates and removes one empty file. With
    ``create_parents`` (the writer makes missing directories, as ``--write-baseline``
    does) a missing directory is fine when its nearest existing ancestor is writable."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if create_parents and not directory.exists():
        ancestor = next((parent for parent in directory.parents if parent.exists()), Path("."))
        if not (ancestor.is_dir() and os.access(ancestor, os.W_OK | os.X_OK)):
            raise UsageError(f"cannot write {target}: cannot create its directory under {ancestor}")
        return
    try:
        if _is_stream(target):
            if not os.access(target, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(target))
            return
        _refuse_directory(target)
        descriptor, probe = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise _output_error(target, error) from error


def _is_stream(target: Path) -> bool:
    """Whether ``target`` itself (not a link to it) is a character device or a named pipe."""
    try:
        mode = os.lstat(target).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _write_stream(target: Path, payload: bytes) -> None:
    """Write to a device or pipe the user named, in place (no truncation, no creation, no
    link followed)."""
    descriptor = os.open(target, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(payload)


def _refuse_directory(target: Path) -> None:
    """A directory (not a link to one: that is replaced) cannot take a report's place."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))


def _output_error(target: Path, error: OSError) -> AuditorError:
    reason = error.strerror or str(error)
    if error.errno in _DISK_ERRORS:
        return OutputError(f"cannot write {target}: {reason} (the previous file, if any, is unchanged)")
    return UsageError(f"cannot write {target}: {reason}")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
