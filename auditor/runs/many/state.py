"""The resumable run state: every finished window appended to ``state.jsonl`` under
(repository, window, rule set, prompt hash), and the JSON forms of requests and
completions that travel through it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from auditor.engine.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    EngineSettings,
)
from auditor.engine.result_cache import cacheable, request_key
from auditor.rules.loader import Rule
from auditor.storage.jsonl import jsonl_lines

logger = logging.getLogger(__name__)

STATE_FILE = "state.jsonl"


def request_to_json(request: ChatRequest) -> str:
    """A request as JSON (for Ray rows)."""
    return json.dumps(asdict(request), sort_keys=True, ensure_ascii=False)


def request_from_json(text: str) -> ChatRequest:
    """The request ``request_to_json`` wrote."""
    data = json.loads(text)
    data["messages"] = tuple(ChatMessage(**message) for message in data["messages"])
    return ChatRequest(**data)


def completion_to_json(completion: Completion) -> str:
    """A completion as JSON (state file, Ray rows)."""
    return json.dumps(asdict(completion), sort_keys=True, ensure_ascii=False)


def completion_from_json(text: str | Mapping[str, Any]) -> Completion:
    """The completion ``completion_to_json`` wrote (or its decoded object)."""
    data = json.loads(text) if isinstance(text, str) else dict(text)
    return Completion(**data)


@dataclass(frozen=True)
class WorkItem:
    """One window of one repository, identified the way resume matches it."""

    repository: str
    window: int
    rules: str
    prompt_hash: str


def rule_set(rules: Sequence[Rule]) -> str:
    """A rule set as work items name it: the sorted rule ids."""
    return ",".join(sorted(rule.id for rule in rules))


def work_item(repository: str, window: int, rules: str, request: ChatRequest, fingerprint: str) -> WorkItem:
    """The item for a window: its rule set and the hash of its exact request content under
    this engine (the shared result cache's key)."""
    return WorkItem(repository, window, rules, request_key(fingerprint, request))


class RunState:
    """The run directory's ``state.jsonl``: one JSON line per done or failed item, appended
    as they happen so an interrupted run loses nothing finished. Later lines win."""

    def __init__(self, path: Path) -> None:
        """Read the state at ``path`` (none yet is an empty state); malformed lines are skipped."""
        self.path = path
        self._done: dict[WorkItem, Completion] = {}
        if path.is_file():
            # An interrupted append can leave a last line cut anywhere, even inside a UTF-8
            # sequence: decode leniently (that line is then skipped as malformed) and end it
            # with a newline so the next record starts a line of its own.
            text = path.read_bytes().decode("utf-8", errors="replace")
            if text and not text.endswith("\n"):
                with path.open("a", encoding="utf-8") as handle:
                    handle.write("\n")
            for number, line in jsonl_lines(text):
                try:
                    record = json.loads(line)
                    if record["status"] == "repository-failed":
                        continue
                    item = WorkItem(record["repository"], record["window"], record["rules"], record["prompt_hash"])
                    if record["status"] == "done":
                        self._done[item] = completion_from_json(record["completion"])
                    else:
                        self._done.pop(item, None)
                except (ValueError, KeyError, TypeError) as exc:
                    logger.warning("%s:%d: skipping a malformed state line: %s", path, number, exc)

    def done_items(self) -> tuple[WorkItem, ...]:
        """Every item recorded as done and not failed since."""
        return tuple(self._done)

    def done(self, item: WorkItem, request: ChatRequest) -> Completion | None:
        """The recorded completion of ``item``, answered under the request's id; None if not done."""
        completion = self._done.get(item)
        return None if completion is None else replace(completion, request_id=request.id)

    def record(self, item: WorkItem, completion: Completion) -> None:
        """Append ``item`` as done (a finished answer) or failed (an engine error or abort)."""
        status = "done" if cacheable(completion) else "failed"
        record: dict[str, Any] = {**asdict(item), "status": status}
        if status == "done":
            record["completion"] = asdict(completion)
            self._done[item] = completion
        else:
            record["error"] = completion.error or f"finish_reason {completion.finish_reason}"
            self._done.pop(item, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")

    def record_repository_failure(self, repository: str, error: str) -> None:
        """Append a repository that failed before any window existed (checkout, walk, pack)."""
        record = {"repository": repository, "status": "repository-failed", "error": error}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")


def engine_fingerprint(engine: str, settings: EngineSettings) -> str:
    """The engine name and every setting that changes its outputs, as canonical JSON.

    Computed without creating the engine (the driver of a Ray run may have no GPU), so it
    names the recording file for replay rather than digesting it.
    """
    return json.dumps(
        {
            "engine": engine,
            "model": settings.model,
            "kv_cache_dtype": settings.kv_cache_dtype,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "seed": settings.seed,
            "thinking_token_budget": settings.thinking_token_budget,
            "replay_path": settings.replay_path,
        },
        sort_keys=True,
    )
