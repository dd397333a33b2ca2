"""The analysis memo: a whole run's :class:`~.analysis.StaticResult` kept under a key that
covers every input, so that analysing an unchanged repository again with the same options
is a lookup.

A stored result is its findings and counters (``StaticResult``'s fields). The key
(:func:`result_key`) is a SHA-256 of:

- ``MEMO_VERSION`` and auditor's own code (``package_digest``: every module, rule and
  framework model of the package);
- the call graph's key (``graph_cache_key``: every indexed file's path, language and
  content hash, the index and graph versions, the Python version); the graph passed in is
  the graph of those indexes;
- every file text's path and digest (texts the index did not cover are read too: the
  related-manager names come from every Python file);
- the rule's full definition, and every option of the run (``TxOptions``) with the bytes of
  each project transaction-model file (one that cannot be read makes no key: the analysis
  runs, and reports the file as it would without a memo).

Entries live under ``tx-results-v{MEMO_VERSION}`` in the cache directory, sealed and
replaced atomically (``auditor.storage.sealed``); an unreadable, foreign or malformed entry
is a miss, and the ``MAX_RESULTS`` most recently used are kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from auditor.callgraph.cache import graph_cache_key
from auditor.findings.model import ChainStep, EffectSite, Finding, FindingChain, Verdict
from auditor.index.model import FileIndex
from auditor.rules.loader import Rule
from auditor.rules.severity import Severity
from auditor.storage.package import package_digest
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically

Stored = tuple[tuple[Finding, ...], tuple[int, ...]]
"""A stored result: its findings and its counters (``StaticResult``'s other fields, in order)."""

logger = logging.getLogger(__name__)

MEMO_VERSION = 1
"""Version of the memo's format and key material; part of its directory name."""
MAX_RESULTS = 16
"""Entries kept (most recently used first)."""
_MAGIC = b"auditor-tx-result\n"

# How each field of a finding is stored beyond a plain value: an enum by its value, a tuple
# of value objects as a tuple of their records. A field whose value is an enum or a value
# object and is not listed here fails loudly (TypeError) instead of being stored wrong.
_NESTED: Mapping[type, Mapping[str, Any]] = {
    Finding: {
        "severity": Severity,
        "chain": (ChainStep,),
        "chains": (FindingChain,),
        "verdicts": (Verdict,),
        "sequence": (EffectSite,),
    },
    FindingChain: {"steps": (ChainStep,)},
    ChainStep: {},
    EffectSite: {},
    Verdict: {},
}


def _encoded(value: Any) -> tuple[Any, ...]:
    """A value object as a tuple of its fields (nested ones as records)."""
    nested = _NESTED[type(value)]
    record = []
    for item in fields(value):
        field_value = getattr(value, item.name)
        kind = nested.get(item.name)
        if isinstance(kind, tuple):
            record.append(tuple(map(_encoded, field_value)))
        elif kind is not None:
            record.append(field_value.value)
        elif isinstance(field_value, Enum) or is_dataclass(field_value):
            kind_name = type(field_value).__name__
            raise TypeError(f"{type(value).__name__}.{item.name} holds a {kind_name}: not a plain value")
        else:
            record.append(field_value)
    return tuple(record)


def _decoded(cls: type, record: Any) -> Any:
    """The value object of class ``cls`` that :func:`_encoded` gave ``record`` for."""
    nested = _NESTED[cls]
    values = []
    for item, stored in zip(fields(cls), record, strict=True):
        kind = nested.get(item.name)
        if isinstance(kind, tuple):
            values.append(tuple(_decoded(kind[0], entry) for entry in stored))
        else:
            values.append(kind(stored) if kind is not None else stored)
    return cls(*values)


def result_key(
    indexes: Mapping[str, FileIndex],
    digests: Mapping[str, bytes],
    rule: Rule,
    options: tuple[Any, ...],
    models: tuple[Path, ...],
) -> str | None:
    """The memo key of one analysis (see the module docstring); ``digests``: the text digest
    of every file text, by path; ``options``: every option's value; ``models``: the project's
    transaction-model files. None when one of those cannot be read."""
    try:
        if not all(path.is_file() for path in models):
            return None
        read = tuple((str(path), hashlib.sha256(path.read_bytes()).hexdigest()) for path in models)
    except OSError as error:
        logger.debug("analysis not memoized: a transaction-model file cannot be read: %s", error)
        return None
    digest = hashlib.sha256()

    def add(part: object) -> None:
        text = repr(part).encode("utf-8", "surrogatepass")
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text)

    add((MEMO_VERSION, package_digest(), graph_cache_key(indexes), rule, options, read))
    for path in sorted(digests):
        add(path)
        digest.update(digests[path])
    return digest.hexdigest()


class ResultMemo:
    """Stored analysis results by :func:`result_key`, under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"tx-results-v{MEMO_VERSION}"

    def _entry(self, key: str) -> Path:
        return self.directory / f"{key}.result"

    def get(self, key: str, counters: int) -> Stored | None:
        """The findings and ``counters`` counts stored under ``key``, or None (a miss, or an
        entry that is not one)."""
        target = self._entry(key)
        try:
            stored = unseal(_MAGIC, read_regular_file(target))
            if not (
                isinstance(stored, tuple) and len(stored) == 3 and stored[0] == key and isinstance(stored[1], tuple)
                and isinstance(stored[2], tuple) and len(stored[2]) == counters
                and all(type(count) is int for count in stored[2])
            ):  # fmt: skip
                return None
            result = (tuple(_decoded(Finding, record) for record in stored[1]), stored[2])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable analysis memo %s: %s", target, error)
            return None
        try:
            os.utime(target)  # in use: pruning keeps the most recently used
        except OSError:
            pass
        return result

    def put(self, key: str, findings: tuple[Finding, ...], counters: tuple[int, ...]) -> None:
        """Store ``findings`` and ``counters`` under ``key`` (a failed write is logged, never raised)."""
        target = self._entry(key)
        if write_atomically(target, seal(_MAGIC, (key, tuple(map(_encoded, findings)), counters))):
            prune_least_recent(self.directory, "*.result", MAX_RESULTS, spare=target)
