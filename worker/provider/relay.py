"""The per-attempt relay: the job's only way out, forwarding one attempt's runner API calls.

A job container has no network. The provider binds a Unix socket in the attempt's socket
directory (mounted read-only at ``/run/forge-ci``) and relays what arrives there to the server,
one request per connection::

    runner ──HTTP/1.1 over api.sock──► Relay ──HTTP(S)──► server /-/runner-api/v1/...
             POST /-/runner-api/v1/attempts/<this attempt>/<action>     (nothing else)

What the relay refuses, answering with a JSON error and closing the connection:

- any method but ``POST``, any path but this attempt's ``start``, ``heartbeat``, ``steps``,
  ``logs``, ``complete``, ``source.tar``, ``source.bundle``, ``actions/<n>.tar`` and
  ``secrets`` (no query string, no other attempt, no claims);
- ``Transfer-Encoding`` (bodies carry a ``Content-Length``), repeated or malformed lengths,
  bodies over the protocol's 64 KiB, heads over 16 KiB, a head and body slower than 10 s.

What it forwards: the request line and body unchanged, and only the ``Authorization``,
``Content-Type``, ``Content-Length`` and ``Accept`` headers. The ``Authorization`` header is
the runner's own (the attempt credential); the relay never adds one, so the provider token can
never reach, or be used by, a job. Answers are streamed back with ``Connection: close``.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import time
from pathlib import Path

from forge_ci import protocol
from forge_ci.protocol import API_PREFIX, BODY_READ_DEADLINE_SECONDS, MAX_BODY_BYTES
from worker.provider.socket_server import AttemptSocketServer
from worker.provider.upstream import Server

log = logging.getLogger(__name__)

ACTIONS = (
    "start",
    "heartbeat",
    "steps",
    "logs",
    "complete",
    "source.tar",
    "source.bundle",
    "secrets",
)
FORWARDED_HEADERS = ("authorization", "content-type", "content-length", "accept")
RETURNED_HEADERS = ("content-type", "content-length", "cache-control", "www-authenticate")
MAX_HEAD_BYTES = 16 * 1024
#: Connections of one attempt served at once (the runner uses three or four).
MAX_CONNECTIONS = 16
#: How long the server may take to answer (a source archive is bounded to 30 s there).
UPSTREAM_SECONDS = 60.0
_CHUNK = 64 * 1024
_LINGER_SECONDS = 1.0
_HEADER_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class _Refusal(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Relay(AttemptSocketServer):
    """Serves one attempt's socket until :meth:`close`."""

    kind = "relay"

    def __init__(self, socket_path: Path, server: Server, attempt_id: int) -> None:
        super().__init__(socket_path, attempt_id, MAX_CONNECTIONS)
        self.server = server
        self._allowed = {f"{API_PREFIX}/attempts/{attempt_id}/{action}" for action in ACTIONS}
        self.forwarded = 0
        self.refused = 0

    # -- connections --------------------------------------------------------------------------

    def _busy(self, conn: socket.socket) -> None:
        self._answer_error(conn, 503, "relay_busy", "too many connections at once")

    def _handle(self, conn: socket.socket) -> None:
        try:
            path, headers, body = self._read_request(conn)
        except _Refusal as refusal:
            self.refused += 1
            log.warning("attempt %s: relay refused a request: %s", self.attempt_id, refusal.message)
            self._answer_error(conn, refusal.status, refusal.code, refusal.message)
            return
        except (OSError, TimeoutError):
            return
        self._forward(conn, path, headers, body)

    def _read_request(self, conn: socket.socket) -> tuple[str, dict[str, str], bytes]:
        deadline = time.monotonic() + BODY_READ_DEADLINE_SECONDS
        data = bytearray()
        while b"\r\n\r\n" not in data:
            if len(data) > MAX_HEAD_BYTES:
                raise _Refusal(400, "head_too_large", f"the head is over {MAX_HEAD_BYTES} bytes")
            chunk = _recv(conn, deadline)
            if not chunk:
                raise OSError("the client closed the connection before sending a request")
            data += chunk
        head, _, rest = bytes(data).partition(b"\r\n\r\n")
        if len(head) > MAX_HEAD_BYTES:
            raise _Refusal(400, "head_too_large", f"the head is over {MAX_HEAD_BYTES} bytes")
        lines = head.split(b"\r\n")
        method, path = self._check_request_line(lines[0])
        headers = _parse_headers(lines[1:])
        length_text = headers.get("content-length")
        if length_text is None or not length_text.isdigit() or len(length_text) > 9:
            raise _Refusal(411, "length_required", "send the body with a Content-Length")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise _Refusal(413, "body_too_large", f"the body is over {MAX_BODY_BYTES} bytes")
        body = bytearray(rest)
        while len(body) < length:
            chunk = _recv(conn, deadline)
            if not chunk:
                raise OSError("the client closed the connection in the middle of its body")
            body += chunk
        if len(body) > length:
            raise _Refusal(400, "invalid_request", "more bytes than the Content-Length")
        return path, headers, bytes(body)

    def _action_archive(self, path: str) -> bool:
        """``.../attempts/<this attempt>/actions/<n>.tar`` (issue #15's action archives)."""
        prefix = f"{API_PREFIX}/attempts/{self.attempt_id}/actions/"
        number = path[len(prefix) : -len(".tar")] if path.endswith(".tar") else ""
        return path.startswith(prefix) and number.isdigit() and len(number) <= 6

    def _check_request_line(self, line: bytes) -> tuple[str, str]:
        parts = line.split(b" ")
        if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise _Refusal(400, "invalid_request", "a malformed request line")
        try:
            method, path = parts[0].decode("ascii"), parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise _Refusal(400, "invalid_request", "a request line that is not ASCII") from None
        if path not in self._allowed and not self._action_archive(path):
            raise _Refusal(
                403,
                "not_relayed",
                f"this socket relays only attempt {self.attempt_id}'s runner API endpoints,"
                f" not {path[:120]!r}",
            )
        if method != "POST":
            raise _Refusal(405, "method_not_allowed", f"only POST is relayed, not {method[:20]}")
        return method, path

    def _forward(
        self, conn: socket.socket, path: str, headers: dict[str, str], body: bytes
    ) -> None:
        upstream = self.server.connect(UPSTREAM_SECONDS)
        started = False
        try:
            try:
                upstream.putrequest("POST", path, skip_accept_encoding=True)
                for name in FORWARDED_HEADERS:
                    if name in headers:
                        upstream.putheader(name.title(), headers[name])
                upstream.endheaders(body)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                log.warning(
                    "attempt %s: the server did not answer %s: %s", self.attempt_id, path, exc
                )
                self._answer_error(conn, 502, "upstream_unavailable", "the server did not answer")
                return
            self.forwarded += 1
            conn.settimeout(UPSTREAM_SECONDS)
            head = [f"HTTP/1.1 {response.status} {response.reason}"]
            for name in RETURNED_HEADERS:
                value = response.getheader(name)
                if value is not None and not (name == "content-length" and response.chunked):
                    head.append(f"{name.title()}: {value}")
            head.append("Connection: close")
            conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            started = True
            while True:
                chunk = response.read(_CHUNK)
                if not chunk:
                    break
                conn.sendall(chunk)
        except (OSError, http.client.HTTPException) as exc:
            # Mid-answer: the runner sees a cut answer and sends the same request again.
            if started:
                log.info("attempt %s: answer to %s cut: %s", self.attempt_id, path, exc)
        finally:
            upstream.close()

    def _answer_error(self, conn: socket.socket, status: int, code: str, message: str) -> None:
        body = protocol.dumps(protocol.error_body(code, message))
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\n"
            "Connection: close\r\n\r\n"
        )
        try:
            conn.settimeout(5)
            conn.sendall(head.encode("ascii") + body)
            # A lingering close: the client may still be sending what was refused unread. Drain
            # it briefly, so it reads this answer instead of failing on a closed socket.
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(_LINGER_SECONDS)
            drained = 0
            while drained < MAX_BODY_BYTES and (chunk := conn.recv(_CHUNK)):
                drained += len(chunk)
        except OSError:
            pass


def _recv(conn: socket.socket, deadline: float) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Refusal(408, "body_timeout", "the request did not arrive in time")
    conn.settimeout(remaining)
    try:
        return conn.recv(_CHUNK)
    except TimeoutError:
        raise _Refusal(408, "body_timeout", "the request did not arrive in time") from None


def _parse_headers(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _HEADER_NAME.fullmatch(name):
            raise _Refusal(400, "invalid_request", "a malformed header line")
        key = name.decode("ascii").lower()
        if key == "transfer-encoding":
            raise _Refusal(411, "length_required", "Transfer-Encoding is not relayed")
        if key not in FORWARDED_HEADERS:
            continue
        if key in headers:
            raise _Refusal(400, "invalid_request", f"header {key} appears twice")
        try:
            text = value.strip(b" \t").decode("ascii")
        except UnicodeDecodeError:
            raise _Refusal(400, "invalid_request", f"header {key} is not ASCII") from None
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise _Refusal(400, "invalid_request", f"header {key} holds control characters")
        headers[key] = text
    return headers
