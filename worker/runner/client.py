"""The runner API client: HTTP/1.1 over the attempt's Unix socket, standard library only.

Every call is a ``POST`` of a JSON body with the attempt credential as a bearer token. When no
answer arrives (connection refused or reset, a timeout, a 5xx status, an unreadable body) the
call is retried with the *exact same bytes*, with backoff, until its deadline or until the
caller gives up; the server acknowledges identical replays (step reports, log sequences,
completions), so a retry never does anything twice. An answer the server did give (4xx) is
never retried: it is raised as :class:`Refused`, with the attempt's status when the server sent
one.

The credential lives in this object only: it is never logged, never put in an exception
message, and never passed to a step.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable
from typing import Any

from forge_ci import protocol
from forge_ci.protocol import API_PREFIX, AttemptStatus, ProtocolError
from worker.runner.clock import now

#: Socket timeout of one request (each read or write, not the whole exchange).
REQUEST_TIMEOUT = 10.0
MAX_RESPONSE_BYTES = 1024 * 1024
_FIRST_BACKOFF = 0.2
_MAX_BACKOFF = 2.0
_READ_SIZE = 256 * 1024
#: Statuses that mean "no answer yet": retry the same bytes.
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class NoAnswer(Exception):
    """No usable answer arrived (after retrying, when the call retried)."""


class Refused(Exception):
    """The server answered with an error; ``attempt`` is its view of the attempt, if sent."""

    def __init__(
        self, http_status: int, code: str, message: str, attempt: AttemptStatus | None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.http_status = http_status
        self.code = code
        self.message = message
        self.attempt = attempt


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to a Unix socket (the ``Host`` header says ``localhost``)."""

    def __init__(self, socket_path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _refusal(status: int, body: bytes) -> Refused:
    try:
        obj = protocol.loads(body)
        error = obj["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ProtocolError, KeyError, TypeError):
        return Refused(status, "unreadable", f"HTTP {status} without a readable error body", None)
    attempt: AttemptStatus | None = None
    if isinstance(obj, dict) and "attempt" in obj:
        try:
            attempt = AttemptStatus.from_json(obj["attempt"])
        except ProtocolError:
            attempt = None
    return Refused(status, code, message[:2000], attempt)


class ApiClient:
    """Calls to one attempt's endpoints through one Unix socket; safe to share between threads
    (every call opens its own connection)."""

    def __init__(self, socket_path: str, credential: str) -> None:
        self.socket_path = socket_path
        self._credential = credential

    def __repr__(self) -> str:  # never show the credential
        return f"ApiClient({self.socket_path!r})"

    def _headers(self, payload: bytes) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._credential}",
            "Content-Type": "application/json",
            "Content-Length": str(len(payload)),
            "Accept": "application/json, application/x-tar",
        }

    def _exchange(
        self,
        path: str,
        payload: bytes,
        timeout: float,
        sink: Callable[[bytes], None] | None,
        limit: int,
        until: float,
    ) -> bytes:
        """One request; the body of a 200 answer (or fed to ``sink``), else an exception."""
        connection = UnixHTTPConnection(self.socket_path, timeout)
        try:
            try:
                connection.request("POST", path, body=payload, headers=self._headers(payload))
                response = connection.getresponse()
                status = response.status
                if status == 200 and sink is not None:
                    received = 0
                    while True:
                        if now() > until:
                            raise NoAnswer("the response did not arrive in time")
                        data = response.read(_READ_SIZE)
                        if not data:
                            return b""
                        received += len(data)
                        if received > limit:
                            raise NoAnswer(f"the response is larger than {limit} bytes")
                        sink(data)
                body = response.read(MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException) as exc:
                raise NoAnswer(f"no answer from the runner API: {type(exc).__name__}") from None
        finally:
            connection.close()
        if len(body) > MAX_RESPONSE_BYTES:
            raise NoAnswer(f"the answer is larger than {MAX_RESPONSE_BYTES} bytes")
        if status == 200:
            return body
        if status in _RETRY_STATUSES:
            raise NoAnswer(f"the runner API answered HTTP {status}")
        raise _refusal(status, body)

    def post(
        self,
        path: str,
        payload: bytes,
        *,
        until: float,
        give_up: Callable[[], bool] | None = None,
        sink: Callable[[bytes], None] | None = None,
        limit: int = MAX_RESPONSE_BYTES,
        restart: Callable[[], None] | None = None,
    ) -> bytes:
        """POST ``payload`` to ``path``, retrying the same bytes until ``until`` (clock time).

        ``sink`` receives a successful body in pieces (``restart`` is called before a retry
        so it can drop a partial one); otherwise the body is returned.
        """
        backoff = _FIRST_BACKOFF
        while True:
            remaining = until - now()
            if remaining <= 0:
                raise NoAnswer("no answer from the runner API in time")
            try:
                return self._exchange(
                    path, payload, min(REQUEST_TIMEOUT, max(remaining, 0.5)), sink, limit, until
                )
            except NoAnswer:
                if give_up is not None and give_up():
                    raise
                if now() + backoff >= until:
                    raise
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)
            if restart is not None:
                restart()

    def call(
        self,
        attempt_id: int,
        endpoint: str,
        body: dict[str, Any],
        *,
        until: float,
        give_up: Callable[[], bool] | None = None,
    ) -> AttemptStatus:
        """An attempt endpoint (``start``, ``heartbeat``, ``steps``, ``logs``, ``complete``)."""
        path = f"{API_PREFIX}/attempts/{attempt_id}/{endpoint}"
        answer = self.post(path, protocol.dumps(body), until=until, give_up=give_up)
        try:
            return AttemptStatus.from_json(protocol.loads(answer))
        except ProtocolError as exc:
            raise NoAnswer(f"unreadable answer from {endpoint}: {exc.message}") from None
