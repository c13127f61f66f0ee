"""Throughput of a download through the job egress path versus direct, all on loopback.

Direct: a client fetches N MiB from an HTTP server on 127.0.0.1. Through the proxy: the same
client, with the job's path in between, as in a job container::

    client ──► runner forwarder (127.0.0.1:<port>, worker.runner.egress)
           ──► egress.sock ──► EgressProxy (worker.provider.egress, allow-list 127.0.0.1:<srv>)
           ──► the server

Both as plain HTTP (absolute URL) and through a CONNECT tunnel, best of ``--rounds``. Goal:
through the proxy at least half of direct. Prints MiB/s and the ratio.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from forge_ci.egress import EgressLimits, EgressPolicy
from worker.provider.egress import EgressProxy
from worker.runner.egress import EgressForwarder

MiB = 1024 * 1024
_BLOCK = bytes(range(256)) * 4096  # 1 MiB


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        size = int(self.path.strip("/") or "1") * MiB
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        left = size
        while left:
            chunk = _BLOCK[: min(left, len(_BLOCK))]
            self.wfile.write(chunk)
            left -= len(chunk)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _fetch(address: tuple[str, int], head: bytes, tunnel: bytes = b"") -> int:
    """Send ``head`` (after a CONNECT ``tunnel`` if given), read the answer to its end."""
    with socket.create_connection(address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tunnel:
            sock.sendall(tunnel)
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
        sock.sendall(head)
        total = 0
        buffer = bytearray(1024 * 1024)
        view = memoryview(buffer)
        while received := sock.recv_into(view):
            total += received
    return total


def _rate(rounds: int, size: int, fetch: Any) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        received = fetch()
        elapsed = time.perf_counter() - began
        assert received >= size * MiB, (received, size)
        best = min(best, elapsed)
    return size / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100, help="download size (default 100)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    origin = ("127.0.0.1", port)
    with tempfile.TemporaryDirectory() as directory:
        policy = EgressPolicy.parse(
            "allow-list", [f"127.0.0.1:{port}"], EgressLimits(max_bytes=2**40)
        )
        proxy = EgressProxy(Path(directory) / "egress.sock", 1, policy).start()
        forwarder = EgressForwarder(str(proxy.socket_path))
        front = ("127.0.0.1", forwarder.start())
        plain = f"GET /{args.mib} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        absolute = f"GET http://127.0.0.1:{port}/{args.mib} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        connect = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        try:
            direct = _rate(args.rounds, args.mib, lambda: _fetch(origin, plain))
            via_http = _rate(args.rounds, args.mib, lambda: _fetch(front, absolute))
            via_tunnel = _rate(args.rounds, args.mib, lambda: _fetch(front, plain, connect))
        finally:
            forwarder.close()
            proxy.close()
            server.shutdown()
            server.server_close()
        records = proxy.take_records()
    print(f"download of {args.mib} MiB on loopback, best of {args.rounds}")
    print(f"  direct                      {direct:8.0f} MiB/s")
    print(f"  proxy, plain HTTP           {via_http:8.0f} MiB/s  ratio {via_http / direct:.2f}")
    print(f"  proxy, CONNECT tunnel       {via_tunnel:8.0f} MiB/s  ratio {via_tunnel / direct:.2f}")
    allowed = all(r.allowed for r in records)
    print(f"  audit records               {len(records):8d} (all allowed: {allowed})")
    goal = min(via_http, via_tunnel) / direct
    print(f"goal: at least 0.50 of direct: {'met' if goal >= 0.5 else 'NOT met'} ({goal:.2f})")


if __name__ == "__main__":
    main()
