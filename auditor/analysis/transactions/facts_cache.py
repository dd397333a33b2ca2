"""The per-file facts cache: each file's :class:`~.facts.FileFacts` kept by what computing
them reads, so that after an edit only the changed files' effect sites and regions are
found again and the whole-program steps (reach, receivers, sequences) run on the rest as
stored.

A file's facts are a function of the file alone (its path, language, index and text) and
of a *context* shared by every file of the run (:func:`facts_context`): the rule, the
framework facts' call patterns, the repository's related-manager names, and auditor's own
code (``package_digest``, which covers every model and this format's version). One sealed
pack per context (``tx-facts-v{FACTS_VERSION}/<context>.facts`` under the cache directory)
holds, per path, the file's stamp (language, content hash, text digest) and its
:data:`~.facts.FactsRecord`. A file whose stamp differs, or whose record does not restore,
is computed anew; a damaged, foreign or mismatched pack is a miss (``auditor.storage.sealed``).
The ``MAX_FACT_PACKS`` most recently used packs are kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from auditor.analysis.transactions.facts import FactsRecord
from auditor.analysis.transactions.framework_facts import FrameworkFacts, Kind
from auditor.rules.loader import Rule
from auditor.storage.package import package_digest
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically

logger = logging.getLogger(__name__)

FACTS_VERSION = 1
"""Version of the facts records' format; part of the directory name."""
MAX_FACT_PACKS = 8
"""Fact packs one cache directory keeps (most recently used first)."""
_MAGIC = b"auditor-tx-facts\n"

Stamp = tuple[str, str, bytes]
"""What a file's facts are computed from, beside the context: its language, content hash
(which its index is a function of) and :func:`text_digest`."""


def text_digest(text: str) -> bytes:
    """A 16-byte BLAKE2b digest of a file's text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def facts_context(rule: Rule, framework: FrameworkFacts, related_managers: frozenset[str]) -> str:
    """A digest over every input of a file's facts that is not the file: auditor's code, the
    rule (its sinks, boundaries and write SQL), the framework facts' call patterns of each
    kind, and the related-manager names."""
    parts = (
        FACTS_VERSION, package_digest(), repr(rule),
        tuple((kind.value, framework.calls(kind)) for kind in Kind), tuple(sorted(related_managers)),
    )  # fmt: skip
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


class FactsCache:
    """Fact packs by :func:`facts_context`, under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"tx-facts-v{FACTS_VERSION}"

    def _pack(self, context: str) -> Path:
        return self.directory / f"{context}.facts"

    def load(self, context: str) -> dict[str, tuple[Stamp, FactsRecord]]:
        """The stamp and record of each file stored under ``context`` (empty on a miss)."""
        target = self._pack(context)
        try:
            stored = unseal(_MAGIC, read_regular_file(target))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable facts pack %s: %s", target, error)
            return {}
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == context):
            return {}
        if not isinstance(stored[1], tuple):
            return {}
        entries: dict[str, tuple[Stamp, FactsRecord]] = {}
        for entry in stored[1]:
            if isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], str):
                entries[entry[0]] = (entry[1], entry[2])  # a stamp that is no tuple never matches
        try:
            os.utime(target)  # in use: pruning keeps the most recently used
        except OSError:
            pass
        return entries

    def store(self, context: str, entries: Mapping[str, tuple[Stamp, FactsRecord]]) -> None:
        """Replace the pack of ``context`` by ``entries`` (a failed write is logged, never
        raised), then prune packs beyond ``MAX_FACT_PACKS``."""
        target = self._pack(context)
        value = (context, tuple((path, stamp, record) for path, (stamp, record) in sorted(entries.items())))
        if write_atomically(target, seal(_MAGIC, value)):
            prune_least_recent(self.directory, "*.facts", MAX_FACT_PACKS, spare=target)
