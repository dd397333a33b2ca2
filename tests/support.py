"""Test doubles shared by the suite: a mock engine tests script (llm's MockModel: say what the
model answers, then assert what auditor did with it) and one way to run git."""

from __future__ import annotations

import subprocess
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from auditor.engine.base import ChatRequest, Completion, error_completion
from auditor.progress import ProgressCallback, no_progress


class Failure(str):
    """An answer that is an engine error with this message (e.g. a lost GPU worker)."""


Answer = str | Callable[[ChatRequest], str]


class MockEngine:
    """An engine whose answers a test states: ``enqueue`` answers (text, or a function of the
    request) taken in order, else ``default``; ``fail`` makes every request an error
    completion (an answer of type ``Failure`` fails just its request); ``history`` keeps
    every request and ``calls`` the size of every batch."""

    def __init__(self, default: Answer = '{"findings": []}', *, name: str = "mock", identity: str = "mock:model",
                 fail: str | None = None, completion_tokens: int = 7) -> None:
        self.name = name
        self._identity = identity
        self.default = default
        self.fail = fail
        self.completion_tokens = completion_tokens
        self._queue: deque[Answer] = deque()
        self.history: list[ChatRequest] = []
        self.calls: list[int] = []

    def enqueue(self, *answers: Answer) -> "MockEngine":
        """Answer the next requests with ``answers``, in order."""
        self._queue.extend(answers)
        return self

    def identity(self) -> str:
        return self._identity

    def generate(self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress) -> list[Completion]:
        self.calls.append(len(requests))
        completions = []
        for request in requests:
            self.history.append(request)
            if self.fail is not None:
                completions.append(error_completion(request, self.fail))
                continue
            answer = self._queue.popleft() if self._queue else self.default
            text = answer(request) if callable(answer) else answer
            if isinstance(text, Failure):
                completions.append(error_completion(request, str(text)))
                continue
            completions.append(Completion(request.id, text, "", "stop", request.prompt_tokens, self.completion_tokens))
        return completions


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and default branch; its stdout, stripped."""
    completed = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main",
         "-c", "commit.gpgsign=false", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    )
    return completed.stdout.strip()
