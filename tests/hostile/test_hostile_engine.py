"""Hostile servers and hostile answers: a seeded, deterministic generator of what an
OpenAI-compatible server or a model can send, each case asserting a bounded outcome.

Server side: a raw HTTP server on 127.0.0.1 (its own thread) that drips bytes, stalls,
truncates, floods, nests JSON, answers in the wrong shape or content type, throttles with
odd ``Retry-After`` values, sends content as parts or reasoning in odd places. Every case
must end within the request deadline (plus a little slack) as an error completion naming
its reason, or as the answer the server meant; never a traceback, never a hang.

Answer side: contract-breaking JSON, control and bidi characters, enormous fields and
chains, replayed through `auditor scan`: the window is incomplete (exit 5) rather than
clean, and no report passes raw control characters or grows without bound.

Redirects: every redirect code (301, 302, 303, 307, 308) on both endpoints, to the same
origin or another: the key never reaches another origin, a POST never arrives as a GET, a
refused redirect is named in the error (issue 22 item 7 is the cross-origin 302).

Input classes and their outcomes are tabulated in ``SERVER_CASES`` / ``ANSWER_CASES``
(the class and the expected outcome of each case).
"""

from __future__ import annotations

import _thread
import http.server
import json
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.engine import openai_engine
from auditor.engine.base import ChatMessage, ChatRequest, EngineCancelled, EngineSettings
from auditor.engine.openai_engine import OpenAIEngine
from auditor.errors import ExitCode
from tests.support import (
    ANSWER,
    REPO_ROOT,
    Behaviour,
    Exchange,
    HostileServer,
    chat,
    drip,
    http_response,
    request,
)

SEED = 15
DEADLINE_S = 0.5
# Scheduling slack on a loaded 2-core machine; a hang would overrun this by far.
SLACK_S = 3.0
FIXTURES = REPO_ROOT / "fixtures"
RECORDED = FIXTURES / "recorded"
WINDOW_FLAGS = ("--max-model-len", "65536", "--output-tokens", "4096", "--probes", "0")
RULE = "tx-outside-transaction"

# ---------------------------------------------------------------------------- the server


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


# ---------------------------------------------------------------- behaviours (generated)


def send_then(data: bytes, then: str = "close") -> Behaviour:
    def behave(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(data)
        if then == "stall":
            exchange.stop.wait(30)
        elif then == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return behave


def endless_chunks(interval_s: float) -> Behaviour:
    def behave(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        conn.sendall(b"1\r\n{\r\n")
        while not exchange.stop.is_set():
            conn.sendall(b"1\r\n \r\n")
            time.sleep(interval_s)

    return behave


def flood(total_bytes: int) -> Behaviour:
    def behave(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        chunk = b'{"choices": "' + b"A" * 65536
        sent = 0
        while sent < total_bytes and not exchange.stop.is_set():
            conn.sendall(chunk)
            sent += len(chunk)

    return behave


def fail_first(failures: int, failing: bytes, then: bytes) -> Behaviour:
    def behave(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(failing if exchange.attempt <= failures else then)

    return behave


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


@dataclass(frozen=True)
class ServerCase:
    """One hostile server behaviour: its input class, the behaviour, and the outcome expected:
    ``("error", substring of the error)``, ``("answer", the answer text)`` or
    ``("finish", the finish reason)``."""

    name: str
    input_class: str
    behaviour: Behaviour
    outcome: tuple[str, str]


def server_cases(seed: int) -> list[ServerCase]:
    """The hostile server behaviours, their parameters drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    good = http_response(200, chat(ANSWER))
    depth = rng.randrange(50_000, 200_000)
    interval = rng.uniform(0.05, 0.15)
    deadline = ("error", "no answer within")
    cases = [
        # The deadline: nothing a server does holds a request past it.
        ServerCase("drip-body", "drip-feed", drip(good, interval), deadline),
        ServerCase("drip-headers", "drip-feed", drip(good[:80], interval), deadline),
        ServerCase("stall-after-headers", "drip-feed", send_then(http_response(200, b"", length=500), "stall"), deadline),
        ServerCase("endless-chunked-body", "drip-feed", endless_chunks(interval), deadline),
        ServerCase(
            "retry-after-longer-than-the-deadline",
            "429/5xx odd Retry-After",
            send_then(http_response(503, b"{}", headers={"Retry-After": str(rng.randrange(30, 3600))})),
            ("error", "no time left for a retry"),
        ),
        # Odd Retry-After values are ignored (the backoff decides), then the retry succeeds.
        *(
            ServerCase(
                f"retry-after-{label}",
                "429/5xx odd Retry-After",
                fail_first(1, http_response(status, b'{"error": {"message": "busy"}}', headers={"Retry-After": value}), good),
                ("answer", ANSWER),
            )
            for label, status, value in (
                ("nan", 429, "nan"),
                ("negative", 503, str(-rng.randrange(1, 99))),
                ("http-date", 502, "Wed, 21 Oct 2015 07:28:00 GMT"),
                ("empty", 429, ""),
            )
        ),
        ServerCase(
            "retry-after-overflowing-float", "429/5xx odd Retry-After",
            send_then(http_response(429, b"{}", headers={"Retry-After": "1e400"})), ("error", "no time left for a retry"),
        ),
        # Wrong content types and bytes that are not JSON.
        ServerCase("html-page", "wrong content type", send_then(http_response(200, b"<html><body>502</body></html>", content_type="text/html")), ("error", "invalid JSON")),
        ServerCase("binary-garbage", "wrong content type", send_then(http_response(200, rng.randbytes(512))), ("error", "invalid JSON")),
        ServerCase("invalid-utf8-in-json", "wrong content type", send_then(http_response(200, b'{"choices": "\xff\xfe"}')), ("error", "invalid JSON")),
        ServerCase("empty-200", "wrong content type", send_then(http_response(200, b"")), ("error", "invalid JSON")),
        # Truncated exchanges: retried as transient, then an error naming the connection.
        ServerCase("short-body", "truncated body", send_then(http_response(200, good[-40:], length=4000)), ("error", "connection lost")),
        ServerCase("closed-before-answering", "truncated body", send_then(b""), ("error", "connection")),
        ServerCase("headers-never-finished", "truncated body", send_then(http_response(200, b"", length=100)[:-4]), ("error", "connection lost")),
        ServerCase("reset-mid-body", "truncated body", send_then(http_response(200, b"{\"choi", length=100), "reset"), ("error", "connection")),
        # Huge bodies: refused by their declared size, or cut off at the limit while streaming.
        ServerCase("declared-huge", "huge body", send_then(http_response(200, b"{}", length=10**12), "stall"), ("error", "over the")),
        ServerCase("streamed-huge", "huge body", flood(4 * 1024 * 1024), ("error", "over the")),
        # Nested JSON anywhere in the body, and in an error body.
        ServerCase("nested-usage", "nested JSON", send_then(http_response(200, b'{"choices": [], "usage": ' + nested(depth).encode() + b"}")), ("error", "nested too deeply")),
        ServerCase("nested-objects", "nested JSON", send_then(http_response(200, nested(depth // 4, '{"a":', "}").replace('{"a":}', "{}").encode())), ("error", "invalid JSON")),
        ServerCase("nested-error-body", "nested JSON", send_then(http_response(500, nested(depth).encode())), ("error", "HTTP 500")),
        # Wrong JSON shapes.
        ServerCase("top-level-list", "wrong JSON shape", send_then(http_response(200, b"[1, 2]")), ("error", "not an object")),
        ServerCase("choices-object", "wrong JSON shape", send_then(http_response(200, b'{"choices": {"0": {}}}')), ("error", "without choices")),
        ServerCase("choices-null-item", "wrong JSON shape", send_then(http_response(200, b'{"choices": [null]}')), ("error", "without choices")),
        ServerCase("message-is-a-string", "wrong JSON shape", send_then(http_response(200, chat(None, message="hello"))), ("answer", "")),  # type: ignore[arg-type]
        ServerCase(
            "finish-reason-a-list", "wrong JSON shape",
            send_then(http_response(200, chat(ANSWER, finish_reason=["stop"], extra={"usage": {"prompt_tokens": "3"}}))), ("finish", "unknown"),
        ),
        ServerCase("content-a-number", "wrong JSON shape", send_then(http_response(200, chat(42))), ("answer", "")),
        # Content as parts.
        ServerCase(
            "content-parts-with-an-image", "content as parts",
            send_then(http_response(200, chat([{"type": "text", "text": '{"findings": [], '}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": '"probes": []}'}]))),
            ("answer", ANSWER),
        ),
        ServerCase("content-list-of-strings", "content as parts", send_then(http_response(200, chat(['{"findings": []', ', "probes": []}']))), ("answer", ANSWER)),
        # Reasoning in odd places.
        ServerCase(
            "reasoning-as-parts", "reasoning in odd places",
            send_then(http_response(200, chat(None, message={"content": ANSWER, "reasoning": [{"type": "text", "text": "thought"}]}))), ("answer", ANSWER),
        ),
        ServerCase(
            "reasoning-on-the-choice-inline-trace", "reasoning in odd places",
            send_then(http_response(200, json.dumps({"choices": [{"reasoning": "elsewhere", "message": {"content": "trace</think>" + ANSWER}, "finish_reason": "stop"}]}).encode())),
            ("answer", ANSWER),
        ),
        ServerCase(
            "reasoning-a-number-answer-quotes-think", "reasoning in odd places",
            send_then(http_response(200, chat(None, message={"reasoning": 7, "content": 't</think>{"findings": [], "probes": [{"id": "p", "answer": "</think>"}]}'}))),
            ("answer", '{"findings": [], "probes": [{"id": "p", "answer": "</think>"}]}'),
        ),
    ]
    rng.shuffle(cases)  # the order varies with the seed; each case stands alone
    return cases


SERVER_CASES = server_cases(SEED)


@pytest.fixture
def small_response_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_engine, "MAX_RESPONSE_BYTES", 1024 * 1024)


def engine_for(server: HostileServer, **overrides: Any) -> OpenAIEngine:
    settings = EngineSettings(**{"base_url": server.base_url, "timeout_s": DEADLINE_S, "retries": 2, **overrides})
    return OpenAIEngine(settings, backoff_s=0.05)


@pytest.mark.parametrize("case", SERVER_CASES, ids=[case.name for case in SERVER_CASES])
def test_a_hostile_server_gives_a_bounded_outcome(case: ServerCase, hostile: HostileServer, small_response_limit: None) -> None:
    hostile.behaviour = case.behaviour
    engine = engine_for(hostile)
    engine.model()  # the probe is not part of the chat request's deadline
    started = time.monotonic()
    [completion] = engine.generate([request()])
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE_S + SLACK_S, f"{case.name} held the request {elapsed:.1f} s"
    kind, expected = case.outcome
    if kind == "error":
        assert completion.finish_reason == "error"
        assert expected in (completion.error or ""), completion.error
        assert len(completion.error or "") <= 1_000
    elif kind == "answer":
        assert completion.error is None, completion.error
        assert completion.text == expected
    else:
        assert completion.finish_reason == expected


def test_the_generator_is_deterministic_and_covers_every_server_class() -> None:
    assert [case.name for case in server_cases(SEED)] == [case.name for case in SERVER_CASES]
    assert [case.name for case in server_cases(SEED + 1)] != [case.name for case in SERVER_CASES]
    assert {case.input_class for case in SERVER_CASES} == {
        "drip-feed", "wrong content type", "truncated body", "huge body", "nested JSON", "wrong JSON shape",
        "429/5xx odd Retry-After", "content as parts", "reasoning in odd places",
    }


def test_a_drip_fed_request_among_good_ones_fails_alone(hostile: HostileServer) -> None:
    good = http_response(200, chat(ANSWER))

    def behave(conn: socket.socket, exchange: Exchange) -> None:
        body = json.loads(exchange.body)
        if body["messages"][0]["content"] == "slow":
            drip(good, 0.1)(conn, exchange)
        else:
            conn.sendall(good)

    hostile.behaviour = behave
    requests = [ChatRequest(id=f"window-{n}", messages=(ChatMessage("user", "slow" if n == 1 else "fast"),), prompt_tokens=1, max_tokens=8) for n in range(3)]
    started = time.monotonic()
    completions = engine_for(hostile, max_num_seqs=3).generate(requests)
    assert time.monotonic() - started < DEADLINE_S + SLACK_S
    assert [c.finish_reason for c in completions] == ["stop", "error", "stop"]


# ------------------------------------------------------------------------ interruption


def test_cancel_abandons_requests_in_flight_at_once(hostile: HostileServer) -> None:
    hostile.behaviour = send_then(http_response(200, b"", length=100), "stall")
    engine = engine_for(hostile, timeout_s=60.0, max_num_seqs=2)
    engine.model()
    threading.Timer(0.3, engine.cancel).start()
    started = time.monotonic()
    with pytest.raises(EngineCancelled):
        engine.generate([request(), request()])
    assert time.monotonic() - started < 0.3 + SLACK_S
    with pytest.raises(EngineCancelled):  # a cancelled engine starts nothing new
        engine.generate([request()])


def test_ctrl_c_while_waiting_stops_generate_promptly(hostile: HostileServer) -> None:
    hostile.behaviour = drip(http_response(200, chat(ANSWER)), 0.5)
    engine = engine_for(hostile, timeout_s=60.0)
    engine.model()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.generate([request()])
    finally:
        timer.cancel()
    assert time.monotonic() - started < 0.3 + SLACK_S
    # The worker was released, not left blocked on the socket.
    deadline = time.monotonic() + SLACK_S
    while any(thread.name.startswith("auditor-openai") for thread in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(thread.name.startswith("auditor-openai") for thread in threading.enumerate())


# ------------------------------------------------------------ end to end through `scan`


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    monkeypatch.delenv("AUDITOR_API_KEY", raising=False)


def scan(tokenizer: Path, *args: str, output_format: str = "json") -> tuple[int, str]:
    command = ["scan", str(FIXTURES / "django_shop"), *WINDOW_FLAGS, "--rule", RULE, "--tokenizer", str(tokenizer), "--format", output_format, *args]
    result = CliRunner().invoke(app, command)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


@pytest.mark.parametrize(
    "behaviour_name",
    ["drip-body", "nested-usage", "streamed-huge", "top-level-list"],
)
def test_a_scan_against_a_hostile_server_is_an_incomplete_window_not_a_traceback(
    behaviour_name: str, hostile: HostileServer, tiny_tokenizer_dir: Path, small_response_limit: None
) -> None:
    case = next(case for case in SERVER_CASES if case.name == behaviour_name)
    hostile.behaviour = case.behaviour
    started = time.monotonic()
    code, stdout = scan(tiny_tokenizer_dir, "--engine", "openai", "--base-url", hostile.base_url, "--timeout", "1", "--retries", "1", "--no-static")
    assert time.monotonic() - started < 30
    assert code == ExitCode.INCOMPLETE
    report = json.loads(stdout)
    assert report["complete"] is False
    assert any(error["kind"] == "engine" and case.outcome[1] in error["message"] for error in report["errors"])


# ------------------------------------------------------------------- hostile answers

BASE_FINDING = json.loads((RECORDED / "django_shop" / "clean_json" / "window-0.txt").read_text())["findings"][0]
# C0, DEL, C1 and every Unicode bidi control: none may reach a terminal or a page raw.
UNSAFE = ["\x00", "\x07", "\x1b", "\x08", "\x7f", "\x9b", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f", "\u061c"]
_RAW_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class AnswerCase:
    """One hostile answer: its input class, the answer text and the exit code expected."""

    name: str
    input_class: str
    answer: str
    exit_code: ExitCode


def answer_cases(seed: int) -> list[AnswerCase]:
    """Contract-breaking answers (variants beyond the issue's), drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    finding = dict(BASE_FINDING)
    broken_values: list[Any] = [True, 7, "none", {"0": finding}]
    cases = [
        AnswerCase(f"findings-{type(value).__name__}", "contract-breaking JSON", json.dumps({"findings": value, "probes": []}), ExitCode.INCOMPLETE)
        for value in broken_values
    ]
    wrong_field = rng.choice(["rule", "title", "severity", "explanation"])
    cases += [
        AnswerCase("findings-of-lists", "contract-breaking JSON", json.dumps({"findings": [[], [finding]], "probes": []}), ExitCode.INCOMPLETE),
        AnswerCase(f"{wrong_field}-a-list", "contract-breaking JSON", json.dumps({"findings": [dict(finding, **{wrong_field: ["x"]})], "probes": []}), ExitCode.INCOMPLETE),
        AnswerCase("sink-a-string", "contract-breaking JSON", json.dumps({"findings": [dict(finding, sink="shop/services/orders.py:30")], "probes": []}), ExitCode.INCOMPLETE),
        AnswerCase("probe-id-an-object", "contract-breaking JSON", json.dumps({"findings": [], "probes": [{"id": {"a": 1}, "answer": "x"}]}), ExitCode.INCOMPLETE),
        AnswerCase("probes-a-string", "contract-breaking JSON", json.dumps({"findings": [], "probes": "p-1: 42"}), ExitCode.INCOMPLETE),
        AnswerCase("deeply-nested-answer", "contract-breaking JSON", '{"findings": ' + nested(rng.randrange(20_000, 60_000)) + "}", ExitCode.INCOMPLETE),
        AnswerCase("valid-answer-quoting-think", "reasoning split", "trace</think>" + json.dumps({"findings": [dict(finding, explanation="see </think> here")], "probes": []}), ExitCode.FINDINGS),
    ]
    return cases


ANSWER_CASES = answer_cases(SEED)


def write_recording(tmp_path: Path, answer: str) -> Path:
    recording = tmp_path / "hostile.jsonl"
    text = answer if "</think>" in answer else "a trace</think>" + answer  # thinking is on by default
    recording.write_text(json.dumps({"request_id": "window-0", "text": text, "finish_reason": "stop"}) + "\n", encoding="utf-8")
    return recording


@pytest.mark.parametrize("case", ANSWER_CASES, ids=[case.name for case in ANSWER_CASES])
def test_a_hostile_answer_never_reads_as_a_clean_scan(case: AnswerCase, tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    recording = write_recording(tmp_path, case.answer)
    code, stdout = scan(tiny_tokenizer_dir, "--engine", "replay", "--replay", str(recording), "--no-static", "--error")
    assert code == case.exit_code
    report = json.loads(stdout)
    assert report["complete"] is (case.exit_code != ExitCode.INCOMPLETE)


def test_control_and_bidi_characters_never_reach_text_or_markdown_raw(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    def poisoned(text: str) -> str:
        characters = list(text)
        for character in rng.sample(UNSAFE, len(UNSAFE)):
            characters.insert(rng.randrange(len(characters) + 1), character)
        return "".join(characters)

    finding = dict(BASE_FINDING, title=poisoned(BASE_FINDING["title"]), explanation=poisoned(BASE_FINDING["explanation"]))
    rejected = dict(BASE_FINDING, sink=dict(BASE_FINDING["sink"], path=poisoned("nowhere.py")), title=poisoned("ghost"))
    recording = write_recording(tmp_path, json.dumps({"findings": [finding, rejected], "probes": []}))
    for output_format in ("text", "markdown"):
        code, output = scan(tiny_tokenizer_dir, "--engine", "replay", "--replay", str(recording), "--no-static", output_format=output_format)
        assert code == ExitCode.OK
        assert _RAW_UNSAFE.search(output) is None, output_format
        assert "\\u202e" in output and "\\x1b" in output  # shown, not dropped


def test_enormous_fields_and_chains_are_cut_with_a_marker(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    # Distinct functions: a chain that repeats one is cut to its loop-free path instead.
    steps = [dict(BASE_FINDING["chain"][0], line=n % 90 + 1, function=f"step_{n}") for n in range(12_000)]
    finding = dict(BASE_FINDING, explanation="x" * 3_000_000, chain=[*steps, BASE_FINDING["chain"][-1]])
    recording = write_recording(tmp_path, json.dumps({"findings": [finding], "probes": []}))
    code, stdout = scan(tiny_tokenizer_dir, "--engine", "replay", "--replay", str(recording), "--no-static")
    assert code == ExitCode.OK
    assert len(stdout) < 5_000_000
    [reported] = json.loads(stdout)["findings"]
    assert reported["explanation"].endswith("[truncated: 2,980,000 more characters]")
    assert len(reported["chain"]) == 1_000  # grounding's cap (docs/answer-contract.md)
    assert "11,001 chain steps left out" in reported["chain"][-2]["note"]
    sarif_path = tmp_path / "out.sarif"
    code, _ = scan(tiny_tokenizer_dir, "--engine", "replay", "--replay", str(recording), "--no-static", "--sarif-output", str(sarif_path))
    sarif = sarif_path.read_text(encoding="utf-8")
    assert len(sarif.encode()) <= 10 * 1024 * 1024
    [flow] = json.loads(sarif)["runs"][0]["results"][0]["codeFlows"]
    assert len(flow["threadFlows"][0]["locations"]) <= 10_000


# ---------------------------------------------------------------------------- redirects


class Recorder:
    """An HTTP server that answers each request with ``answer(method, path)`` (status,
    headers, body) and records (method, path, Authorization header, body) of each."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None, bytes]] = []
        self.answer: Callable[[str, str], tuple[int, dict[str, str], bytes]] = lambda method, path: (404, {}, b"{}")
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                owner.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
                status, headers, payload = owner.answer(self.command, self.path)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", "Content-Length": str(len(payload)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def origin(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def two_servers() -> Iterator[tuple[Recorder, Recorder]]:
    first, second = Recorder(), Recorder()
    yield first, second
    first.close()
    second.close()


def redirecting(code: int, target: str, on: str) -> Callable[[str, str], tuple[int, dict[str, str], bytes]]:
    """Redirect requests whose path ends with ``on`` to ``target`` + that path; answer the rest."""

    def answer(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        if path.endswith(on) and not path.startswith("/moved"):
            return code, {"Location": target + path}, b"{}"
        if path.endswith("/models"):
            return 200, {}, json.dumps({"data": [{"id": "m"}]}).encode()
        if method != "POST":
            return 404, {}, b"{}"
        return 200, {}, chat(ANSWER)

    return answer


def test_a_cross_origin_302_is_refused_and_the_key_stays_home(two_servers: tuple[Recorder, Recorder]) -> None:
    home, elsewhere = two_servers
    elsewhere.answer = redirecting(302, elsewhere.origin, "/never")
    home.answer = redirecting(302, elsewhere.origin, "/chat/completions")
    engine = OpenAIEngine(EngineSettings(base_url=home.origin + "/v1", api_key="sk-secret", model="m", timeout_s=5, retries=0))
    [completion] = engine.generate([request()])
    assert completion.finish_reason == "error"
    assert "HTTP 302 redirect of POST" in (completion.error or "") and elsewhere.origin in (completion.error or "")
    assert elsewhere.seen == []
    home.answer = redirecting(302, elsewhere.origin, "/models")
    with pytest.raises(Exception, match="leaves the server's origin"):
        OpenAIEngine(EngineSettings(base_url=home.origin + "/v1", api_key="sk-secret", timeout_s=5, retries=0)).model()
    assert elsewhere.seen == []


# Every redirect code, on both endpoints, to the same origin or another, absolute target:
# the key never reaches another origin, a POST never arrives as a GET, and a refusal names
# the redirect.
REDIRECT_CASES = [
    (code, on, cross)
    for code in (301, 302, 303, 307, 308)
    for on in ("/models", "/chat/completions")
    for cross in (False, True)
]


@pytest.mark.parametrize(("code", "on", "cross"), REDIRECT_CASES, ids=[f"{c}-{o.strip('/').replace('/', '-')}-{'cross' if x else 'same'}" for c, o, x in REDIRECT_CASES])
def test_a_redirect_never_leaks_the_key_nor_drops_the_body(
    code: int, on: str, cross: bool, two_servers: tuple[Recorder, Recorder]
) -> None:
    home, elsewhere = two_servers
    elsewhere.answer = redirecting(code, elsewhere.origin, "/never")
    target = (elsewhere.origin if cross else home.origin) + "/moved"
    home.answer = redirecting(code, target, on)
    settings = EngineSettings(base_url=home.origin + "/v1", api_key="sk-secret", timeout_s=5, retries=0,
                              model=None if on == "/models" else "m")
    engine = OpenAIEngine(settings)
    try:
        engine.model()
        [completion] = engine.generate([request()])
        error = completion.error
    except Exception as failure:  # the /models probe refusing is an EngineUnavailable
        error = str(failure)
    assert all(authorization is None for _, _, authorization, _ in elsewhere.seen)
    assert elsewhere.seen == []
    posts_as_gets = [path for method, path, _, _ in home.seen if path.startswith("/moved") and path.endswith("/chat/completions") and method != "POST"]
    assert posts_as_gets == []
    follows = not cross and (on == "/models" or code in (307, 308))
    if follows:
        assert error is None, error
        assert any(path.startswith("/moved") and auth == "Bearer sk-secret" and (on == "/models" or body)
                   for _, path, auth, body in home.seen)
    else:
        assert error is not None and f"HTTP {code} redirect" in error and "refused" in error


@pytest.mark.parametrize("shape", ["two-step-loop", "self-loop", "loop-back-to-the-entry"])
def test_a_cyclic_chain_loses_its_loops_with_a_note(tiny_tokenizer_dir: Path, tmp_path: Path, shape: str) -> None:
    entry, sink = BASE_FINDING["chain"][0], BASE_FINDING["chain"][-1]
    middle = [dict(entry, function="helper_a"), dict(entry, function="helper_b")]
    body = {
        "two-step-loop": [entry, *middle * 100],  # the 200-step chain of issue 22
        "self-loop": [entry, *[middle[0]] * 200],
        "loop-back-to-the-entry": [*[entry, *middle] * 67],
    }[shape]
    finding = dict(BASE_FINDING, chain=[*body, sink])
    recording = write_recording(tmp_path, json.dumps({"findings": [finding], "probes": []}))
    code, stdout = scan(tiny_tokenizer_dir, "--engine", "replay", "--replay", str(recording), "--no-static")
    assert code == ExitCode.OK
    [reported] = json.loads(stdout)["findings"]
    functions = [(step["path"], step["function"]) for step in reported["chain"]]
    assert len(functions) <= 4 and len(set(functions)) == len(functions), functions
    assert any("a cycle of" in step["note"] for step in reported["chain"])


def test_redirect_variants_relative_scheme_change_and_loops(two_servers: tuple[Recorder, Recorder]) -> None:
    home, _ = two_servers
    settings = EngineSettings(base_url=home.origin + "/v1", api_key="sk-secret", model="m", timeout_s=5, retries=0)

    def answer_with(location: str, code: int = 307) -> Callable[[str, str], tuple[int, dict[str, str], bytes]]:
        def answer(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
            if path == "/v1/chat/completions":
                return code, {"Location": location}, b"{}"
            if path.endswith("/models"):
                return 200, {}, json.dumps({"data": [{"id": "m"}]}).encode()
            return (200, {}, chat(ANSWER)) if method == "POST" else (404, {}, b"{}")
        return answer

    # A relative Location on the same origin keeps the POST and its body.
    home.answer = answer_with("/moved/chat/completions")
    [completion] = OpenAIEngine(settings).generate([request()])
    assert completion.error is None and completion.text == ANSWER
    assert [(m, p, a, bool(b)) for m, p, a, b in home.seen][-1] == ("POST", "/moved/chat/completions", "Bearer sk-secret", True)
    # The same host over https is another origin.
    host, port = home.server.server_address[:2]
    home.answer = answer_with(f"https://{host}:{port}/moved/chat/completions", 308)
    [completion] = OpenAIEngine(settings).generate([request()])
    assert "HTTP 308 redirect" in (completion.error or "") and "leaves the server's origin" in (completion.error or "")
    # A same-origin loop ends as a named redirect error, not a hang.
    home.answer = answer_with("/v1/chat/completions")
    [completion] = OpenAIEngine(settings).generate([request()])
    assert completion.finish_reason == "error" and "redirect" in (completion.error or "")
