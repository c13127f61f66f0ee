"""The worker's clock for scheduled workflows: every UTC minute, once, while the worker is up.

``forge-ci worker`` runs :class:`Scheduler` in a thread beside the lease sweeper. It starts at
the current minute (a minute that passed while no worker ran is not replayed) and then takes
each minute in turn, so a pass that was late or failed (a busy repository, the database
restarting) catches up on the minutes it missed, at most :data:`MAX_CATCH_UP_MINUTES` back.
Every decision is durable and keyed in the database (:mod:`forge_ci.runs.scheduled`), so
restarts and extra workers never fire a minute twice; the clock itself holds no state worth
keeping. The clock and the waiting are injected, so tests drive it without sleeping::

    start ─► next = this minute
    tick  ─► for each minute from next through now (at most 10): fire_minute; next += 1 min
          ─► wait until the next minute starts (5 s after a failure)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from forge_ci.db import SessionScope
from forge_ci.models import utcnow
from forge_ci.runs.scheduled import MinuteOutcome, fire_minute, floor_minute
from forge_ci.settings import Settings

log = logging.getLogger(__name__)

#: A worker that falls further behind than this (the database was down for an hour) skips the
#: older minutes instead of creating a burst of runs for them; it logs what it skipped.
MAX_CATCH_UP_MINUTES = 10
RETRY_SECONDS = 5.0
ONE_MINUTE = timedelta(minutes=1)


class Scheduler:
    """Fires each minute's scheduled runs once (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionScope,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.clock = clock
        self.stopped = threading.Event()
        #: The first minute not yet fired; None until the first tick.
        self.next_minute: datetime | None = None

    def tick(self) -> list[MinuteOutcome]:
        """Fire every minute that is due; raise (leaving it due) if one cannot be decided."""
        now = floor_minute(self.clock())
        if self.next_minute is None:
            self.next_minute = now
        oldest = now - (MAX_CATCH_UP_MINUTES - 1) * ONE_MINUTE
        if self.next_minute < oldest:
            log.warning(
                "scheduled workflows: skipping %s to %s UTC (more than %s minutes behind)",
                f"{self.next_minute:%H:%M}",
                f"{oldest - ONE_MINUTE:%H:%M}",
                MAX_CATCH_UP_MINUTES,
            )
            self.next_minute = oldest
        decided: list[MinuteOutcome] = []
        while self.next_minute <= now and not self.stopped.is_set():
            with self.sessions(read_only=True) as session:
                decided.extend(fire_minute(session, self.settings, self.next_minute))
            self.next_minute += ONE_MINUTE
        return decided

    def seconds_to_next_minute(self) -> float:
        now = self.clock()
        return max(0.5, (floor_minute(now) + ONE_MINUTE - now).total_seconds() + 0.5)

    def run_forever(self) -> None:
        while not self.stopped.is_set():
            try:
                for outcome in self.tick():
                    log.info(
                        "scheduled %s %s at %s: %s (%s)",
                        outcome.repository,
                        outcome.workflow_path,
                        f"{outcome.minute:%H:%M}",
                        outcome.outcome,
                        outcome.detail,
                    )
                wait = self.seconds_to_next_minute()
            except Exception:
                log.exception("scheduled workflows: this minute is retried in %s s", RETRY_SECONDS)
                wait = RETRY_SECONDS
            self.stopped.wait(wait)

    def stop(self) -> None:
        self.stopped.set()
