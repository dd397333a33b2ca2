"""``auditor doctor --base-url`` pointed at a peer that is not an HTTP server (an SSH daemon),
or one whose body breaks off or nests too deep, says so instead of raising."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from auditor.engine.server_probe import probe_server


@contextmanager
def _peer(answer: bytes) -> Iterator[str]:
    """A TCP server that reads the request and answers ``answer``, then closes."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            try:
                conn.recv(65536)
                conn.sendall(answer)
            except OSError:
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ssh_peer() -> Iterator[str]:
    with _peer(b"SSH-2.0-OpenSSH_9\r\n") as url:
        yield url


@pytest.fixture
def short_body() -> Iterator[str]:
    with _peer(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"data\": [") as url:
        yield url


@pytest.fixture
def deep_json() -> Iterator[str]:
    body = b"[" * 200_000
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with _peer(head + body) as url:
        yield url


def test_an_ssh_daemon_is_not_an_http_server(ssh_peer: str) -> None:
    status = probe_server(ssh_peer, timeout_s=5)
    assert not status.reachable
    assert "not an HTTP server" in status.detail


def test_a_body_that_breaks_off_is_not_a_listing(short_body: str) -> None:
    status = probe_server(short_body, timeout_s=5)
    assert not status.reachable
    assert "not an HTTP server" in status.detail or "not an OpenAI-compatible server" in status.detail


def test_json_nested_past_the_parser_stack_is_not_a_listing(deep_json: str) -> None:
    status = probe_server(deep_json, timeout_s=5)
    assert not status.reachable
    assert "did not answer JSON" in status.detail
