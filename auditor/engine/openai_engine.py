"""The ``openai`` engine: any OpenAI-compatible chat completions server (``vllm serve``).

Inputs: ``ChatRequest`` batches; the server at ``base_url`` (for example
``http://localhost:8000/v1``; ``AUDITOR_BASE_URL``), with ``api_key`` sent as a bearer
token (``AUDITOR_API_KEY``). Outputs: one ``Completion`` per request, in request order.

Each request is one ``POST {base_url}/chat/completions`` with ``chat_template_kwargs:
{"enable_thinking": …}``, ``thinking_token_budget`` when set (a vLLM extension), and
the answer schema as OpenAI's ``response_format: {"type": "json_schema", …}``, which
``vllm serve`` 0.33 turns into its structured-output constraint (applied after the
reasoning when the server runs a reasoning parser) and other compatible servers accept.
Reasoning is read from ``message.reasoning`` (vLLM), ``message.reasoning_content``, or an
inline ``…</think>`` in the content (a server without a reasoning parser).

Failures: the server's model listing is read first (``GET /models``, which also names the served model
when none is configured); if it cannot be reached at all the engine raises
``EngineUnavailable``. Connection errors and HTTP 429/500/502/503/504 are retried with
exponential backoff (honouring ``Retry-After``); a request that still fails, that the
server refuses (other 4xx), or that gets no answer within ``timeout_s`` becomes an error
completion. Timeouts are not retried: the server is still working on the abandoned
request, and a 256K-token prefill legitimately takes minutes, so raise ``timeout_s``.
HTTP goes through the standard library (``urllib.request``), honouring proxy variables.

``timeout_s`` is a wall-clock deadline for the whole request (every attempt and the waits
between them), not a per-read socket timeout: a server that drips a byte a second is cut
off when the deadline passes (a watchdog shuts the request's socket down). Response bodies
over ``MAX_RESPONSE_BYTES`` are refused unread. ``cancel()`` (or a ``KeyboardInterrupt``
in the thread waiting in ``generate``) abandons every request in flight at once: their
sockets are shut down, no retry is started, and ``generate`` raises ``EngineCancelled``
(after Ctrl-C, the ``KeyboardInterrupt`` itself) without caching anything. Any other failure
of one request, whatever the server sent, is an error completion naming it.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from auditor.engine.base import (
    ChatRequest,
    Completion,
    EngineCancelled,
    EngineSettings,
    error_completion,
)
from auditor.engine.reasoning import THINK_CLOSE, split_output, split_reasoning
from auditor.engine.redirects import RedirectRefused, SameOriginRedirects
from auditor.errors import EngineUnavailable, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

logger = logging.getLogger(__name__)

BASE_URL_ENV = "AUDITOR_BASE_URL"
API_KEY_ENV = "AUDITOR_API_KEY"
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
LISTING_TIMEOUT_S = 30.0
MAX_RETRY_AFTER_S = 60.0
ANSWER_SCHEMA_NAME = "auditor_answer"
# A 32,768-token answer with its trace is well under 1 MB; anything near this is not an answer.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
_READ_CHUNK_BYTES = 64 * 1024
# How often the thread waiting in ``generate`` wakes to notice a cancel or a Ctrl-C.
_WAIT_SLICE_S = 0.2


class _Transient(Exception):
    """A failure worth retrying (connection trouble, an overloaded or failing server)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class _Refused(Exception):
    """A failure retrying cannot fix (the server refused the request, a timeout, bad JSON).

    ``status`` is the HTTP status when the server answered with an error, else None.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _Deadline(Exception):
    """The request's wall-clock deadline passed (or the engine was cancelled) mid-exchange."""


class _Guard:
    """The deadline of one request and the sockets it has open.

    A watchdog timer shuts the sockets down when the deadline passes; ``abandon`` does the
    same at once (cancel, Ctrl-C). A blocked read then returns or fails at once, whatever
    the server is doing, so no read outlives the deadline by more than a moment.
    """

    def __init__(self, timeout_s: float, cancelled: threading.Event) -> None:
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.cancelled = cancelled
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(timeout_s, 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise ``_Deadline`` when the request was cancelled or its time is up."""
        if self.cancelled.is_set():
            raise _Deadline("cancelled")
        if self.expired or self.remaining_s() <= 0:
            raise _Deadline(_deadline_message(self.timeout_s))

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            stop = self.expired or self.cancelled.is_set()
        if stop:
            _shut(sock)

    def _expire(self) -> None:
        self.expired = True
        self.abandon()

    def abandon(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        self._timer.cancel()


def _deadline_message(timeout_s: float) -> str:
    return f"no answer within {timeout_s:g} s (a wall-clock deadline; long prefills take minutes: raise the timeout)"


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected


def _guarded_opener(guard: _Guard) -> urllib.request.OpenerDirector:
    """An opener (proxies honoured as by ``urlopen``) whose connections ``guard`` watches,
    following same-origin redirects only (auditor.engine.redirects)."""

    def connection_class(base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        class Guarded(base):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                connect = self._create_connection

                def create_connection(*c_args: Any, **c_kwargs: Any) -> socket.socket:
                    guard.check()
                    sock = connect(*c_args, **c_kwargs)
                    guard.watch(sock)
                    return sock

                self._create_connection = create_connection

            def connect(self) -> None:
                super().connect()
                # HTTPS wraps the raw socket in a TLS one that takes over its descriptor.
                guard.watch(self.sock)

        return Guarded

    http_class = connection_class(http.client.HTTPConnection)
    https_class = connection_class(http.client.HTTPSConnection)

    class GuardedHTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(http_class, req)

    class GuardedHTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(https_class, req, context=self._context)

    return urllib.request.build_opener(GuardedHTTPHandler(), GuardedHTTPSHandler(), SameOriginRedirects())


def _read_body(response: Any, guard: _Guard) -> bytes:
    """The response body, read in chunks against the deadline and ``MAX_RESPONSE_BYTES``."""
    header = response.headers.get("Content-Length") if response.headers else None
    length = int(header) if header is not None and header.strip().isdigit() else None
    if length is not None and length > MAX_RESPONSE_BYTES:
        raise _Refused(f"the server's answer is {length:,} bytes, over the {MAX_RESPONSE_BYTES:,}-byte limit")
    chunks: list[bytes] = []
    size = 0
    while True:
        guard.check()
        chunk = response.read1(_READ_CHUNK_BYTES)
        if not chunk:
            guard.check()  # a socket shut down by the watchdog reads as the end of the body
            body = b"".join(chunks)
            if length is not None and len(body) < length:
                raise http.client.IncompleteRead(body, length - len(body))
            return body
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _Refused(f"the server's answer is over the {MAX_RESPONSE_BYTES:,}-byte limit")
        chunks.append(chunk)


class OpenAIEngine:
    """Sends chat requests to an OpenAI-compatible server, up to ``max_num_seqs`` at a time."""

    name = "openai"

    def __init__(self, settings: EngineSettings, *, backoff_s: float = 1.0) -> None:
        """Resolve the server's address; raise ``EngineUnavailable`` when none is configured
        and ``UsageError`` when it is not an http(s) URL.

        ``backoff_s`` is the first retry delay; each further retry doubles it.
        """
        base_url = settings.base_url or os.environ.get(BASE_URL_ENV)
        if not base_url:
            raise EngineUnavailable(
                "the openai engine needs a server: pass --base-url "
                f"(e.g. http://localhost:8000/v1) or set {BASE_URL_ENV}"
            )
        try:
            parsed = urllib.parse.urlsplit(base_url)
        except ValueError as exc:
            raise UsageError(f"--base-url {base_url!r} is not a valid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(
                f"--base-url {base_url!r} is not an http(s) URL (e.g. http://localhost:8000/v1)"
            )
        self.settings = settings
        self.base_url = base_url.rstrip("/")
        self.api_key = settings.api_key or os.environ.get(API_KEY_ENV)
        self.backoff_s = backoff_s
        self._model: str | None = None
        self._checkpoint: str | None = None
        self._cancelled = threading.Event()
        self._guards: set[_Guard] = set()
        self._guards_lock = threading.Lock()

    def cancel(self) -> None:
        """Abandon every request in flight now and start no more (safe from any thread).

        ``generate`` then raises ``EngineCancelled``; the engine stays cancelled.
        """
        self._cancelled.set()
        with self._guards_lock:
            guards = list(self._guards)
        for guard in guards:
            guard.abandon()

    def identity(self) -> str:
        """Served model, the checkpoint behind it and sampling settings as canonical JSON.

        Reads the server's model listing. ``checkpoint`` is the model listing's ``root`` (vLLM names the
        weights it serves there), so two servers that serve different weights under one
        ``--served-model-name`` never share cached results.
        """
        model = self.model()
        return json.dumps(
            {
                "engine": self.name,
                "model": model,
                "checkpoint": self._checkpoint,
                "temperature": self.settings.temperature,
                "top_p": self.settings.top_p,
                "seed": self.settings.seed,
                "thinking_token_budget": self.settings.thinking_token_budget,
            },
            sort_keys=True,
        )

    def model(self) -> str:
        """The model name sent with each request: the configured one, else the server's first.

        Reads the server's model listing once; raises ``EngineUnavailable`` when it cannot be reached,
        rejects the API key, or (with no model configured) lists no model.
        """
        if self._model is None:
            self._model = self._list_models()
        return self._model

    def _list_models(self) -> str:
        """``GET /models``: check the server answers and name the model to use."""
        timeout_s = min(self.settings.timeout_s, LISTING_TIMEOUT_S)
        url = f"{self.base_url}/models"
        try:
            listing = self._with_retries(lambda guard: self._call("GET", url, None, guard), timeout_s)
        except _Deadline as exc:
            if self._cancelled.is_set():
                raise EngineCancelled("the openai engine was cancelled") from exc
            raise EngineUnavailable(f"the server at {self.base_url} did not answer: {exc}") from exc
        except _Transient as exc:
            raise EngineUnavailable(
                f"cannot reach the OpenAI-compatible server at {self.base_url}: {exc} "
                "(is `vllm serve` running and --base-url right?)"
            ) from exc
        except _Refused as exc:
            # A server that answers but has no model listing (404, 405) is usable when the
            # model is named; a rejected key, a hang or garbage is not.
            if self.settings.model and exc.status is not None and exc.status not in (401, 403):
                return self.settings.model
            raise EngineUnavailable(
                f"the server at {self.base_url} refused to list its models: {exc}"
            ) from exc
        models = listing.get("data")
        entries = [_object(entry) for entry in models] if isinstance(models, list) else []
        for entry in entries:
            model_id = entry.get("id")
            if isinstance(model_id, str) and model_id and model_id == (self.settings.model or model_id):
                root = entry.get("root")
                self._checkpoint = root if isinstance(root, str) and root else None
                return model_id
        if self.settings.model:
            return self.settings.model
        raise EngineUnavailable(
            f"the server at {self.base_url} lists no model; pass --model with the served name"
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _call(self, method: str, url: str, body: dict[str, Any] | None, guard: _Guard) -> dict[str, Any]:
        """One HTTP exchange within ``guard``'s deadline, its failures sorted into
        ``_Transient``, ``_Refused`` and ``_Deadline``."""
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers())
        guard.check()
        try:
            # The socket timeout only bounds one blocked read; the guard bounds the whole exchange.
            with _guarded_opener(guard).open(request, timeout=max(guard.remaining_s(), 0.001)) as response:
                raw = _read_body(response, guard)
        except urllib.error.HTTPError as exc:
            guard.check()
            detail = _error_detail(exc)
            if exc.code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {exc.code}: {detail}", _retry_after_s(exc)) from exc
            if 300 <= exc.code < 400:
                location = exc.headers.get("Location") if exc.headers is not None else None
                detail = f"a redirect auditor does not follow (Location: {location or 'none'}): {detail}"
            raise _Refused(f"HTTP {exc.code}: {detail}", exc.code) from exc
        except (_Refused, _Deadline):
            raise
        except RedirectRefused as exc:
            raise _Refused(str(exc)) from exc
        except (urllib.error.URLError, TimeoutError, http.client.HTTPException, OSError) as exc:
            guard.check()  # a socket shut down at the deadline surfaces as any of these
            if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
                raise _Deadline(_deadline_message(guard.timeout_s)) from exc
            if isinstance(exc, urllib.error.URLError):
                raise _Transient(f"connection failed: {exc.reason}") from exc
            raise _Transient(f"connection lost: {exc!r}") from exc
        guard.check()
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the decoder allows.
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise _Refused(f"the server answered with invalid JSON: {reason}") from exc
        if not isinstance(payload, dict):
            raise _Refused("the server answered with JSON that is not an object")
        return payload

    def _with_retries(self, attempt: Callable[[_Guard], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
        """Run ``attempt`` until it succeeds, retrying ``_Transient`` failures with backoff,
        all within one ``timeout_s`` deadline (``_Deadline`` when it passes or on cancel)."""
        guard = _Guard(timeout_s, self._cancelled)
        with self._guards_lock:
            self._guards.add(guard)
        try:
            failure: _Transient | None = None
            for number in range(self.settings.retries + 1):
                if failure is not None:
                    delay = self.backoff_s * 2 ** (number - 1)
                    if failure.retry_after_s is not None:
                        delay = max(delay, failure.retry_after_s)
                    if delay >= guard.remaining_s():
                        raise _Transient(f"{failure} (no time left for a retry before the {timeout_s:g} s deadline)")
                    logger.info("retrying in %.1f s after: %s", delay, failure)
                    if self._cancelled.wait(delay):
                        raise _Deadline("cancelled")
                try:
                    return attempt(guard)
                except _Transient as exc:
                    failure = exc
            assert failure is not None
            attempts = self.settings.retries + 1
            raise _Transient(f"{failure} (after {attempts} attempt{'s' if attempts > 1 else ''})")
        finally:
            guard.close()
            with self._guards_lock:
                self._guards.discard(guard)

    def request_body(self, request: ChatRequest, model: str) -> dict[str, Any]:
        """The JSON body of ``POST /chat/completions`` for ``request``."""
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": self.settings.temperature,
            "top_p": self.settings.top_p,
            "seed": self.settings.seed,
            "chat_template_kwargs": {"enable_thinking": request.thinking},
        }
        if self.settings.thinking_token_budget is not None and request.thinking:
            body["thinking_token_budget"] = self.settings.thinking_token_budget
        if request.json_schema is not None:
            try:
                schema = json.loads(request.json_schema)
            except ValueError as exc:
                raise UsageError(f"the answer schema is not valid JSON: {exc}") from exc
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": ANSWER_SCHEMA_NAME, "schema": schema},
            }
        return body

    def _complete(self, request: ChatRequest, model: str) -> Completion:
        """One request through retries; every failure becomes an error completion."""
        url = f"{self.base_url}/chat/completions"
        body = self.request_body(request, model)
        try:
            payload = self._with_retries(lambda guard: self._call("POST", url, body, guard), self.settings.timeout_s)
            return _completion(request, payload)
        except (_Transient, _Refused, _Deadline) as exc:
            return error_completion(request, str(exc))
        except Exception as exc:  # noqa: BLE001 - whatever the server sent, one window fails, not the scan
            logger.debug("request %s failed", request.id, exc_info=True)
            return error_completion(request, f"the server's answer could not be read ({type(exc).__name__}: {exc})"[:500])

    def generate(
        self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress
    ) -> list[Completion]:
        """Complete every request, concurrently up to ``max_num_seqs``, in request order.

        Raises ``EngineUnavailable`` when the server cannot be reached at all.
        """
        if not requests:
            return []
        if self._cancelled.is_set():
            raise EngineCancelled("the openai engine was cancelled")
        model = self.model()
        total = len(requests)
        results: dict[int, Completion] = {}
        workers = max(1, min(self.settings.max_num_seqs, total))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="auditor-openai")
        try:
            pending = {pool.submit(self._complete, request, model): index for index, request in enumerate(requests)}
            while pending:
                # Short waits, so a Ctrl-C in this thread (or a cancel) is acted on at once.
                done, _ = wait(pending, timeout=_WAIT_SLICE_S, return_when=FIRST_COMPLETED)
                if self._cancelled.is_set():
                    raise EngineCancelled("the openai engine was cancelled; requests in flight were abandoned")
                for future in done:
                    results[pending.pop(future)] = future.result()
                    progress(ProgressEvent(stage="engine", completed=len(results), total=total))
        except BaseException:
            self.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return [results[index] for index in range(total)]


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The server's error message from an HTTP error response, shortened."""
    try:
        raw = exc.read(_READ_CHUNK_BYTES).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException):
        raw = ""
    message = raw
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("message"))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str):
            message = error
    message = " ".join(message.split()) or str(exc.reason)
    return message[:500]


def _retry_after_s(exc: urllib.error.HTTPError) -> float | None:
    """The server's ``Retry-After`` in seconds (capped), when given as a number."""
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date, or garbage: the backoff decides
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _content_text(value: Any) -> str:
    """Message text sent as a string or as a list of parts (``[{"type": "text", "text": …}]``);
    parts that carry no text (images, refusals in another shape) are skipped."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in ("text", "output_text"):
                texts.append(_text(part.get("text")))
        return "".join(texts)
    return ""


def _completion(request: ChatRequest, payload: dict[str, Any]) -> Completion:
    """A ``Completion`` from a chat completions response body."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return error_completion(request, "the server answered without choices")
    choice: dict[str, Any] = choices[0]
    message = _object(choice.get("message"))
    content = _content_text(message.get("content"))
    finish_reason = _text(choice.get("finish_reason")) or "unknown"
    split_trace = _content_text(message.get("reasoning")) or _content_text(message.get("reasoning_content"))
    if split_trace:
        reasoning, answer = split_trace.strip(), content.strip()
    elif finish_reason == "length" or THINK_CLOSE in content:
        reasoning, answer = split_output(content, thinking=request.thinking, finish_reason=finish_reason)
    else:
        # A server running a reasoning parser sends an empty trace and the answer alone
        # when the model closed its trace at once; an unclosed trace arrives in ``reasoning``.
        reasoning, answer = split_reasoning(content)
    usage = _object(payload.get("usage"))
    prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
    return Completion(
        request_id=request.id,
        text=answer,
        reasoning=reasoning,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens if prompt_tokens is not None else request.prompt_tokens,
        completion_tokens=_int_or_none(usage.get("completion_tokens")) or 0,
        cached_prompt_tokens=_int_or_none(_object(usage.get("prompt_tokens_details")).get("cached_tokens")),
    )
