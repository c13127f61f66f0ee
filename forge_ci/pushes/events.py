"""Reading push events, and the worker's side: what to enqueue, what was received."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.models import PushEvent, PushEventState
from forge_ci.pushes.settling import OPEN_STATES
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


def confirmed_event_ids(session: Session, limit: int = 1000) -> list[int]:
    """Events ready for a worker and not yet received, oldest first (the worker's scan)."""
    return list(
        session.scalars(
            select(PushEvent.id)
            .where(PushEvent.state == PushEventState.CONFIRMED.value)
            .order_by(PushEvent.id)
            .limit(limit)
        )
    )


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
