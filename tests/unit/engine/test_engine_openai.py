"""The openai engine against a chat completions server this test runs on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from auditor.engine import ChatMessage, ChatRequest, EngineSettings
from auditor.engine.openai_engine import OpenAIEngine
from auditor.errors import EngineUnavailable, UsageError


@dataclass
class Reply:
    """What the fake server answers to one chat completions request."""

    status: int = 200
    body: dict[str, Any] | None = None
    delay_s: float = 0.0


def chat_body(
    content: str | None,
    *,
    reasoning: str | None = None,
    reasoning_key: str = "reasoning",
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message[reasoning_key] = reasoning
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


@dataclass
class ChatServer:
    """Scripted replies (or a responder function); records every request it gets."""

    script: deque[Reply] = field(default_factory=deque)
    responder: Callable[[dict[str, Any]], Reply] | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    models: list[str] = field(default_factory=lambda: ["served-model"])
    roots: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.bodies.append(body)
            if self.responder is not None:
                return self.responder(body)
            if len(self.script) > 1:
                return self.script.popleft()
            return self.script[0]  # the last reply repeats


def _handler(server_state: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", **({"root": server_state.roots[m]} if m in server_state.roots else {})}
                            for m in server_state.models
                        ],
                    },
                )
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            with server_state.lock:
                server_state.headers.append(dict(self.headers))
            reply = server_state.next_reply(body)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._send(reply.status, reply.body or {"error": {"message": "internal failure"}})

    return Handler


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    monkeypatch.delenv("AUDITOR_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    state = ChatServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    httpd.shutdown()
    httpd.server_close()


def engine_for(server: ChatServer, **settings: Any) -> OpenAIEngine:
    return OpenAIEngine(EngineSettings(base_url=server.base_url, **settings), backoff_s=0.01)


def request(
    rid: str = "window-0", *, thinking: bool = True, max_tokens: int = 64, schema: str | None = None
) -> ChatRequest:
    return ChatRequest(
        id=rid,
        messages=(ChatMessage("system", "You are auditor."), ChatMessage("user", f"audit {rid}")),
        prompt_tokens=10,
        max_tokens=max_tokens,
        thinking=thinking,
        json_schema=schema,
    )


def test_reasoning_field_is_split_and_usage_read(server: ChatServer) -> None:
    usage = {"prompt_tokens": 1200, "completion_tokens": 80, "prompt_tokens_details": {"cached_tokens": 1024}}
    server.script.append(Reply(body=chat_body('{"findings": []}', reasoning="trace here", usage=usage)))
    [completion] = engine_for(server).generate([request()])
    assert completion.request_id == "window-0"
    assert completion.reasoning == "trace here"
    assert completion.text == '{"findings": []}'
    assert completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens, completion.cached_prompt_tokens) == (
        1200,
        80,
        1024,
    )
    assert completion.error is None


def test_reasoning_content_field_is_split(server: ChatServer) -> None:
    server.script.append(
        Reply(body=chat_body("answer", reasoning="the trace", reasoning_key="reasoning_content"))
    )
    [completion] = engine_for(server).generate([request()])
    assert (completion.reasoning, completion.text) == ("the trace", "answer")
    assert completion.cached_prompt_tokens is None


def test_inline_think_is_split(server: ChatServer) -> None:
    server.script.append(
        Reply(body=chat_body('checking views.py\n</think>\n\n{"findings": []}', reasoning=None))
    )
    [completion] = engine_for(server).generate([request()])
    assert completion.reasoning == "checking views.py"
    assert completion.text == '{"findings": []}'


def test_inline_trace_cut_off_by_budget_is_not_an_answer(server: ChatServer) -> None:
    server.script.append(Reply(body=chat_body('still drafting {"findings": [', finish_reason="length")))
    [completion] = engine_for(server).generate([request()])
    assert completion.finish_reason == "length"
    assert completion.text == ""
    assert completion.reasoning.startswith("still drafting")


def test_request_body_carries_thinking_budget_schema_and_model(server: ChatServer) -> None:
    server.script.append(Reply(body=chat_body("{}")))
    schema = '{"type": "object", "properties": {"findings": {"type": "array"}}}'
    engine = engine_for(
        server, seed=3, temperature=0.0, top_p=0.9, thinking_token_budget=500, api_key="sekret"
    )
    engine.generate([request("window-0", thinking=True, max_tokens=111, schema=schema)])
    engine.generate([request("window-1", thinking=False, max_tokens=222)])
    on, off = server.bodies
    assert on["model"] == "served-model"  # discovered through GET /models
    assert on["chat_template_kwargs"] == {"enable_thinking": True}
    assert off["chat_template_kwargs"] == {"enable_thinking": False}
    assert (on["max_tokens"], off["max_tokens"]) == (111, 222)
    assert (on["seed"], on["temperature"], on["top_p"]) == (3, 0.0, 0.9)
    assert on["thinking_token_budget"] == 500
    assert "thinking_token_budget" not in off  # no budget when thinking is off
    assert on["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "auditor_answer", "schema": json.loads(schema)},
    }
    assert "response_format" not in off
    assert on["messages"] == [
        {"role": "system", "content": "You are auditor."},
        {"role": "user", "content": "audit window-0"},
    ]
    assert server.headers[0]["Authorization"] == "Bearer sekret"


def test_configured_model_and_env_settings_are_used(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDITOR_BASE_URL", server.base_url + "/")
    monkeypatch.setenv("AUDITOR_API_KEY", "from-env")
    server.script.append(Reply(body=chat_body("{}")))
    engine = OpenAIEngine(EngineSettings(model="nemotron"), backoff_s=0.01)
    engine.generate([request()])
    assert server.bodies[0]["model"] == "nemotron"
    assert server.headers[0]["Authorization"] == "Bearer from-env"
    assert '"model": "nemotron"' in engine.identity()


def test_a_500_is_retried(server: ChatServer) -> None:
    server.script.extend([Reply(status=500), Reply(body=chat_body("ok"))])
    [completion] = engine_for(server).generate([request()])
    assert completion.text == "ok"
    assert completion.error is None
    assert len(server.bodies) == 2


def test_a_500_forever_becomes_an_error_completion(server: ChatServer) -> None:
    server.script.append(Reply(status=500, body={"error": {"message": "engine core died"}}))
    [completion] = engine_for(server, retries=2).generate([request()])
    assert completion.finish_reason == "error"
    assert "HTTP 500" in (completion.error or "")
    assert "engine core died" in (completion.error or "")
    assert completion.text == ""
    assert len(server.bodies) == 3  # one try and two retries


def test_a_client_error_is_not_retried(server: ChatServer) -> None:
    message = "This model's maximum context length is 262144 tokens."
    server.script.append(Reply(status=400, body={"error": {"message": message}}))
    [completion] = engine_for(server).generate([request()])
    assert completion.finish_reason == "error"
    assert message in (completion.error or "")
    assert len(server.bodies) == 1


def test_a_timeout_becomes_an_error_completion_quickly(server: ChatServer) -> None:
    server.script.append(Reply(body=chat_body("too late"), delay_s=3.0))
    started = time.monotonic()
    [completion] = engine_for(server, timeout_s=0.5).generate([request()])
    assert time.monotonic() - started < 2.5
    assert completion.finish_reason == "error"
    assert "no answer within 0.5 s" in (completion.error or "")
    assert len(server.bodies) == 1  # a timeout is not retried


def test_connection_refused_is_engine_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = OpenAIEngine(EngineSettings(base_url=f"http://127.0.0.1:{port}/v1", retries=1), backoff_s=0.01)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="cannot reach"):
        engine.generate([request()])
    assert time.monotonic() - started < 5


def test_results_keep_request_order_under_concurrency(server: ChatServer) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        rid = body["messages"][-1]["content"].removeprefix("audit ")
        # Earlier requests answer later, so completion order is the reverse of request order.
        delay = 0.05 * (4 - int(rid.split("-")[1]))
        return Reply(body=chat_body(f"answer for {rid}"), delay_s=delay)

    server.responder = respond
    progress_events = []
    requests = [request(f"window-{i}") for i in range(5)]
    completions = engine_for(server, max_num_seqs=5).generate(requests, progress=progress_events.append)
    assert [c.request_id for c in completions] == [r.id for r in requests]
    assert [c.text for c in completions] == [f"answer for window-{i}" for i in range(5)]
    assert [e.completed for e in progress_events] == [1, 2, 3, 4, 5]
    assert all(e.stage == "engine" and e.total == 5 for e in progress_events)


def test_no_server_configured_is_engine_unavailable() -> None:
    with pytest.raises(EngineUnavailable, match="--base-url"):
        OpenAIEngine(EngineSettings())


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000/v1", "localhost:8000/v1", "http://[::1", "ftp://host/v1"])
def test_a_malformed_base_url_is_a_usage_error_not_a_traceback(base_url: str) -> None:
    with pytest.raises(UsageError, match="--base-url"):
        OpenAIEngine(EngineSettings(base_url=base_url))


def test_server_listing_no_model_needs_model_flag(server: ChatServer) -> None:
    server.models = []
    with pytest.raises(EngineUnavailable, match="--model"):
        engine_for(server).generate([request()])


def test_answer_without_choices_is_an_error_completion(server: ChatServer) -> None:
    server.script.append(Reply(body={"object": "chat.completion", "choices": []}))
    [completion] = engine_for(server).generate([request()])
    assert completion.finish_reason == "error"
    assert "without choices" in (completion.error or "")


def test_identity_names_the_checkpoint_behind_the_served_name(server: ChatServer) -> None:
    # `vllm serve /ckpt/BF16 --served-model-name model` and the FP8 checkpoint under the same
    # name answer differently: cached results of one must never answer for the other.
    server.models = ["model"]
    server.roots = {"model": "/ckpt/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"}
    bf16 = engine_for(server, model="model").identity()
    server.roots = {"model": "/ckpt/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"}
    fp8 = engine_for(server, model="model").identity()
    discovered = engine_for(server).identity()
    assert bf16 != fp8 and fp8 == discovered
    assert '"checkpoint": "/ckpt/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"' in fp8
