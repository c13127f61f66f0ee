"""The per-attempt egress proxy (worker.provider.egress) over its real Unix socket.

Traffic goes only to servers on 127.0.0.1. Names are answered by a table (never DNS), and the
connect step is replaced by one that records the address and refuses anything outside loopback,
so even a wrong policy could not send a packet to 10.0.0.1 or 169.254.169.254.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from forge_ci.egress import EgressLimits, EgressPolicy, IPAddress
from worker.provider.egress import EgressProxy, connect_address

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB

DNS = {
    "pypi.example": ["151.101.0.223"],
    "metadata.example": ["169.254.169.254"],
    "rebind.example": ["151.101.0.223", "10.0.0.1"],
    "localhost": ["127.0.0.1"],
}


class Recorder:
    """Resolution from the table, connections to loopback only: everything else is recorded
    and refused without a packet."""

    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.refused: list[tuple[str, int]] = []
        self.connected: list[tuple[str, int]] = []

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        self.lookups.append(host)
        if host not in DNS:
            raise OSError(f"no such name {host}")
        return [ipaddress.ip_address(a) for a in DNS[host]]

    def connect(self, address: IPAddress, port: int, timeout: float) -> socket.socket:
        if not address.is_loopback:
            self.refused.append((str(address), port))
            raise ConnectionRefusedError("the test refuses every address outside loopback")
        self.connected.append((str(address), port))
        return connect_address(address, port, timeout)


class Origin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    server: Origin
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        self.server.seen.append({"path": self.path, "headers": dict(self.headers.items())})
        body = PAYLOAD if self.path.startswith("/big") else b"hello through the proxy\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[Origin]:
    server = Origin()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A listening socket on loopback that must never see a connection."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    yield listener
    listener.close()


def saw_nothing(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def proxy_for(tmp_path: Path, recorder: Recorder) -> Iterator[Any]:
    proxies: list[EgressProxy] = []

    def make(policy: EgressPolicy, attempt: int = 7) -> EgressProxy:
        path = tmp_path / f"egress-{attempt}.sock"
        proxy = EgressProxy(
            path, attempt, policy, resolve=recorder.resolve, connect=recorder.connect
        ).start()
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.close()


def records_of(proxy: EgressProxy, count: int) -> list[Any]:
    """The proxy's first ``count`` records: a connection's end reaches the job (a half-close
    passed on) a moment before its handler has finished the record."""
    found: list[Any] = []
    deadline = time.monotonic() + 10
    while len(found) < count and time.monotonic() < deadline:
        found += proxy.take_records()
        time.sleep(0.01)
    return sorted(found, key=lambda record: record.sequence)


def exchange(proxy: EgressProxy, head: str, *, then: bytes = b"") -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(proxy.socket_path))
        sock.sendall(head.encode() + then)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_plain_http_and_connect_reach_an_allow_listed_local_server(proxy_for, origin, recorder):
    port = origin.server_port
    proxy = proxy_for(EgressPolicy.parse("allow-list", [f"127.0.0.1:{port}"]))
    answer = exchange(
        proxy,
        f"GET http://127.0.0.1:{port}/small?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"hello through the proxy\n")
    seen = origin.seen[-1]
    assert seen["path"] == "/small?q=1"
    assert "Proxy-Authorization" not in seen["headers"]
    assert seen["headers"]["Connection"] == "close"

    tunnel = exchange(
        proxy,
        f"CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n",
        then=b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert tunnel.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\n")
    assert tunnel.endswith(PAYLOAD)

    records = records_of(proxy, 2)
    assert [(r.method, r.host, r.port, r.address, r.allowed, r.explicit) for r in records] == [
        ("GET", "127.0.0.1", port, "127.0.0.1", True, True),
        ("CONNECT", "localhost", port, "127.0.0.1", True, True),
    ]
    assert "explicitly allow-listed" in records[0].reason
    assert records[1].bytes_in > len(PAYLOAD) and records[1].bytes_out > 0
    assert recorder.connected == [("127.0.0.1", port)] * 2
    assert proxy.take_records() == []


DENIED = [
    # request head, words in the reason
    ("CONNECT 10.0.0.1:443 HTTP/1.1", "private (RFC 1918)"),
    ("CONNECT 172.17.0.1:2375 HTTP/1.1", "private (RFC 1918)"),
    ("CONNECT 192.168.1.1:80 HTTP/1.1", "private (RFC 1918)"),
    ("GET http://169.254.169.254/latest/meta-data/ HTTP/1.1", "link-local (cloud metadata)"),
    ("CONNECT [fd00::1]:443 HTTP/1.1", "unique-local"),
    ("CONNECT [::1]:443 HTTP/1.1", "loopback"),
    ("GET http://metadata.example/ HTTP/1.1", "169.254.169.254 is link-local"),
    ("CONNECT rebind.example:443 HTTP/1.1", "10.0.0.1 is private"),
    ("CONNECT [::ffff:10.0.0.1]:443 HTTP/1.1", "private (RFC 1918) (inside ::ffff:a00:1)"),
]


@pytest.mark.parametrize("mode", ["public", "allow-list"])
def test_non_public_targets_are_refused_before_any_connection(proxy_for, recorder, mode):
    allow = [".example", ":443", ":80", ":2375"] if mode == "allow-list" else []
    proxy = proxy_for(EgressPolicy.parse(mode, allow))
    for head, words in DENIED:
        answer = exchange(proxy, head + "\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 Forbidden"), head
        assert b"X-Forge-CI-Egress: denied" in answer
        assert words.encode() in answer, (head, answer)
    records = records_of(proxy, len(DENIED))
    assert len(records) == len(DENIED)
    assert not any(r.allowed for r in records)
    assert [words in r.reason for r, (_, words) in zip(records, DENIED, strict=True)]
    assert records[-3].address == "169.254.169.254"
    assert recorder.refused == [] and recorder.connected == []


def test_the_checked_address_is_the_one_connected_to(proxy_for, recorder):
    """A public name is allowed; the connect step gets exactly the address that was checked
    (it refuses: no packet leaves), and the name is looked up once."""
    proxy = proxy_for(EgressPolicy())
    answer = exchange(proxy, "CONNECT pypi.example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502")
    assert recorder.lookups == ["pypi.example"]
    assert recorder.refused == [("151.101.0.223", 443)]
    (record,) = records_of(proxy, 1)
    assert not record.allowed and "could not connect" in record.reason


def test_loopback_is_refused_for_real_and_the_listener_sees_nothing(proxy_for, silent, origin):
    port = silent.getsockname()[1]
    proxy = proxy_for(EgressPolicy.parse("allow-list", [f"127.0.0.1:{origin.server_port}"]))
    public = proxy_for(EgressPolicy(), attempt=8)
    for target in (proxy, public):
        for head in (
            f"CONNECT 127.0.0.1:{port} HTTP/1.1",
            f"GET http://localhost:{port}/ HTTP/1.1",
            f"CONNECT [::1]:{origin.server_port} HTTP/1.1",
        ):
            assert exchange(target, head + "\r\n\r\n").startswith(b"HTTP/1.1 403"), head
    assert (
        exchange(public, f"CONNECT 127.0.0.1:{origin.server_port} HTTP/1.1\r\n\r\n")[:12]
        == b"HTTP/1.1 403"
    )
    assert saw_nothing(silent)
    reasons = [r.reason for r in records_of(proxy, 3)]
    assert f"port {port} of 127.0.0.1 (loopback) is not on the allow-list" in reasons[0]
    assert "::1 is loopback: always denied" in reasons[2]


MALFORMED = [
    ("GET /origin-form HTTP/1.1\r\n\r\n", b"400", b"absolute http:// URL"),
    ("CONNECT pypi.example HTTP/1.1\r\n\r\n", b"400", b"host:port"),
    ("GET https://pypi.example/ HTTP/1.1\r\n\r\n", b"400", b"CONNECT host:port"),
    ("GET http://user:pw@pypi.example/ HTTP/1.1\r\n\r\n", b"400", b"credentials"),
    ("CONNECT pypi.example:99999 HTTP/1.1\r\n\r\n", b"400", b"malformed"),
    ("BREW coffee\r\n\r\n", b"400", b"malformed request line"),
    ("GET http://x/ HTTP/1.1\r\nX: " + "y" * 17000 + "\r\n\r\n", b"431", b"over 16384"),
]


def test_malformed_requests_are_refused_and_recorded(proxy_for, recorder):
    proxy = proxy_for(EgressPolicy())
    for head, status, words in MALFORMED:
        answer = exchange(proxy, head)
        assert answer.startswith(b"HTTP/1.1 " + status), head
        assert words in answer, (head, answer)
    assert len(records_of(proxy, len(MALFORMED))) == len(MALFORMED)
    assert recorder.lookups == []


def test_limits_close_connections_with_a_reason_and_other_attempts_go_on(proxy_for, origin):
    port = origin.server_port
    allow = [f"127.0.0.1:{port}"]
    small = EgressLimits(max_connections=3, max_bytes=256 * 1024, idle_seconds=0.4)
    limited = proxy_for(EgressPolicy.parse("allow-list", allow, small))
    other = proxy_for(EgressPolicy.parse("allow-list", allow), attempt=8)

    big = f"GET http://127.0.0.1:{port}/big HTTP/1.1\r\nHost: x\r\n\r\n"
    began = time.monotonic()
    idle = exchange(limited, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")  # then says nothing
    assert idle == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    assert time.monotonic() - began < 5
    cut = exchange(limited, big)
    assert 0 < len(cut) < len(PAYLOAD)
    assert exchange(limited, big).startswith(b"HTTP/1.1 429")  # the bytes are spent
    assert exchange(limited, big).startswith(b"HTTP/1.1 429")  # and now the connections
    assert exchange(other, big).endswith(PAYLOAD)

    records = records_of(limited, 4)
    assert [r.closed for r in records[:2]] == [
        "idle for 0.4 s",
        "byte limit of 262144 per attempt reached",
    ]
    assert all(r.allowed for r in records[:2])
    assert [(r.allowed, r.reason) for r in records[2:]] == [
        (False, "byte limit of 262144 per attempt reached"),
        (False, "connection limit of 3 per attempt reached"),
    ]


def test_the_runner_forwarder_carries_curl_and_urllib_through_the_proxy(proxy_for, origin):
    """The in-job half (worker.runner.egress) in front of the proxy, as steps use it."""
    import os
    import subprocess
    import urllib.request

    from worker.runner.egress import EgressForwarder, proxy_environment

    port = origin.server_port
    proxy = proxy_for(EgressPolicy.parse("allow-list", [f"127.0.0.1:{port}"]))
    forwarder = EgressForwarder(str(proxy.socket_path))
    env = proxy_environment(forwarder.start())
    try:
        assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1"
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({"http": env["http_proxy"]})
        )
        with opener.open(f"http://127.0.0.1:{port}/big", timeout=10) as answer:
            assert answer.read() == PAYLOAD
        curl = subprocess.run(
            [
                "curl",
                "-sS",
                "--noproxy",
                "",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                f"http://127.0.0.1:{port + 0}/small",
                "http://127.0.0.1:1/",
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert curl.stdout.startswith("200"), curl
        assert "403" in curl.stdout
    finally:
        forwarder.close()
    records = records_of(proxy, 3)
    assert [(r.host, r.port, r.allowed) for r in records] == [
        ("127.0.0.1", port, True),
        ("127.0.0.1", port, True),
        ("127.0.0.1", 1, False),
    ]
