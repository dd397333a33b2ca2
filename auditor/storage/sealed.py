"""Cache files: the on-disk conventions every auditor cache shares.

- *Sealed* values: a magic header naming the file's kind, a CRC-32 of the payload, then the
  value marshalled (plain tuples, dicts and strings only). Reading checks both, so a
  truncated, damaged or foreign file is an error the caller turns into a cache miss.
- *Atomic* replacement: a temporary file in the target's directory renamed over it, so
  concurrent readers see the old file or the new one, never half of one.
- *Bounded* directories: the least recently used files beyond a count are deleted.

Failing to write is logged and reported as False: a cache only ever saves time.
"""

from __future__ import annotations

import logging
import marshal
import os
import tempfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

logger = logging.getLogger(__name__)


def seal(magic: bytes, value: object) -> tuple[bytes, bytes]:
    """A header (``magic`` and a CRC-32 of the marshalled ``value``) and the marshalled
    value, to be written one after the other (not joined: a value can be large)."""
    payload = marshal.dumps(value)
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
    """Replace ``target`` by the concatenated ``chunks`` in one rename; False (logged)
    when that fails."""
    temporary: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
        with os.fdopen(descriptor, "wb") as handle:
            handle.writelines(chunks)
        os.replace(temporary, target)
        temporary = None
        return True
    except OSError as error:
        logger.warning("could not write cache file %s: %s", target, error)
        return False
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


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
