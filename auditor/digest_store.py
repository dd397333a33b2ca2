"""Digest store: a persistent map from a content digest to a small integer, for values that
are pure functions of some text (its token count under one tokenizer, its relevance score
under one rule set), so a later run looks them up instead of recomputing them.

One store is one append-only file of fixed-size records: a 16-byte BLAKE2b digest of the
input, the value (unsigned 32-bit), and a CRC-32 of both. Each batch of new values is one
``write`` on a file opened with ``O_APPEND``, so processes sharing a store add whole records
without a lock. A record whose CRC does not match (a torn write, a damaged disk block) and a
partial record at the end are ignored on load: a damaged store costs recomputation, never a
wrong value. A file grown past ``MAX_STORE_BYTES`` is started afresh. Every I/O failure
degrades to "not cached" and is logged; the store never fails the run that uses it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

_RECORD = struct.Struct("<16sII")
MAX_STORE_BYTES = 256 * 1024 * 1024
"""A store past this size is replaced by an empty one (about 10 M records)."""


def digest_of(text: str) -> bytes:
    """The 16-byte key of ``text`` (BLAKE2b of its UTF-8 bytes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class DigestStore:
    """Digest -> value for one namespace, read once at open and appended to as values are computed."""

    def __init__(self, path: Path):
        self.path = path
        self._values: dict[bytes, int] = {}
        self._load()

    def _load(self) -> None:
        try:
            if self.path.stat().st_size > MAX_STORE_BYTES:
                self.path.unlink()
                return
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("digest store %s unreadable, starting empty: %s", self.path, exc)
            return
        usable = len(data) - len(data) % _RECORD.size
        crc32 = zlib.crc32
        values = self._values
        for key, value, check in _RECORD.iter_unpack(data[:usable]):
            if crc32(key + value.to_bytes(4, "little")) == check:
                values[key] = value

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: bytes) -> int | None:
        """The stored value of ``key``, or None."""
        return self._values.get(key)

    def put_many(self, values: Mapping[bytes, int] | Iterable[tuple[bytes, int]]) -> None:
        """Store new values (in memory and on disk, in one append)."""
        items = values.items() if isinstance(values, Mapping) else values
        records = bytearray()
        for key, value in items:
            if self._values.get(key) == value:
                continue
            self._values[key] = value
            records += _RECORD.pack(key, value, zlib.crc32(key + value.to_bytes(4, "little")))
        if not records:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, bytes(records))
            finally:
                os.close(descriptor)
        except OSError as exc:
            logger.warning("digest store %s not written: %s", self.path, exc)
