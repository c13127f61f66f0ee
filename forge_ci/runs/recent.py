"""Recent push events of a repository and what each workflow file did with them.

The Pipelines page lists them under **Recent push events**, newest first: accepted pushes only
(an aborted or still-prepared ref update never happened as far as people are concerned).
Outcomes carry only public details (:mod:`forge_ci.runs.events` never records internals).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import InvalidInput
from forge_ci.models import PushEvent, PushEventState, PushEventWorkflow, Run
from forge_ci.repos import find_repository
from forge_ci.runs.queries import PushEventView, WorkflowOutcomeView, show_push_event
from forge_ci.runs.sources import MAX_WORKFLOW_FILES

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


@dataclass(frozen=True)
class WorkflowFileState:
    """What one workflow file did at one push: the file's outcome and the push it was for."""

    outcome: WorkflowOutcomeView
    event_id: int
    ref: str
    sha: str
    created_at: datetime


def _states(session: Session, rows: Any) -> list[WorkflowFileState]:
    return [
        WorkflowFileState(
            WorkflowOutcomeView(wf.workflow_path, wf.outcome, wf.detail, wf.diagnostics, number),
            event.id,
            event.ref,
            event.new_sha,
            event.created_at,
        )
        for wf, event, number in rows
    ]


def _outcomes(repository_id: int) -> Any:
    return (
        select(PushEventWorkflow, PushEvent, Run.number)
        .join(PushEvent, PushEvent.id == PushEventWorkflow.push_event_id)
        .outerjoin(Run, Run.id == PushEventWorkflow.run_id)
        .where(PushEvent.repository_id == repository_id, PushEvent.state.in_(ACCEPTED))
    )


def latest_workflow_states(
    session: Session, actor: Actor, full_name: str, limit: int = MAX_WORKFLOW_FILES
) -> list[WorkflowFileState]:
    """Each workflow file's latest outcome at a push, by path (readers may look).

    The Pipelines page shows these once, instead of every push repeating the same problems of
    a file nobody changed; :func:`workflow_history` has the rest.
    """
    repository = find_repository(session, actor, full_name, Role.READ)
    latest = (
        select(func.max(PushEventWorkflow.id))
        .join(PushEvent, PushEvent.id == PushEventWorkflow.push_event_id)
        .where(PushEvent.repository_id == repository.id, PushEvent.state.in_(ACCEPTED))
        .group_by(PushEventWorkflow.workflow_path)
    )
    rows = session.execute(
        _outcomes(repository.id)
        .where(PushEventWorkflow.id.in_(latest))
        .order_by(PushEventWorkflow.workflow_path)
        .limit(limit)
    )
    return _states(session, rows)


def workflow_history(
    session: Session, actor: Actor, full_name: str, path: str, limit: int = MAX_RECENT
) -> list[WorkflowFileState]:
    """The outcomes of workflow file ``path`` at the latest ``limit`` pushes, newest first."""
    if not 1 <= limit <= MAX_RECENT:
        raise InvalidInput(f"limit must be between 1 and {MAX_RECENT}, not {limit}")
    repository = find_repository(session, actor, full_name, Role.READ)
    rows = session.execute(
        _outcomes(repository.id)
        .where(PushEventWorkflow.workflow_path == path)
        .order_by(PushEventWorkflow.push_event_id.desc())
        .limit(limit)
    )
    return _states(session, rows)
