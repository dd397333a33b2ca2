"""The ``replay`` engine: completions recorded earlier, for reproducible tests and for
re-parsing a past run without a GPU.

Inputs: a recording (``--replay PATH``) and the ``ChatRequest`` batch. Outputs: one
``Completion`` per request, in request order; a request with no recording gets an error
completion ("no recorded completion for window-3").

Recording formats:

* A JSONL file, one record per line (blank lines ignored)::

    {"request_id": "window-0", "text": "<trace>\\n</think>\\n\\n{\\"findings\\": []}",
     "finish_reason": "stop", "prompt_tokens": 123, "completion_tokens": 456}

  ``text`` is the raw model output, reasoning and ``</think>`` included; it is split as
  the live engines split it. The split form gives ``"reasoning"`` and ``"content"`` (the
  answer) instead of ``text``. Optional: ``finish_reason`` ("stop" by default),
  ``prompt_tokens`` (default: the request's count), ``completion_tokens`` (default 0),
  ``cached_prompt_tokens``, ``error``.
* A directory holding ``*.jsonl`` files (read in name order) and/or one file per
  request, ``<request_id>.txt`` with the raw output, plus an optional sibling
  ``<request_id>.json`` object with the optional fields above. A request id with
  slashes (scan-many's ``<repo>/window-<i>``) is a file in a subdirectory:
  ``<repo>/window-<i>.txt``.

Matching: a record with a ``request_id`` answers the request with that id (every time
it is asked); records without one answer, in order, the requests no record names.
``write_recording`` writes the split JSONL form (used by ``--record``).
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from auditor.engine.base import (
    ChatRequest,
    Completion,
    EngineSettings,
    error_completion,
)
from auditor.engine.reasoning import split_output
from auditor.errors import UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.storage.atomic import write_atomically
from auditor.storage.jsonl import jsonl_lines

OPTIONAL_INT_FIELDS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")


@dataclass(frozen=True)
class ReplayRecord:
    """One recorded completion.

    ``text`` is the raw output when ``reasoning`` is None (it is split when replayed),
    else the answer alone. ``request_id`` None means "answer the next unnamed request".
    """

    request_id: str | None
    text: str
    reasoning: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    error: str | None = None


def _optional_str(data: dict[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{where}: {key!r} must be a string")
    return value


def record_from_json(data: Any, where: str, request_id: str | None = None) -> ReplayRecord:
    """A ``ReplayRecord`` from one decoded JSON record; ``UsageError`` naming ``where`` if malformed.

    ``request_id``, when given (a ``<request_id>.txt`` file), overrides the record's own.
    """
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a recorded completion must be a JSON object")
    ints: dict[str, int | None] = {}
    for key in OPTIONAL_INT_FIELDS:
        value = data.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise UsageError(f"{where}: {key!r} must be a non-negative integer")
        ints[key] = value
    if "content" in data or "reasoning" in data:
        text = _optional_str(data, "content", where) or ""
        reasoning: str | None = _optional_str(data, "reasoning", where) or ""
    elif "text" in data:
        text = _optional_str(data, "text", where) or ""
        reasoning = None
    else:
        raise UsageError(f'{where}: a recorded completion needs "text" or "content"')
    return ReplayRecord(
        request_id=request_id if request_id is not None else _optional_str(data, "request_id", where),
        text=text,
        reasoning=reasoning,
        finish_reason=_optional_str(data, "finish_reason", where) or "stop",
        prompt_tokens=ints["prompt_tokens"],
        completion_tokens=ints["completion_tokens"],
        cached_prompt_tokens=ints["cached_prompt_tokens"],
        error=_optional_str(data, "error", where),
    )


def _json_problem(exc: Exception) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the recording: {exc}") from exc


def _read_jsonl(path: Path) -> list[ReplayRecord]:
    records = []
    for number, line in jsonl_lines(_read_text(path)):
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{where}: not valid JSON: {_json_problem(exc)}") from exc
        records.append(record_from_json(data, where))
    return records


def _read_text_record(path: Path, request_id: str) -> ReplayRecord:
    metadata_path = path.with_suffix(".json")
    metadata: Any = {}
    if metadata_path.is_file():
        try:
            metadata = json.loads(_read_text(metadata_path))
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{metadata_path}: not valid JSON: {_json_problem(exc)}") from exc
        if not isinstance(metadata, dict):
            raise UsageError(f"{metadata_path}: metadata must be a JSON object")
    data = {key: value for key, value in metadata.items() if key not in ("text", "content", "reasoning")}
    data["text"] = _read_text(path)
    return record_from_json(data, str(metadata_path), request_id=request_id)


def load_recording(path: str | Path) -> tuple[ReplayRecord, ...]:
    """Every record in a JSONL file or a recording directory, in file then line order.

    Raises ``UsageError`` when the path is missing, holds no recording, or a record is
    malformed.
    """
    root = Path(path)
    if root.is_file():
        records = _read_jsonl(root)
        if not records:
            raise UsageError(f"no recorded completions in {root}")
        return tuple(records)
    if not root.is_dir():
        raise UsageError(f"replay recording not found: {root}")
    records: list[ReplayRecord] = []
    for jsonl in sorted(root.glob("*.jsonl")):
        records.extend(_read_jsonl(jsonl))
    for text in sorted(root.rglob("*.txt")):
        records.append(_read_text_record(text, text.relative_to(root).with_suffix("").as_posix()))
    if not records:
        raise UsageError(f"no recorded completions (*.jsonl or <request_id>.txt) in {root}")
    return tuple(records)


def write_recording(
    path: str | Path, requests: Sequence[ChatRequest], completions: Sequence[Completion]
) -> Path:
    """Write ``completions`` as JSONL in the split form ``ReplayEngine`` reads back exactly.

    One line per completion, keys sorted, in request order; parent directories are
    created. Raises ``ValueError`` when the completions do not answer ``requests`` one
    for one, in order.
    """
    if len(requests) != len(completions):
        raise ValueError(f"{len(completions)} completions for {len(requests)} requests")
    lines = []
    for request, completion in zip(requests, completions):
        if completion.request_id != request.id:
            raise ValueError(f"completion {completion.request_id!r} does not answer request {request.id!r}")
        record: dict[str, Any] = {
            "request_id": request.id,
            "reasoning": completion.reasoning,
            "content": completion.text,
            "finish_reason": completion.finish_reason,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
        }
        if completion.cached_prompt_tokens is not None:
            record["cached_prompt_tokens"] = completion.cached_prompt_tokens
        if completion.error is not None:
            record["error"] = completion.error
        lines.append(json.dumps(record, sort_keys=True, ensure_ascii=False))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, "".join(line + "\n" for line in lines))
    return target


class ReplayEngine:
    """Answers requests from recorded completions; remembers every request in ``history``."""

    name = "replay"

    def __init__(self, records: Iterable[ReplayRecord] = ()) -> None:
        """An engine answering from ``records``; ``UsageError`` if two records name one request."""
        self._named: dict[str, ReplayRecord] = {}
        self._unnamed: deque[ReplayRecord] = deque()
        self._all: list[ReplayRecord] = []
        self.history: list[ChatRequest] = []
        for record in records:
            self.enqueue(record)

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> ReplayEngine:
        """The engine for ``settings.replay_path``; ``UsageError`` when none is given or it is unreadable."""
        if not settings.replay_path:
            raise UsageError(
                "the replay engine needs a recording: pass --replay PATH (a .jsonl file or a directory)"
            )
        return cls(load_recording(settings.replay_path))

    def enqueue(self, record: ReplayRecord) -> None:
        """Add a recorded completion (a named one answers its request; others answer in order)."""
        if record.request_id is not None:
            if record.request_id in self._named:
                raise UsageError(f"two recorded completions for {record.request_id!r}")
            self._named[record.request_id] = record
        else:
            self._unnamed.append(record)
        self._all.append(record)

    def identity(self) -> str:
        """A digest of every record, so a different recording never reuses cached results."""
        canonical = json.dumps([asdict(record) for record in self._all], sort_keys=True)
        return f"replay:{hashlib.sha256(canonical.encode('utf-8')).hexdigest()}"

    def generate(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress
    ) -> list[Completion]:
        """The recorded completion for each request, in request order."""
        completions = []
        for request in requests:
            self.history.append(request)
            record = self._named.get(request.id)
            if record is None and self._unnamed:
                record = self._unnamed.popleft()
            if record is None:
                completions.append(error_completion(request, f"no recorded completion for {request.id}"))
            else:
                completions.append(_completion(request, record))
        progress(ProgressEvent(stage="engine", completed=len(completions), total=len(requests)))
        return completions


def _completion(request: ChatRequest, record: ReplayRecord) -> Completion:
    if record.reasoning is None:
        reasoning, answer = split_output(
            record.text, thinking=request.thinking, finish_reason=record.finish_reason
        )
    else:
        reasoning, answer = record.reasoning, record.text
    return Completion(
        request_id=request.id,
        text=answer,
        reasoning=reasoning,
        finish_reason=record.finish_reason,
        prompt_tokens=record.prompt_tokens if record.prompt_tokens is not None else request.prompt_tokens,
        completion_tokens=record.completion_tokens or 0,
        cached_prompt_tokens=record.cached_prompt_tokens,
        error=record.error,
    )
