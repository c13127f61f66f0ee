"""Recent push events of a repository and what each workflow file did with them.

The Pipelines page lists them under **Recent push events**, newest first: accepted pushes only
(an aborted or still-prepared ref update never happened as far as people are concerned).
Outcomes carry only public details (:mod:`forge_ci.runs.events` never records internals).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import InvalidInput
from forge_ci.models import PushEvent, PushEventState
from forge_ci.repos import find_repository
from forge_ci.runs.queries import PushEventView, show_push_event

ACCEPTED = (PushEventState.CONFIRMED.value, PushEventState.RECEIVED.value)
MAX_RECENT = 50


@dataclass(frozen=True)
class RecentPushEvent:
    event: PushEventView
    created_at: datetime


def recent_push_events(
    session: Session, actor: Actor, full_name: str, limit: int = 10
) -> list[RecentPushEvent]:
    """The latest ``limit`` accepted push events with their outcomes (readers may look)."""
    if not 1 <= limit <= MAX_RECENT:
        raise InvalidInput(f"limit must be between 1 and {MAX_RECENT}, not {limit}")
    repository = find_repository(session, actor, full_name, Role.READ)
    rows = session.execute(
        select(PushEvent.id, PushEvent.created_at)
        .where(PushEvent.repository_id == repository.id, PushEvent.state.in_(ACCEPTED))
        .order_by(PushEvent.id.desc())
        .limit(limit)
    ).all()
    return [
        RecentPushEvent(show_push_event(session, actor, full_name, event_id), created_at)
        for event_id, created_at in rows
    ]
