"""Slow-client attacks on a loopback server, for tests and benchmarks (issue #14).

``Trickle`` keeps N connections open from one thread, each sending its request a byte at a time
(or nothing at all), and reconnects whenever the server closes one, as an attacker would. It
only ever connects to the loopback address it is given.
"""

from __future__ import annotations

import ipaddress
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

BEARER = "ab" * 32

#: What each kind of slow client sends: its prefix at once, then its tail one byte at a time.
KINDS: dict[str, tuple[bytes, bytes]] = {
    # A header that never ends.
    "head": (
        b"GET /-/health HTTP/1.1\r\nHost: x\r\n",
        b"X-Slow: " + b"a" * 4000 + b"\r\n",
    ),
    # The red team's: a claim with any bearer value and a 40-byte body, one byte every interval.
    "body": (
        b"POST /-/runner-api/v1/claims HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer " + BEARER.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n",
        b"{" * 40,
    ),
    # Connects and says nothing.
    "idle": (b"", b""),
}


def require_loopback(host: str) -> None:
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"slow clients only attack loopback addresses, not {host}")


@dataclass
class Trickle:
    """``count`` slow connections of ``kind`` to ``host:port``, a byte every ``interval``."""

    host: str
    port: int
    count: int
    kind: str = "body"
    interval: float = 2.0
    opened: int = 0
    closed_by_server: int = 0
    refused: int = 0
    answers: list[bytes] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        require_loopback(self.host)
        if self.kind not in KINDS:
            raise ValueError(f"unknown slow client kind {self.kind!r}")

    def __enter__(self) -> Trickle:
        self._thread = threading.Thread(target=self._run, name=f"trickle-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _connect(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setblocking(False)
        try:
            sock.connect_ex((self.host, self.port))
        except OSError:
            self.refused += 1
            sock.close()
            return
        prefix, tail = KINDS[self.kind]
        state = {"pending": prefix, "tail": tail, "next": time.monotonic()}
        selector.register(sock, selectors.EVENT_READ, state)
        self.opened += 1

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            for _ in range(self.count):
                self._connect(selector)
            while not self._stop.is_set():
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    state = key.data
                    if state["next"] <= now:
                        self._send(key.fileobj, state, now)  # type: ignore[arg-type]
                for key, _ in selector.select(timeout=0.05):
                    sock: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = sock.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if data and len(self.answers) < 64:
                        self.answers.append(data)
                    if not data:
                        selector.unregister(sock)
                        sock.close()
                        self.closed_by_server += 1
                        self._connect(selector)  # an attacker comes straight back
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()

    def _send(self, sock: socket.socket, state: dict[str, object], now: float) -> None:
        pending = state["pending"]
        tail = state["tail"]
        assert isinstance(pending, bytes) and isinstance(tail, bytes)
        if pending:
            chunk, state["pending"] = pending, b""
        elif tail:
            chunk, state["tail"] = tail[:1], tail[1:]
            state["next"] = now + self.interval
        else:
            state["next"] = now + self.interval
            return
        try:
            sock.send(chunk)
        except (BlockingIOError, InterruptedError, OSError):
            pass
