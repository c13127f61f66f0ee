"""Claiming work: ``POST claims`` with the provider token, long-polling, replaying lost answers.

The caller persists the :class:`~worker.provider.state.ClaimRecord` before calling
:meth:`ClaimClient.claim`; a request that gets no usable answer (connection refused or reset,
a timeout, a 5xx status, an unreadable body) is sent again with the same ``request_id`` and
``attempt_token``, so the server hands back the attempt it may already have leased instead of
leasing another. Answers the server did give are never retried:

    200            the assignment, or None (nothing to do within the wait)
    401            ProviderRefused: the token is unknown or revoked; the provider stops
    409            ClaimConflict: this record is spent (its attempt ended); start a fresh one
    408, 429, 5xx  no answer yet: replay the same record after a pause
    other 4xx      ClaimRefused: a fresh record after a pause (also an answer this provider
                   cannot read, such as an assignment of a newer version)

The provider token goes only to the server's ``claims`` endpoint and is never logged.
"""

from __future__ import annotations

import http.client
import logging
import threading
from typing import Any

from forge_ci import protocol
from forge_ci.protocol import API_PREFIX, Assignment, ClaimRequest, ProtocolError, request_body
from worker.provider.state import ClaimRecord
from worker.provider.upstream import Server

log = logging.getLogger(__name__)

#: What the provider asks for; the server caps it at its own ``claim_wait_seconds``.
CLAIM_WAIT_SECONDS = 30.0
#: Beyond the wait, how long an answer may take before the request counts as lost.
ANSWER_MARGIN_SECONDS = 30.0
MAX_ANSWER_BYTES = 8 * 1024 * 1024 + 64 * 1024
_FIRST_PAUSE = 0.5
_MAX_PAUSE = 15.0
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class NoAnswer(Exception):
    """The request got no usable answer; replay the same record."""


class ClaimRefused(Exception):
    """The server answered the claim with an error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class ProviderRefused(ClaimRefused):
    """The provider token was refused (unknown, revoked): claiming cannot go on."""


class ClaimConflict(ClaimRefused):
    """The record cannot be used again (its attempt ended, or it was used otherwise)."""


class Stopped(Exception):
    """The provider is stopping; the record stays on disk and is replayed after a restart."""


def _error(status: int, body: bytes) -> tuple[str, str]:
    try:
        error = protocol.loads(body)["error"]
        return str(error["code"]), str(error["message"])[:500]
    except (ProtocolError, KeyError, TypeError):
        return "unreadable", f"HTTP {status} without a readable error body"


class ClaimClient:
    """Claims for one provider; one instance is shared by every slot (each call has its own
    connection)."""

    def __init__(
        self,
        server: Server,
        token: str,
        wait_seconds: float = CLAIM_WAIT_SECONDS,
        egress_policy: str = "",
    ) -> None:
        self.server = server
        #: Reported with every claim, for the admin page.
        self.egress_policy = egress_policy
        self._token = token
        self.wait_seconds = wait_seconds
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._stopping = threading.Event()

    def __repr__(self) -> str:  # never show the token
        return f"ClaimClient({self.server.origin!r})"

    def stop(self) -> None:
        """Abort waiting claims (their records stay for a replay) and refuse new ones."""
        self._stopping.set()
        with self._lock:
            connections = list(self._open)
        for connection in connections:
            sock: Any = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(2)
                except OSError:
                    pass

    def claim(self, record: ClaimRecord) -> Assignment | None:
        """Claim with ``record`` (already persisted), replaying it until an answer arrives."""
        pause = _FIRST_PAUSE
        while True:
            if self._stopping.is_set():
                raise Stopped("the provider is stopping")
            try:
                return self._once(record)
            except NoAnswer as exc:
                if self._stopping.is_set():
                    raise Stopped("the provider is stopping") from None
                log.warning(
                    "claim %s got no answer (%s); sending it again in %.1f s",
                    record.request_id,
                    exc,
                    pause,
                )
            if self._stopping.wait(pause):
                raise Stopped("the provider is stopping")
            pause = min(pause * 2, _MAX_PAUSE)

    def _once(self, record: ClaimRecord) -> Assignment | None:
        payload = protocol.dumps(
            request_body(
                ClaimRequest(
                    record.request_id,
                    record.attempt_token,
                    self.wait_seconds,
                    self.egress_policy[: protocol.MAX_EGRESS_POLICY_BYTES // 4],
                )
            )
        )
        connection = self.server.connect(self.wait_seconds + ANSWER_MARGIN_SECONDS)
        # Connected before it is registered, and registered only while not stopping: stop()
        # can then always shut its socket (a connection still unconnected when stop() looked
        # would connect afterwards and wait out the whole long poll).
        try:
            connection.connect()
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise NoAnswer(f"{type(exc).__name__}: {exc}") from None
        with self._lock:
            if self._stopping.is_set():
                connection.close()
                raise NoAnswer("the provider is stopping")
            self._open.add(connection)
        try:
            connection.request(
                "POST",
                f"{API_PREFIX}/claims",
                body=payload,
                headers={
                    "Authorization": f"Bearer {self._token}",
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                },
            )
            response = connection.getresponse()
            body = response.read(MAX_ANSWER_BYTES + 1)
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            raise NoAnswer(f"{type(exc).__name__}: {exc}") from None
        finally:
            with self._lock:
                self._open.discard(connection)
            connection.close()
        if len(body) > MAX_ANSWER_BYTES:
            raise NoAnswer(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
        if status in _RETRY_STATUSES:
            raise NoAnswer(f"HTTP {status}")
        if status != 200:
            code, message = _error(status, body)
            if status == 401:
                raise ProviderRefused(status, code, message)
            if status == 409:
                raise ClaimConflict(status, code, message)
            raise ClaimRefused(status, code, message)
        try:
            return protocol.parse_claim_response(protocol.loads(body))
        except ProtocolError as exc:
            # A complete answer this provider cannot read (a newer server): replaying would get
            # the same. Any attempt in it is left to the server, which ends it as lost.
            raise ClaimRefused(200, "unreadable_answer", exc.message) from None
