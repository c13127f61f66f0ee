"""At most N SSH-side commands per user at once, across all of that user's connections.

A follow holds its slot until its run ends or its client goes away, so one person opening
followers in a loop cannot tie up the server's threads and database connections; git
transfers are limited apart (``ssh_max_connections``) and take no slot.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from forge_ci.errors import Conflict

#: Commands one user may have running at once.
PER_USER = 4


class CommandSlots:
    """The per-user counts (thread-safe); one instance per server."""

    def __init__(self, per_user: int = PER_USER) -> None:
        self.per_user = per_user
        self._lock = threading.Lock()
        self._running: Counter[int] = Counter()

    @contextmanager
    def hold(self, user_id: int) -> Iterator[None]:
        """One slot of ``user_id`` for the ``with`` block; Conflict when all are taken."""
        with self._lock:
            if self._running[user_id] >= self.per_user:
                raise Conflict(
                    f"you already have {self.per_user} commands running; wait for one to end"
                )
            self._running[user_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[user_id] -= 1
                if not self._running[user_id]:
                    del self._running[user_id]

    def running(self, user_id: int) -> int:
        with self._lock:
            return self._running[user_id]
