"""The per-attempt egress proxy: an HTTP proxy on the attempt's ``egress.sock``.

The job has no network. The runner listens on 127.0.0.1 inside the job and hands each
connection, byte for byte, to this socket in the attempt's socket directory; steps find it
through ``HTTP(S)_PROXY``::

    step ──TCP 127.0.0.1:<port>──► runner ──egress.sock──► EgressProxy ──TCP──► target
                                            resolve host itself ─► policy.decide(every address)
                                            ─► connect to a checked address (never re-resolved)

It speaks two request forms and refuses the rest (400): ``CONNECT host:port`` (HTTPS: the
tunnel is opaque after the 200), and an absolute ``http://host[:port]/path`` request, sent on
in origin form with ``Connection: close`` and the ``Proxy-*`` headers dropped. A denied target
gets ``403`` with the reason in the body and the ``X-Forge-CI-Egress`` header, before any
connection is opened. Every request, allowed or denied, becomes one :class:`ConnectionRecord`;
:meth:`EgressProxy.take_records` hands them to the provider, which sends them to the server's
audit.

Limits (``EgressLimits``): connections per attempt (beyond: 429), bytes per attempt (beyond:
the connection is closed), idle and total time per connection (closed). Each close says why in
its record.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from forge_ci.egress import EgressPolicy, IPAddress, normalize_host
from worker.provider.socket_server import AttemptSocketServer

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
HEAD_SECONDS = 10.0
CONNECT_SECONDS = 10.0
#: Connections of one attempt open at once (each costs two threads here).
MAX_OPEN = 64
_CHUNK = 256 * 1024
_TICK = 1.0

Resolve = Callable[[str, int], Sequence[IPAddress]]
Connect = Callable[[IPAddress, int, float], socket.socket]


def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address of ``host`` (an IP literal is its own answer; no lookup for it)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    return found


def connect_address(address: IPAddress, port: int, timeout: float) -> socket.socket:
    """A TCP connection to exactly this address (a literal: nothing is resolved again)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((str(address), port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


@dataclass
class ConnectionRecord:
    """One request through the proxy, as the audit stores it."""

    sequence: int
    at: datetime
    method: str
    host: str
    port: int
    address: str = ""
    allowed: bool = False
    explicit: bool = False
    reason: str = ""
    #: Why the proxy ended an allowed connection itself (a limit, the attempt's end), if it did.
    closed: str = ""
    bytes_out: int = 0
    bytes_in: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "sequence": self.sequence,
            "at": self.at.isoformat(timespec="milliseconds"),
            "method": self.method,
            "host": self.host,
            "port": self.port,
            "address": self.address,
            "allowed": self.allowed,
            "explicit": self.explicit,
            "reason": self.reason,
            "closed": self.closed,
            "bytes_out": self.bytes_out,
            "bytes_in": self.bytes_in,
            "milliseconds": round(self.seconds * 1000),
        }


class _Refusal(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class _Request:
    method: str
    host: str
    port: int
    #: What goes to the target first: the rewritten head (plain HTTP) or nothing (CONNECT).
    first: bytes = b""
    rest: bytes = b""


@dataclass
class _Budget:
    """What the whole attempt has used, shared by its connections."""

    connections: int = 0
    bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class EgressProxy(AttemptSocketServer):
    """Serves one attempt's ``egress.sock`` until :meth:`close`."""

    kind = "egress"

    def __init__(
        self,
        socket_path: Path,
        attempt_id: int,
        policy: EgressPolicy,
        *,
        resolve: Resolve = resolve_host,
        connect: Connect = connect_address,
    ) -> None:
        super().__init__(socket_path, attempt_id, MAX_OPEN)
        self.policy = policy
        self.resolve = resolve
        self.connect = connect
        self._budget = _Budget()
        self._records: list[ConnectionRecord] = []
        self._sequence = 0

    def take_records(self) -> list[ConnectionRecord]:
        """The records finished since the last call, oldest first."""
        with self._lock:
            records, self._records = self._records, []
        return sorted(records, key=lambda record: record.sequence)

    # -- connections --------------------------------------------------------------------------

    def _busy(self, conn: socket.socket) -> None:
        _answer(conn, 503, f"more than {MAX_OPEN} connections open at once")

    def _new_record(self, method: str, host: str, port: int) -> ConnectionRecord:
        with self._lock:
            self._sequence += 1
            return ConnectionRecord(self._sequence, datetime.now(UTC), method, host, port)

    def _finish(self, record: ConnectionRecord, began: float) -> None:
        record.seconds = time.monotonic() - began
        if not record.allowed:
            log.warning(
                "attempt %s: egress denied: %s %s:%s: %s",
                self.attempt_id,
                record.method,
                record.host,
                record.port,
                record.reason,
            )
        with self._lock:
            self._records.append(record)

    def _handle(self, conn: socket.socket) -> None:
        began = time.monotonic()
        record: ConnectionRecord | None = None
        try:
            try:
                request = _read_request(conn)
            except _Refusal as refusal:
                record = self._new_record("?", "", 0)
                record.reason = refusal.reason
                _answer(conn, refusal.status, refusal.reason)
                return
            except OSError:
                return
            record = self._new_record(request.method, request.host, request.port)
            upstream = self._open(request, record)
            if upstream is None:
                _answer(conn, self._status(record), record.reason)
                return
            with upstream:
                self._relay(conn, upstream, request, record)
        finally:
            # Recorded before the job sees the end of its connection (closed by the caller).
            if record is not None:
                self._finish(record, began)

    @staticmethod
    def _status(record: ConnectionRecord) -> int:
        if "connection limit" in record.reason or "byte limit" in record.reason:
            return 429
        if record.reason.startswith(("could not", "no answer")):
            return 502
        return 403

    def _open(self, request: _Request, record: ConnectionRecord) -> socket.socket | None:
        """Check the limits and the policy, then connect to a checked address; None: refused."""
        limits = self.policy.limits
        with self._budget.lock:
            if self._budget.connections >= limits.max_connections:
                record.reason = f"connection limit of {limits.max_connections} per attempt reached"
                return None
            self._budget.connections += 1
            if self._budget.bytes >= limits.max_bytes:
                record.reason = f"byte limit of {limits.max_bytes} per attempt reached"
                return None
        decision = self.policy.decide_before_lookup(request.host, request.port)
        addresses: Sequence[IPAddress] = ()
        if decision is None:
            try:
                addresses = self.resolve(request.host, request.port)
            except (OSError, UnicodeError) as exc:
                record.reason = f"could not resolve {request.host}: {exc}"
                return None
            decision = self.policy.decide(request.host, request.port, addresses)
        record.reason = decision.reason
        if not decision.allowed:
            if addresses:
                record.address = ", ".join(str(address) for address in addresses)[:200]
            return None
        record.explicit = decision.explicit
        if decision.explicit:
            log.info(
                "attempt %s: egress to a non-public address: %s", self.attempt_id, decision.reason
            )
        failures = []
        for address in addresses:
            try:
                upstream = self.connect(address, request.port, CONNECT_SECONDS)
            except OSError as exc:
                failures.append(f"{address}: {exc}")
                continue
            record.address = str(address)
            record.allowed = True
            return upstream
        record.reason = f"could not connect to {request.host}:{request.port}: " + "; ".join(
            failures
        )
        return None

    def _relay(
        self,
        conn: socket.socket,
        upstream: socket.socket,
        request: _Request,
        record: ConnectionRecord,
    ) -> None:
        if request.method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            upstream.sendall(request.first)
            record.bytes_out += len(request.first)
        if request.rest:
            upstream.sendall(request.rest)
            record.bytes_out += len(request.rest)
        pipe = _Pipe(self, conn, upstream, record, self._closed)
        pipe.run()


class _Pipe:
    """Both directions of one connection, with the attempt's byte budget and the time limits."""

    def __init__(
        self,
        proxy: EgressProxy,
        client: socket.socket,
        target: socket.socket,
        record: ConnectionRecord,
        closed: threading.Event,
    ) -> None:
        self.proxy = proxy
        self.client = client
        self.target = target
        self.record = record
        self.closed = closed
        self.began = time.monotonic()
        self.last = self.began
        self.ended = threading.Event()
        self.why = ""

    def run(self) -> None:
        back = threading.Thread(
            target=self._copy, args=(self.target, self.client, "in"), daemon=True
        )
        back.start()
        self._copy(self.client, self.target, "out")
        back.join()
        if self.why:
            self.record.closed = self.why
            log.warning(
                "attempt %s: egress connection to %s:%s closed: %s",
                self.proxy.attempt_id,
                self.record.host,
                self.record.port,
                self.why,
            )

    def _stop(self, why: str = "") -> None:
        if why and not self.why:
            self.why = why
        if not self.ended.is_set():
            self.ended.set()
            for sock in (self.client, self.target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _copy(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        limits = self.proxy.policy.limits
        budget = self.proxy._budget
        source.settimeout(min(_TICK, limits.idle_seconds / 4))
        try:
            while not self.ended.is_set():
                now = time.monotonic()
                if now - self.began > limits.connection_seconds:
                    return self._stop(f"open longer than {limits.connection_seconds:g} s")
                if now - self.last > limits.idle_seconds:
                    return self._stop(f"idle for {limits.idle_seconds:g} s")
                if self.closed.is_set():
                    return self._stop("the attempt ended")
                try:
                    chunk = source.recv(_CHUNK)
                except TimeoutError:
                    continue
                if not chunk:
                    # Half-close: pass the end on, let the other direction finish.
                    try:
                        sink.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return None
                with budget.lock:
                    budget.bytes += len(chunk)
                    over = budget.bytes > limits.max_bytes
                if over:
                    return self._stop(f"byte limit of {limits.max_bytes} per attempt reached")
                sink.sendall(chunk)
                self.last = time.monotonic()
                if direction == "out":
                    self.record.bytes_out += len(chunk)
                else:
                    self.record.bytes_in += len(chunk)
        except OSError:
            return self._stop()
        return None


def _read_request(conn: socket.socket) -> _Request:
    deadline = time.monotonic() + HEAD_SECONDS
    data = bytearray()
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            raise _Refusal(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Refusal(408, "the request did not arrive in time")
        conn.settimeout(remaining)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            raise _Refusal(408, "the request did not arrive in time") from None
        if not chunk:
            raise OSError("closed before a request")
        data += chunk
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise _Refusal(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _Refusal(400, "a malformed request line") from None
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise _Refusal(400, f"unsupported protocol {version[:20]!r}")
    if method == "CONNECT":
        host, port = _split_authority(target, default_port=None)
        return _Request("CONNECT", host, port, rest=rest)
    if not target.lower().startswith("http://"):
        raise _Refusal(
            400,
            "send CONNECT host:port (HTTPS) or an absolute http:// URL; this is a proxy,"
            f" not {target[:80]!r}",
        )
    remainder = target[len("http://") :]
    cut = min((remainder.find(c) for c in "/?#" if c in remainder), default=len(remainder))
    authority, path = remainder[:cut], remainder[cut:].partition("#")[0]
    if not path.startswith("/"):
        path = "/" + path
    if "@" in authority:
        raise _Refusal(400, "a URL with credentials in it is not forwarded")
    host, port = _split_authority(authority, default_port=80)
    headers = [
        line
        for line in lines[1:]
        if not line.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))
    ]
    first_line = f"{method} {path} {version}".encode("ascii")
    first = b"\r\n".join([first_line, *headers, b"Connection: close"]) + b"\r\n\r\n"
    return _Request(method, host, port, first=first, rest=rest)


def _split_authority(authority: str, *, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        inside, bracket, rest = authority[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise _Refusal(400, f"a malformed target {authority[:80]!r}")
        host, port_text = inside, rest[1:]
    else:
        host, colon, port_text = authority.rpartition(":")
        if not colon:
            host, port_text = authority, ""
    if not port_text:
        if default_port is None:
            raise _Refusal(400, f"CONNECT needs host:port, not {authority[:80]!r}")
        port = default_port
    elif port_text.isdigit() and len(port_text) <= 5:
        port = int(port_text)
    else:
        raise _Refusal(400, f"a malformed port in {authority[:80]!r}")
    host = normalize_host(host)
    if not host or not 1 <= port <= 65535 or any(c in host for c in "/\\ %\t"):
        raise _Refusal(400, f"a malformed target {authority[:80]!r}")
    return host, port


def _answer(conn: socket.socket, status: int, reason: str) -> None:
    titles = {
        400: "Bad Request",
        403: "Forbidden",
        408: "Request Timeout",
        429: "Too Many Requests",
    }
    body = f"forge-ci egress: {reason}\n".encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {titles.get(status, 'Bad Gateway' if status == 502 else 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-Forge-CI-Egress: denied\r\n"
        "Connection: close\r\n\r\n"
    )
    try:
        conn.settimeout(5)
        conn.sendall(head.encode("ascii") + body)
    except OSError:
        pass
