"""Reading push events, and the worker's side: what to enqueue, who processes it, what was
received.

A confirmed event is processed by one process at a time (issue #14, finding 5)::

    confirmed, unclaimed ──claim_event──► confirmed, claimed by host:pid until T ──► received
            ▲                   (one conditional UPDATE: one processor wins)     (result recorded)
            └── release_claim (the holder gave up: busy, failed, its work horse died), or T passed

The scan offers only confirmed events nobody holds (:func:`offered_event_ids`), so a running
job's event is not even enqueued again; a claim whose holder died without releasing it (the
whole worker killed) ends by itself at ``claimed_until``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.db import UNAVAILABLE_ERRORS, Database, begin_write
from forge_ci.models import PushEvent, PushEventState, utcnow
from forge_ci.pushes.settling import OPEN_STATES
from forge_ci.queueing import JOB_TIMEOUT_SECONDS
from forge_ci.repos import find_repository


@dataclass(frozen=True)
class PushEventInfo:
    id: int
    ref: str
    old_sha: str
    new_sha: str
    pusher: str
    state: str
    created_at: datetime

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "ref": self.ref,
            "old_sha": self.old_sha,
            "new_sha": self.new_sha,
            "pusher": self.pusher,
            "state": self.state,
            "created_at": self.created_at.isoformat(),
        }


def list_push_events(session: Session, actor: Actor, full_name: str) -> list[PushEventInfo]:
    """Every event of the repository, oldest first; the actor must be able to read it."""
    repository = find_repository(session, actor, full_name, Role.READ)
    events = session.scalars(
        select(PushEvent).where(PushEvent.repository_id == repository.id).order_by(PushEvent.id)
    )
    return [
        PushEventInfo(e.id, e.ref, e.old_sha, e.new_sha, e.pusher.name, e.state, e.created_at)
        for e in events
    ]


#: How long a claim holds. RQ ends a push-event job after ``JOB_TIMEOUT_SECONDS`` (in its work
#: horse) and kills a horse that ignores that 60 s later: a claim that lasts longer than both
#: outlives its holder, so when it ends nobody is working on the event any more.
CLAIM_SECONDS = JOB_TIMEOUT_SECONDS + 90


def claim_holder(pid: int | None = None) -> str:
    """How a claim names its holder: ``host:pid`` (the worker names a dead horse by its pid)."""
    return f"{socket.gethostname()}:{pid if pid is not None else os.getpid()}"


def _offered(now: datetime) -> ColumnElement[bool]:
    return (PushEvent.state == PushEventState.CONFIRMED.value) & or_(
        PushEvent.claimed_until.is_(None), PushEvent.claimed_until <= now
    )


def offered_event_ids(
    session: Session,
    among: Collection[int] | None = None,
    *,
    limit: int = 1000,
    now: datetime | None = None,
) -> list[int]:
    """Confirmed events that no live claim holds, oldest first (``among`` these ids only):
    what the worker's scan enqueues, and what an enqueue rechecks before it queues a job."""
    query = select(PushEvent.id).where(_offered(now or utcnow()))
    if among is not None:
        query = query.where(PushEvent.id.in_(list(among)))
    return list(session.scalars(query.order_by(PushEvent.id).limit(limit)))


def claim_event(
    session: Session, event_id: int, holder: str, *, now: datetime | None = None
) -> bool:
    """Take a confirmed event for processing: True for the one caller that wins it.

    One conditional UPDATE in its own committed transaction (the session must have none open):
    of concurrent claimers, one changes the row and the others, serialized behind it by the
    database, find it claimed. A claim that has run out (its holder died) is taken over.
    """
    now = now or utcnow()
    begin_write(session)
    result = session.execute(
        update(PushEvent)
        .where(PushEvent.id == event_id, _offered(now))
        .values(claimed_by=holder, claimed_until=now + timedelta(seconds=CLAIM_SECONDS))
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def release_claim(session: Session, event_id: int, holder: str) -> bool:
    """Give up ``holder``'s claim of an event not yet received, so it is offered again at once.

    For a holder that stops without a result (the repository was busy, an error, its work horse
    was killed); a claim somebody else holds by now is left alone. Own transaction, like
    :func:`claim_event`. True when a claim was released.
    """
    begin_write(session)
    result = session.execute(
        update(PushEvent)
        .where(
            PushEvent.id == event_id,
            PushEvent.state == PushEventState.CONFIRMED.value,
            PushEvent.claimed_by == holder,
        )
        .values(claimed_until=None)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def repositories_with_open_events(session: Session) -> list[int]:
    """Repositories whose intents a crash left unsettled (the worker's scan settles them)."""
    return list(
        session.scalars(
            select(PushEvent.repository_id)
            .where(PushEvent.state.in_(OPEN_STATES))
            .distinct()
            .order_by(PushEvent.repository_id)
        )
    )


def mark_received(session: Session, event_id: int) -> bool:
    """A worker took the event: confirmed -> received. True when this call moved it.

    Idempotent: an event already received, or not confirmed (yet), or gone is left alone, so a
    job that runs twice, or late, does no harm.
    """
    event = session.get(PushEvent, event_id, with_for_update=True)
    if event is None or not event.can_move_to(PushEventState.RECEIVED):
        return False
    event.move_to(PushEventState.RECEIVED)
    session.flush()
    return True


def still_offered(database: Database) -> Callable[[list[int]], list[int]]:
    """What :meth:`forge_ci.queueing.JobQueue.enqueue_push_events` asks before it queues jobs:
    which of these events are still confirmed and unclaimed. A database that cannot answer
    leaves them all in (the claim still lets only one processor work on each)."""

    def ready(ids: list[int]) -> list[int]:
        try:
            with database.session(read_only=True) as session:
                return offered_event_ids(session, ids, limit=len(ids))
        except UNAVAILABLE_ERRORS:
            return ids

    return ready
