"""The per-attempt relay: what it forwards to the server, unchanged, and everything it refuses.

The "server" is a real HTTP server on 127.0.0.1 that records what reaches it; the "job" talks
HTTP/1.1 over the relay's Unix socket, as the runner does.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from worker.provider.relay import Relay
from worker.provider.socket_dirs import api_socket_path, make_socket_dir
from worker.provider.socket_server import MAX_SOCKET_PATH
from worker.provider.upstream import Server

ATTEMPT = 42
TOKEN = "ab" * 32
PREFIX = f"/-/runner-api/v1/attempts/{ATTEMPT}"


class Upstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[dict[str, Any]] = []
        self.big = b""


class _Handler(BaseHTTPRequestHandler):
    server: Upstream

    def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append(
            {"path": self.path, "headers": dict(self.headers.items()), "body": body}
        )
        if self.path.endswith(".tar"):
            payload = self.server.big
            content_type = "application/x-tar"
        elif self.path.endswith("/logs"):
            payload = json.dumps({"version": 1, "error": {"code": "x", "message": "no"}}).encode()
            self.send_response(409)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        else:
            payload = json.dumps({"echo": body.decode()}).encode()
            content_type = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Internal", "not for jobs")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def relay(upstream: Upstream, tmp_path: Path) -> Iterator[Relay]:
    socket_dir = make_socket_dir(tmp_path / "sockets", str(ATTEMPT))
    server = Server("http", "127.0.0.1", upstream.server_address[1])
    with Relay(api_socket_path(socket_dir), server, ATTEMPT) as running:
        yield running


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(self.path))


def post(
    relay: Relay, path: str, body: bytes = b"{}", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = UnixConnection(relay.socket_path)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def raw(relay: Relay, data: bytes, *, pause: float = 0.0) -> bytes:
    """Send raw bytes (then optionally wait) and return everything the relay answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(15)
        sock.connect(str(relay.socket_path))
        sock.sendall(data)
        if pause:
            time.sleep(pause)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_attempt_endpoints_are_forwarded_unchanged(relay: Relay, upstream: Upstream) -> None:
    for action in ("start", "heartbeat", "steps", "logs", "complete"):
        body = json.dumps({"version": 1, "action": action}).encode()
        status, headers, answer = post(relay, f"{PREFIX}/{action}", body)
        if action == "logs":
            assert status == 409  # errors come back as the server sent them
            assert json.loads(answer)["error"]["code"] == "x"
            continue
        assert status == 200
        assert json.loads(answer) == {"echo": body.decode()}
        assert headers["Cache-Control"] == "no-store"
        assert "X-Internal" not in headers
    assert [r["path"] for r in upstream.received] == [
        f"{PREFIX}/{a}" for a in ("start", "heartbeat", "steps", "logs", "complete")
    ]
    for request in upstream.received:
        sent = {name.lower(): value for name, value in request["headers"].items()}
        # Only the runner's own credential travels; nothing is added, nothing else passes.
        assert sent["authorization"] == f"Bearer {TOKEN}"
        assert set(sent) <= {"authorization", "content-type", "content-length", "host"}


def test_the_source_archive_is_streamed_back(relay: Relay, upstream: Upstream) -> None:
    upstream.big = bytes(range(256)) * 16384  # 4 MiB
    status, headers, answer = post(relay, f"{PREFIX}/source.tar")
    assert status == 200
    assert headers["Content-Type"] == "application/x-tar"
    assert answer == upstream.big


def test_action_archives_of_this_attempt_are_streamed_back(
    relay: Relay, upstream: Upstream
) -> None:
    upstream.big = b"action tree" * 1000
    status, headers, answer = post(relay, f"{PREFIX}/actions/3.tar")
    assert (status, headers["Content-Type"], answer) == (200, "application/x-tar", upstream.big)
    assert upstream.received[-1]["path"] == f"{PREFIX}/actions/3.tar"


def test_a_request_without_credential_goes_without_one(relay: Relay, upstream: Upstream) -> None:
    data = (
        f"POST {PREFIX}/start HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()
    assert raw(relay, data).startswith(b"HTTP/1.1 200 ")
    sent = {name.lower() for name in upstream.received[-1]["headers"]}
    assert "authorization" not in sent


@pytest.mark.parametrize(
    "path",
    [
        "/-/runner-api/v1/claims",
        "/-/runner-api/v1/attempts/41/start",
        "/-/runner-api/v1/attempts/420/start",
        f"{PREFIX}/start?x=1",
        f"{PREFIX}/start/",
        f"{PREFIX}/../41/start",
        f"{PREFIX}/unknown",
        f"{PREFIX}/actions/x.tar",
        f"{PREFIX}/actions/.tar",
        f"{PREFIX}/actions/1234567.tar",
        f"{PREFIX}/actions/1.tar?x",
        f"{PREFIX}/actions/../source.tar",
        "/-/runner-api/v1/attempts/41/actions/0.tar",
        "/-/health",
        "/demo/hello",
        "http://127.0.0.1/-/runner-api/v1/claims",
    ],
)
def test_everything_but_this_attempts_endpoints_is_refused(
    relay: Relay, upstream: Upstream, path: str
) -> None:
    status, _, answer = post(relay, path)
    assert status == 403
    error = json.loads(answer)["error"]
    assert error["code"] == "not_relayed"
    assert "attempt 42" in error["message"]
    assert upstream.received == []
    assert relay.refused == 1


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (f"GET {PREFIX}/start HTTP/1.1\r\n\r\n", 405, "method_not_allowed"),
        (f"PUT {PREFIX}/start HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405, "method_not_allowed"),
        (
            f"POST {PREFIX}/start HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "length_required",
        ),
        (f"POST {PREFIX}/start HTTP/1.1\r\n\r\n", 411, "length_required"),
        (
            f"POST {PREFIX}/start HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{{}}",
            400,
            "invalid_request",
        ),
        (f"POST {PREFIX}/start HTTP/1.1\r\nContent-Length: 70000\r\n\r\n", 413, "body_too_large"),
        (f"POST {PREFIX}/start HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 411, "length_required"),
        (f"POST {PREFIX}/start HTTP/1.1\r\nBad Header\r\n\r\n", 400, "invalid_request"),
        (f"POST {PREFIX}/start HTTP/2.0\r\n\r\n", 400, "invalid_request"),
        ("POST  HTTP/1.1\r\n\r\n", 403, "not_relayed"),
        ("POST /a /b HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    ],
)
def test_malformed_or_smuggling_requests_are_refused(
    relay: Relay, upstream: Upstream, request_bytes: str, status: int, code: str
) -> None:
    answer = raw(relay, request_bytes.encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode())
    assert json.loads(body)["error"]["code"] == code
    assert upstream.received == []


def test_a_huge_head_is_refused(relay: Relay, upstream: Upstream) -> None:
    data = f"POST {PREFIX}/start HTTP/1.1\r\nX-Pad: {'a' * 20000}\r\n\r\n".encode()
    assert raw(relay, data).startswith(b"HTTP/1.1 400 ")
    assert upstream.received == []


def test_a_server_that_does_not_answer_is_a_502(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    socket_dir = make_socket_dir(tmp_path / "sockets", str(ATTEMPT))
    with Relay(api_socket_path(socket_dir), Server("http", "127.0.0.1", port), ATTEMPT) as relay:
        status, _, answer = post(relay, f"{PREFIX}/heartbeat")
    assert status == 502  # the runner sends the same request again
    assert json.loads(answer)["error"]["code"] == "upstream_unavailable"


def test_a_closed_relay_accepts_nothing(relay: Relay) -> None:
    relay.close()
    with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(relay.socket_path))


def test_a_socket_directory_deeper_than_a_unix_socket_path_still_serves(
    upstream: Upstream, tmp_path: Path
) -> None:
    deep = tmp_path.joinpath(*["a-rather-long-data-directory"] * 4, "sockets")
    socket_dir = make_socket_dir(deep, str(ATTEMPT))
    path = api_socket_path(socket_dir)
    assert len(os.fsencode(path)) > MAX_SOCKET_PATH
    with pytest.raises(OSError, match="too long"), socket.socket(socket.AF_UNIX) as plain:
        plain.bind(str(path))  # what the provider did: every job of a deep data dir failed
    server = Server("http", "127.0.0.1", upstream.server_address[1])
    with Relay(path, server, ATTEMPT):
        assert stat.S_ISSOCK(os.lstat(path).st_mode)  # the socket is where the job's mount is
        directory = os.open(socket_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:  # a client with the same limit reaches it through the same kind of alias
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(f"/proc/self/fd/{directory}/{path.name}")
                body = b"{}"
                sock.sendall(
                    f"POST {PREFIX}/heartbeat HTTP/1.1\r\nHost: localhost\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
        finally:
            os.close(directory)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert upstream.received[-1]["path"] == f"{PREFIX}/heartbeat"
