"""Sending an attempt's egress records to the server's audit, and the addresses never reached.

The proxy (:mod:`worker.provider.egress`) keeps its records in memory; the executor hands them
here every half second while the job runs (so a denial shows in the job's log at once) and
once more after the proxy has closed. A request that gets no answer is sent again, with the
same sequences, later; the server stores each sequence once.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import socket
from collections.abc import Iterable

from forge_ci import protocol
from forge_ci.egress import IPAddress
from forge_ci.protocol import API_PREFIX, EgressRecord, EgressRequest
from worker.provider.egress import ConnectionRecord
from worker.provider.upstream import Server

log = logging.getLogger(__name__)

#: Records per request: far below the runner API's 64 KiB body limit even at maximum lengths.
BATCH = 40
#: Records kept while the server does not answer; beyond that the oldest are dropped, loudly.
MAX_PENDING = 20_000


class EgressAudit:
    """One attempt's records on their way to ``POST attempts/<id>/egress``."""

    def __init__(self, server: Server, token: str, attempt_id: int, credential: str) -> None:
        self.server = server
        self._token = token
        self.attempt_id = attempt_id
        self._credential = credential
        self.pending: list[EgressRecord] = []
        self.sent = 0

    def __repr__(self) -> str:  # never show the tokens
        return f"EgressAudit(attempt={self.attempt_id})"

    def add(self, records: Iterable[ConnectionRecord]) -> None:
        for record in records:
            self.pending.append(_wire(record))
        if len(self.pending) > MAX_PENDING:
            dropped = len(self.pending) - MAX_PENDING
            log.error("attempt %s: %d egress records dropped unsent", self.attempt_id, dropped)
            del self.pending[:dropped]

    def flush(self, timeout: float = 10.0) -> bool:
        """Send what is pending; False if some is still pending (sent again next time)."""
        while self.pending:
            batch = self.pending[:BATCH]
            if not self._post(batch, timeout):
                return False
            del self.pending[: len(batch)]
            self.sent += len(batch)
        return True

    def _post(self, batch: list[EgressRecord], timeout: float) -> bool:
        body = protocol.dumps(EgressRequest(self._credential, batch).to_json())
        connection = self.server.connect(timeout)
        try:
            connection.request(
                "POST",
                f"{API_PREFIX}/attempts/{self.attempt_id}/egress",
                body=body,
                headers={
                    "Authorization": f"Bearer {self._token}",
                    "Content-Type": "application/json",
                },
            )
            response = connection.getresponse()
            answer = response.read(protocol.MAX_BODY_BYTES)
        except (OSError, http.client.HTTPException) as exc:
            log.warning("attempt %s: egress audit not sent yet: %s", self.attempt_id, exc)
            return False
        finally:
            connection.close()
        if response.status == 200:
            return True
        if response.status >= 500:
            log.warning("attempt %s: egress audit: HTTP %s", self.attempt_id, response.status)
            return False
        # Refused for good (a bug on one side): say so, and do not send it forever.
        log.error(
            "attempt %s: the server refused %d egress records (HTTP %s): %s",
            self.attempt_id,
            len(batch),
            response.status,
            answer[:300].decode("utf-8", "replace"),
        )
        return True


def _wire(record: ConnectionRecord) -> EgressRecord:
    return EgressRecord(
        sequence=record.sequence,
        at_ms=round(record.at.timestamp() * 1000),
        method=record.method[:16],
        host=record.host[:255],
        port=record.port,
        address=record.address[:200],
        allowed=record.allowed,
        explicit=record.explicit,
        reason=record.reason[:500],
        closed=record.closed[:200],
        bytes_out=record.bytes_out,
        bytes_in=record.bytes_in,
        milliseconds=round(record.seconds * 1000),
    )


def own_addresses(server: Server) -> set[IPAddress]:
    """This machine's addresses and the server's: a job never reaches them by the proxy.

    From the kernel's tables of local addresses (IPv4 and IPv6) and the server's name as
    this machine resolves it (no lookup for an IP literal).
    """
    found: set[IPAddress] = set()
    try:
        with open("/proc/net/fib_trie", encoding="ascii") as trie:
            previous = ""
            for line in trie:
                text = line.strip()
                if text == "/32 host LOCAL" and previous.startswith("|-- "):
                    found.add(ipaddress.ip_address(previous[4:]))
                previous = text
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as table:
            for line in table:
                raw = line.split()[0]
                found.add(ipaddress.ip_address(":".join(raw[i : i + 4] for i in range(0, 32, 4))))
    except (OSError, ValueError, IndexError):
        pass
    try:
        for *_, sockaddr in socket.getaddrinfo(server.host, None, type=socket.SOCK_STREAM):
            found.add(ipaddress.ip_address(str(sockaddr[0]).partition("%")[0]))
    except (OSError, ValueError):
        pass
    return found
