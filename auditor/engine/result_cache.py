"""Result cache: model completions stored on disk so that a re-run on an unchanged window
costs no GPU time.

Input: any ``Engine`` and a cache directory. Output: ``CachingEngine``, itself an Engine,
which answers a request from the cache when an identical one was completed before and
sends only the misses to the wrapped engine, in one batch.

The key is the SHA-256 of the engine's ``identity()`` (model and every output-changing
setting) and the request's exact content: its messages, ``max_tokens``, ``thinking`` and
``json_schema``. The request id is not part of the key (a window may move from index 3 to
index 2 when an earlier window shrinks) and a hit is answered under the current id.
Only finished answers are stored: a completion without an ``error``, with finish reason
"stop" and a non-empty answer. Anything else (an error, "abort", "length" (cut off by the
token budget), "repetition", a missing or unknown reason, an empty answer) is always retried.
Entries are sealed like every auditor cache file (``auditor.storage.sealed``: a magic header,
a CRC-32, the marshalled fields) and written atomically; an entry whose checksum, key or
fields do not match, or anything but a regular file in its place, counts as a miss and is
overwritten by the fresh answer: one flipped byte never changes a replayed finding.
Bypassing the cache (``--no-cache``) is the caller's choice: do not wrap the engine.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from auditor.engine.base import ChatRequest, Completion, Engine, error_completion
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.storage.dirs import cache_dir
from auditor.storage.sealed import DamagedEntry, read_regular_file, seal, unseal, write_atomically

RESULT_CACHE_VERSION = 3
"""Version of the entry format, key material and how answers are split from reasoning
(2: an unclosed trace is no answer; 3: sealed entries); part of the directory name."""

_CACHED_FINISH_REASONS = frozenset({"stop"})
_ENTRY_MAGIC = b"auditor-result-entry\n"
MAX_RESULT_ENTRY_BYTES = 64 * 1024 * 1024
"""Largest entry read back (an answer of a 262K-token window is well under 2 MB)."""
_COMPLETION_FIELDS = (
    "text",
    "reasoning",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "error",
)

logger = logging.getLogger(__name__)


def default_result_cache_dir() -> Path:
    """The results directory next to the index cache, e.g. ``~/.cache/auditor/results/v1``
    (``$AUDITOR_CACHE_DIR/results/v1`` or ``$XDG_CACHE_HOME/auditor/results/v1`` when set)."""
    return cache_dir("results") / f"v{RESULT_CACHE_VERSION}"


def request_key(identity: str, request: ChatRequest) -> str:
    """The cache key of ``request`` sent to the engine with this identity (hex SHA-256)."""
    material = {
        "identity": identity,
        "messages": [[message.role, message.content] for message in request.messages],
        "max_tokens": request.max_tokens,
        "thinking": request.thinking,
        "json_schema": request.json_schema,
    }
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CacheStats:
    """Hits and misses of one ``generate`` call."""

    hits: int
    misses: int


class ResultCache:
    """Completions on disk under ``directory``, one sealed file per key (``ab/abcdef….entry``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def entry_path(self, key: str) -> Path:
        """Where the entry for ``key`` is stored."""
        return self.directory / key[:2] / f"{key}.entry"

    def get(self, key: str, request_id: str) -> Completion | None:
        """The stored completion for ``key`` answered as ``request_id``; None on a miss or a bad entry."""
        path = self.entry_path(key)
        try:
            entry = unseal(_ENTRY_MAGIC, read_regular_file(path, MAX_RESULT_ENTRY_BYTES))
            return _completion_from_entry(entry, key, request_id)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, KeyError, TypeError, DamagedEntry) as error:
            logger.warning("ignoring unreadable result cache entry %s: %s", path, error)
            return None

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` atomically; a failed write is logged, not raised."""
        target = self.entry_path(key)
        record = {name: value for name, value in asdict(completion).items() if name in _COMPLETION_FIELDS}
        entry = {"version": RESULT_CACHE_VERSION, "key": key, "completion": record}
        write_atomically(target, seal(_ENTRY_MAGIC, entry))


def _completion_from_entry(entry: Any, key: str, request_id: str) -> Completion:
    """A Completion from a stored entry; raises ValueError/KeyError/TypeError when malformed."""
    if not isinstance(entry, dict) or entry.get("version") != RESULT_CACHE_VERSION or entry.get("key") != key:
        raise ValueError("entry is from another version or key")
    record = entry["completion"]
    if not isinstance(record, dict):
        raise TypeError("'completion' is not an object")
    for name in ("text", "reasoning", "finish_reason"):
        if not isinstance(record[name], str):
            raise TypeError(f"{name!r} is not a string")
    for name in ("prompt_tokens", "completion_tokens"):
        if not isinstance(record[name], int) or isinstance(record[name], bool):
            raise TypeError(f"{name!r} is not an integer")
    cached = record.get("cached_prompt_tokens")
    if cached is not None and (not isinstance(cached, int) or isinstance(cached, bool)):
        raise TypeError("'cached_prompt_tokens' is not an integer")
    return Completion(
        request_id=request_id,
        text=record["text"],
        reasoning=record["reasoning"],
        finish_reason=record["finish_reason"],
        prompt_tokens=record["prompt_tokens"],
        completion_tokens=record["completion_tokens"],
        cached_prompt_tokens=cached,
        error=None,
    )


def cacheable(completion: Completion) -> bool:
    """Whether a completion is a finished answer worth keeping: no error, finish reason
    "stop" (not aborted, cut off, missing or unknown) and a non-empty answer."""
    return (
        completion.error is None
        and completion.finish_reason in _CACHED_FINISH_REASONS
        and bool(completion.text.strip())
    )


class CachingEngine:
    """An Engine that answers from the result cache and asks ``engine`` only for misses.

    ``last_stats`` holds the hits and misses of the latest ``generate`` call.
    """

    def __init__(self, engine: Engine, directory: Path | None = None) -> None:
        """Wrap ``engine``; entries live in ``directory`` (default ``default_result_cache_dir()``)."""
        self.engine = engine
        self.name = engine.name
        self.cache = ResultCache(directory if directory is not None else default_result_cache_dir())
        self.last_stats = CacheStats(hits=0, misses=0)

    def identity(self) -> str:
        """The wrapped engine's identity (caching does not change outputs)."""
        return self.engine.identity()

    def generate(self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress) -> list[Completion]:
        """One completion per request, in order: cached ones as stored, the rest from the engine.

        The wrapped engine is not called at all when every request is a hit.
        """
        if not requests:
            self.last_stats = CacheStats(hits=0, misses=0)
            return []
        identity = self.engine.identity()
        keys = [request_key(identity, request) for request in requests]
        answers: list[Completion | None] = [self.cache.get(key, request.id) for key, request in zip(keys, requests)]
        missing = [index for index, answer in enumerate(answers) if answer is None]
        hits = len(requests) - len(missing)
        self.last_stats = CacheStats(hits=hits, misses=len(missing))
        progress(
            ProgressEvent(
                stage="engine",
                message=f"result cache: {hits} of {len(requests)} window(s) answered from the cache",
            )
        )
        if missing:
            fresh = self.engine.generate([requests[index] for index in missing], progress)
            # Matched by request id, not position: an engine (a plugin) that answers out of
            # order or skips a request must not get an answer stored under another request.
            by_id: dict[str, Completion] = {}
            for completion in fresh:
                by_id.setdefault(completion.request_id, completion)
            for index in missing:
                completion = by_id.get(requests[index].id)
                if completion is None:
                    answers[index] = error_completion(requests[index], f"engine {self.name} returned no completion")
                    continue
                answers[index] = completion
                if cacheable(completion):
                    self.cache.put(keys[index], completion)
        return [answer if answer is not None else error_completion(request, "no completion") for answer, request in zip(answers, requests)]
