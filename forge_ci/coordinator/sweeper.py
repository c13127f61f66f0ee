"""The lease sweeper: ends attempts whose clocks ran out while nobody asked about them.

Runner requests reconcile their own attempt; the sweeper covers attempts whose runner went
silent. ``forge-ci worker`` runs :class:`Sweeper` every two seconds; each pass handles bounded
batches, so one pass never holds locks for long, and repeats at once while batches come back
full::

    due:       state <> completed and next_check_at <= now       (index: state, next_check_at)
    observed:  the job has a cancellation request the attempt has not seen yet

Each attempt is reconciled under its row lock (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
two sweepers, or a sweeper and a runner request, never wait on each other).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.coordinator.attempts import reconcile
from forge_ci.db import SessionScope, begin_write, is_sqlite
from forge_ci.models import Attempt, Job, utcnow

INTERVAL_SECONDS = 2.0
BATCH = 100

log = logging.getLogger(__name__)


def sweep(session: Session, now: datetime, limit: int = BATCH) -> int:
    """Reconcile up to ``limit`` attempts that are due; return how many were looked at.

    Starts a serialized write transaction on ``session`` (which must be fresh); the caller
    commits.
    """
    begin_write(session)
    due = (
        select(Attempt)
        .where(Attempt.state != states.COMPLETED, Attempt.next_check_at <= now)
        .order_by(Attempt.next_check_at, Attempt.id)
        .limit(limit)
    )
    unseen = (
        select(Attempt)
        .join(Job, Job.id == Attempt.job_id)
        .where(
            Attempt.state != states.COMPLETED,
            Attempt.cancel_requested_at.is_(None),
            Job.cancel_requested_at.is_not(None),
        )
        .order_by(Attempt.id)
        .limit(limit)
    )
    if not is_sqlite(session):
        due = due.with_for_update(skip_locked=True)
        unseen = unseen.with_for_update(skip_locked=True, of=Attempt)
    handled = 0
    for query in (due, unseen):
        for attempt in session.scalars(query.execution_options(populate_existing=True)).all():
            reconcile(session, attempt, now)
            handled += 1
    return handled


class Sweeper:
    """Runs :func:`sweep` every ``interval`` seconds until stopped (for ``forge-ci worker``)."""

    def __init__(
        self,
        sessions: SessionScope,
        interval: float = INTERVAL_SECONDS,
        limit: int = BATCH,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.interval = interval
        self.limit = limit
        self.clock = clock
        self.stopped = threading.Event()

    def run_once(self) -> int:
        """One pass: batches until a batch comes back smaller than the limit."""
        total = 0
        while not self.stopped.is_set():
            with self.sessions() as session:
                handled = sweep(session, self.clock(), self.limit)
                session.commit()
            total += handled
            if handled < self.limit:
                break
        return total

    def run_forever(self) -> None:
        while not self.stopped.is_set():
            try:
                self.run_once()
            except Exception:
                # A failed pass (database restarting, say) is retried on the next tick.
                log.exception("lease sweep failed")
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()
