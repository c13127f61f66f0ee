"""gunicorn's gthread worker, with whole requests read by the event loop before a thread sees them.

Why (issue #14, finding 1): gthread hands a connection to a thread as soon as its first byte
arrives, and that thread then reads the rest with blocking ``recv`` calls. 64 clients trickling a
header or a body one byte every 2 s held every thread, so ``/-/health`` failed and running jobs
were lost because their heartbeats could not get in. Here the worker's one event-loop thread
reads each request, without blocking, until its head and its whole ``Content-Length`` body are
buffered, and only then gives it to a thread, which parses it from memory:

    accept ──► intake (event loop: non-blocking reads, deadline, limits) ──► thread pool
                  │ incomplete after the deadline: 408, closed                 │ parses the
                  │ too many incomplete from one source / in all: oldest closed │ buffered bytes,
                  │ bad framing: 400/411/413/431 JSON, closed                   │ never the socket
                  ▼                                                            ▼
                closed                                       response (sends bounded by a timeout)
                                                             ──► keep-alive: back to intake

* A request must be complete within ``HEAD_SECONDS`` plus the time its body takes at
  ``MIN_BODY_RATE`` bytes a second: a whole-request deadline, not a per-``recv`` one.
* Incomplete requests are what an unauthenticated client can hold: at most ``PER_SOURCE`` per
  address and ``MAX_INCOMPLETE`` per worker process (and ``MAX_BUFFERED`` bytes). Over a bound
  the oldest incomplete request goes: a real client's request completes in milliseconds, so it
  is never the oldest.
* Threads never wait for a client to send. A send waits at most ``SEND_SECONDS``.

The refusals here are JSON with ``Cache-Control: no-store``, like the runner API's own errors.
"""

from __future__ import annotations

import errno
import re
import selectors
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

from forge_ci import protocol

HEAD_SECONDS = 10.0
MIN_BODY_RATE = 64 * 1024
SEND_SECONDS = 30.0
MAX_HEAD = 32 * 1024
#: A little over the application's MAX_CONTENT_LENGTH, so the application's own 413 still speaks.
MAX_BODY = 1024 * 1024 + 64 * 1024
MAX_INCOMPLETE = 512
PER_SOURCE = 128
MAX_BUFFERED = 64 * 1024 * 1024

_DIGITS = re.compile(rb"[0-9]{1,10}")
_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    503: "Service Unavailable",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
}


class Refused(Exception):
    """A request the intake answers itself, then closes."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


_CROWDED = Refused(
    503, "too_many_incomplete", "too many incomplete requests; this, the oldest, was closed"
)


def request_size(buffer: bytes | bytearray) -> int | None:
    """The size of the first request in ``buffer`` once all of it is there, else ``None``.

    Raises :class:`Refused` for framing the server will not accept.
    """
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise Refused(431, "head_too_large", f"request heads are at most {MAX_HEAD} bytes")
        return None
    head_size = end + 4
    if head_size > MAX_HEAD:
        raise Refused(431, "head_too_large", f"request heads are at most {MAX_HEAD} bytes")
    return head_size + body_length(bytes(buffer[:end]))


def body_length(head: bytes) -> int:
    """The body length a request head declares (0 without Content-Length)."""
    lengths: set[bytes] = set()
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            raise Refused(400, "bad_header", "a header line has no ':'")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            raise Refused(411, "length_required", "send the body with a Content-Length")
        if name == b"content-length":
            lengths.add(value.strip())
    if not lengths:
        return 0
    if len(lengths) > 1:
        raise Refused(400, "bad_content_length", "the Content-Length headers disagree")
    (value,) = lengths
    if not _DIGITS.fullmatch(value):
        raise Refused(400, "bad_content_length", "Content-Length must be a decimal byte count")
    length = int(value)
    if length > MAX_BODY:
        raise Refused(413, "too_large", f"request bodies are at most {MAX_BODY} bytes")
    return length


def deadline_for(started: float, body: int) -> float:
    return started + HEAD_SECONDS + body / MIN_BODY_RATE


def refusal(status: int, code: str, message: str) -> bytes:
    body = protocol.dumps(protocol.error_body(code, message))
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Replay:
    """The client socket as the request parser sees it: the buffered request, then end of data."""

    def __init__(self, raw: socket.socket, data: bytes) -> None:
        self.raw = raw
        self._data = memoryview(data)

    def recv(self, size: int, flags: int = 0) -> bytes:
        chunk = bytes(self._data[:size])
        self._data = self._data[len(chunk) :]
        return chunk

    def setblocking(self, flag: bool) -> None:
        # Blocking, for the thread that answers: sends wait, but never for long.
        if flag:
            self.raw.settimeout(SEND_SECONDS)
        else:
            self.raw.setblocking(False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


@dataclass
class _Intake:
    started: float
    source: str
    buffer: bytearray = field(default_factory=bytearray)
    deadline: float = 0.0


class BufferingWorker(ThreadWorker):  # type: ignore[misc]
    """The gthread worker with an intake stage; ``worker_class`` in web/server.py."""

    def init_process(self) -> None:
        self._intakes: OrderedDict[Any, _Intake] = OrderedDict()
        self._by_source: dict[str, OrderedDict[Any, None]] = {}
        self._buffered = 0
        super().init_process()

    # -- gthread's entry points ---------------------------------------------------------------

    def accept(self, server: Any, listener: socket.socket) -> None:
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        conn = TConn(self.cfg, sock, client, server)
        self.nr_conns += 1
        self._begin(conn)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        """A kept-alive connection sent its next request: read it like a new one."""
        with self._lock:
            self.poller.unregister(client)
            try:
                self._keep.remove(conn)
            except ValueError:
                return
        self._begin(conn)

    def murder_keepalived(self) -> None:
        super().murder_keepalived()
        now = time.monotonic()
        for conn, intake in list(self._intakes.items()):
            if intake.deadline > now:
                continue
            self._refuse(
                conn, Refused(408, "request_timeout", "the request did not arrive in time")
            )

    # -- the intake -----------------------------------------------------------------------------

    def _begin(self, conn: Any) -> None:
        raw = conn.sock.raw if isinstance(conn.sock, _Replay) else conn.sock
        conn.sock = raw
        conn.parser = None
        conn.initialized = False
        raw.setblocking(False)
        client = conn.client
        source = client[0] if isinstance(client, tuple) else "local"
        now = time.monotonic()
        intake = _Intake(started=now, source=source, deadline=deadline_for(now, 0))
        self._make_room(source)
        self._intakes[conn] = intake
        self._by_source.setdefault(source, OrderedDict())[conn] = None
        with self._lock:
            self.poller.register(raw, selectors.EVENT_READ, partial(self._on_bytes, conn))

    def _make_room(self, source: str) -> None:
        mine = self._by_source.get(source)
        while mine is not None and len(mine) >= PER_SOURCE:
            self._refuse(next(iter(mine)), _CROWDED)
        while len(self._intakes) >= MAX_INCOMPLETE:
            self._refuse(next(iter(self._intakes)), _CROWDED)
        self._relieve()

    def _relieve(self) -> None:
        while self._intakes and self._buffered > MAX_BUFFERED:
            self._refuse(next(iter(self._intakes)), _CROWDED)

    def _on_bytes(self, conn: Any, _sock: Any) -> None:
        intake = self._intakes.get(conn)
        if intake is None:
            return
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not data:
            self._drop(conn)
            return
        self._take(conn, intake, data)

    def _take(self, conn: Any, intake: _Intake, data: bytes) -> None:
        intake.buffer += data
        self._buffered += len(data)
        try:
            size = request_size(intake.buffer)
        except Refused as refused:
            self._refuse(conn, refused)
            return
        if size is None:
            return
        intake.deadline = deadline_for(intake.started, size)
        if len(intake.buffer) < size:
            self._relieve()
            return
        request = bytes(intake.buffer[:size])
        carried = bytes(intake.buffer[size:])
        self._forget(conn)
        conn.carried = carried  # a pipelined next request: see finish_request
        conn.sock = _Replay(conn.sock, request)
        self.enqueue_req(conn)

    def finish_request(self, fs: Any) -> None:
        """gthread's, but a connection that pipelined a next request is closed, not kept.

        Called in the thread that answered, so it must not touch the intake: the client sends
        its next request again on a new connection, as HTTP clients do after a close.
        """
        super().finish_request(fs)
        conn = fs.conn
        if not getattr(conn, "carried", b""):
            return
        with self._lock:
            try:
                self._keep.remove(conn)
            except ValueError:
                return
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
        self.nr_conns -= 1
        conn.close()

    def _forget(self, conn: Any) -> None:
        intake = self._intakes.pop(conn, None)
        if intake is None:
            return
        self._buffered -= len(intake.buffer)
        mine = self._by_source.get(intake.source)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self._by_source[intake.source]
        with self._lock:
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass

    def _refuse(self, conn: Any, refused: Refused) -> None:
        try:
            conn.sock.send(refusal(refused.status, refused.code, refused.message))
        except OSError:
            pass
        self._drop(conn)

    def _drop(self, conn: Any) -> None:
        self._forget(conn)
        self.nr_conns -= 1
        conn.close()
