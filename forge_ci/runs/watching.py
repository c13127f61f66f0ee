"""Which run ``run watch OWNER/NAME`` follows: the one the caller's latest push started, or the
newest.

``git push && ssh git@HOST run watch alice/demo`` must follow the run that push created, even
when the worker has not decided the push yet::

    caller's newest accepted push of the repository, if it is newer than every other run:
      not decided yet            -> wait (the front door polls again)
      decided, runs created      -> the newest of its runs
      decided, no run            -> nothing to follow, and why (announcement wording)
    otherwise                    -> the repository's newest run (none: NotFound)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import NotFound
from forge_ci.models import PushEvent, PushEventResult, PushEventWorkflow, Run
from forge_ci.models.push_events import PushEventState
from forge_ci.repos import find_repository
from forge_ci.runs.announcements import decided_lines
from forge_ci.runs.queries import show_push_event

_ACCEPTED = (PushEventState.CONFIRMED.value, PushEventState.RECEIVED.value)


@dataclass(frozen=True)
class WatchChoice:
    """Exactly one of: a run to follow, a push still being decided, or why there is no run."""

    number: int | None = None
    #: The branch (or ``tag X``) of the caller's push that the worker has not decided yet.
    pending: str | None = None
    #: Why the caller's latest push started no run.
    no_run: str | None = None


def choose_run_to_watch(
    session: Session, actor: Actor, full_name: str, public_url: str
) -> WatchChoice:
    """See the module docstring. Readers may; others get the repository's NotFound."""
    repository = find_repository(session, actor, full_name, Role.READ)
    newest = session.scalar(
        select(Run).where(Run.repository_id == repository.id).order_by(Run.number.desc()).limit(1)
    )
    push = None
    if actor.user_id is not None:
        push = session.scalar(
            select(PushEvent)
            .where(
                PushEvent.repository_id == repository.id,
                PushEvent.pusher_id == actor.user_id,
                PushEvent.state.in_(_ACCEPTED),
            )
            .order_by(PushEvent.id.desc())
            .limit(1)
        )
    if push is not None:
        started = list(
            session.scalars(
                select(Run.number)
                .join(PushEventWorkflow, PushEventWorkflow.run_id == Run.id)
                .where(PushEventWorkflow.push_event_id == push.id)
                .order_by(Run.number.desc())
            )
        )
        later = session.scalar(
            select(Run.id)
            .where(
                Run.repository_id == repository.id,
                Run.created_at > push.created_at,
                Run.number.not_in(started) if started else Run.id.is_not(None),
            )
            .limit(1)
        )
        if later is None:  # nobody started a run after this push: it is the one to watch
            branch = _branch(push.ref)
            if session.get(PushEventResult, push.id) is None:
                return WatchChoice(pending=branch)
            if started:
                return WatchChoice(number=started[0])
            view = show_push_event(session, actor, full_name, push.id)
            lines = decided_lines(view, branch, f"{public_url.rstrip('/')}/{full_name}/pipelines")
            reason = "; ".join(line.removeprefix("forge-ci: ") for line in lines)
            return WatchChoice(no_run=reason or f"push workflows of {full_name} are off")
    if newest is None:
        raise NotFound(f"{full_name} has no runs yet")
    return WatchChoice(number=newest.number)


def _branch(ref: str) -> str:
    if ref.startswith("refs/tags/"):
        return "tag " + ref.removeprefix("refs/tags/")
    return ref.removeprefix("refs/heads/")
