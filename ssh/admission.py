"""Who may open an SSH connection now: OpenSSH's ``MaxStartups`` model, plus room for sessions.

Issue #14, finding 3: 64 TCP connections that sent nothing filled ``ssh_max_connections`` until
the 30 s authentication timeout, and reconnecting kept everyone out. Connections that have not
authenticated yet ("startups") are now limited apart from the rest:

    unauthenticated:  0 ........ start ............ full ...
                      admitted   the oldest startup, if MIN_AGE old, is closed to make room;
                                 if none is that old (a burst): dropped with probability
                                 rate -> 100 % at full
    per address:      at most ``per_source`` startups (three quarters of ``start``); more are
                      dropped at once, so one address alone never brings the others to random
                      drops, yet ten pushers behind one address (a CI farm, a NAT) get in
    in all:           ``total`` (``ssh_max_connections``); startups never use more than
                      ``full`` of them, so ``total - full`` are always left for sessions
                      that have authenticated

A real client authenticates in well under a second, so closing the oldest startup under a
flood closes an attacker's, and a push still gets in. A dropped connection is closed before any
SSH traffic, so a flood costs no key exchanges.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: A startup younger than this is never closed to make room for another.
MIN_AGE = 2.0
#: OpenSSH's default MaxStartups is 10:30:100; here start and full scale with the total.
DROP_RATE = 0.3
#: Refusals are logged at most once per this many seconds (a flood must not flood the log).
LOG_EVERY = 10.0


@dataclass(frozen=True)
class Limits:
    total: int
    start: int
    full: int
    per_source: int
    rate: float = DROP_RATE

    @classmethod
    def for_total(cls, total: int) -> Limits:
        """For 64 connections: random drops from 16 startups, 32 at most, 12 per address."""
        full = max(1, total // 2)
        start = max(1, full // 2)
        return cls(total=total, start=start, full=full, per_source=max(1, start * 3 // 4))


class Ticket:
    """One admitted connection: a startup until :meth:`authenticated`, then a session."""

    def __init__(self, admission: Admission, source: str, sock: socket.socket) -> None:
        self._admission = admission
        self.source = source
        self.sock = sock
        self.since = time.monotonic()
        #: startup -> session -> released, or startup -> evicted -> released
        self.state = "startup"

    def authenticated(self) -> None:
        self._admission._authenticated(self)

    def release(self) -> None:
        self._admission._release(self)


class Admission:
    """The counts behind the rules in the module docstring (thread-safe)."""

    def __init__(self, limits: Limits, chance: Callable[[], float] = random.random) -> None:
        self.limits = limits
        self._chance = chance
        self._lock = threading.Lock()
        self._startups: dict[Ticket, None] = {}  # oldest first
        self._per_source: Counter[str] = Counter()
        self._sessions = 0
        self._refused = 0
        self._logged = 0.0

    @property
    def counts(self) -> tuple[int, int]:
        """(startups, authenticated sessions) now."""
        with self._lock:
            return len(self._startups), self._sessions

    def admit(self, source: str, sock: socket.socket) -> Ticket | None:
        """A ticket for a new connection from ``source``, or ``None``: close it unanswered."""
        limits = self.limits
        evicted: Ticket | None = None
        with self._lock:
            startups = len(self._startups)
            reason = None
            if self._per_source[source] >= limits.per_source:
                reason = f"{limits.per_source} unauthenticated connections from {source}"
            elif startups >= limits.start and self._oldest_age() >= MIN_AGE:
                evicted = next(iter(self._startups))  # make room: see the module docstring
                self._forget_startup(evicted)
                evicted.state = "evicted"
            elif startups >= limits.full:
                reason = f"{startups} unauthenticated connections, none {MIN_AGE:.0f} s old"
            elif startups + self._sessions >= limits.total:
                reason = f"{limits.total} connections open"
            elif startups >= limits.start:
                odds = limits.rate + (1 - limits.rate) * (startups - limits.start) / max(
                    limits.full - limits.start, 1
                )
                if self._chance() < odds:
                    reason = f"random early drop at {startups} unauthenticated connections"
            if reason is not None:
                self._note_refusal(reason)
                return None
            ticket = Ticket(self, source, sock)
            self._startups[ticket] = None
            self._per_source[source] += 1
        if evicted is not None:
            _hang_up(evicted.sock)
        return ticket

    def _oldest_age(self) -> float:
        oldest = next(iter(self._startups), None)
        return 0.0 if oldest is None else time.monotonic() - oldest.since

    def _note_refusal(self, reason: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY:
            log.warning("refusing SSH connections (%d so far): %s", self._refused, reason)
            self._logged = now

    def _forget_startup(self, ticket: Ticket) -> None:
        del self._startups[ticket]
        self._per_source[ticket.source] -= 1
        if not self._per_source[ticket.source]:
            del self._per_source[ticket.source]

    def _authenticated(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket.state == "startup":  # an evicted one is being hung up already
                self._forget_startup(ticket)
                self._sessions += 1
                ticket.state = "session"

    def _release(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket.state == "startup":
                self._forget_startup(ticket)
            elif ticket.state == "session":
                self._sessions -= 1
            ticket.state = "released"


def _hang_up(sock: socket.socket) -> None:
    """End an evicted connection; its own thread sees end of file and releases its ticket."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
