"""An operator's verdict on a push event that needs inspection.

When a ref was moved outside forge-ci while a push was in flight, settling cannot tell whether
the push happened and refuses writes to the repository (see :mod:`forge_ci.pushes.settling`).
The operator decides: the push happened (the ref is set to the event's new value) or it did
not (the ref is set back to its old value). Under the repository lock, the ref is set and the
repository settled, which confirms (and pins) or aborts the event as for any other intent.

The value the ref held is reported, so a commit that someone placed there by hand can be
recovered (``git update-ref refs/heads/x <that value>`` in a new branch, for example).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import Conflict, NeedsInspection, NotFound
from forge_ci.gitstore import has_object, open_repository, read_ref, repository_path, set_ref
from forge_ci.locks import repository_lock
from forge_ci.models import PushEvent, PushEventState
from forge_ci.pushes.settling import settle_repository
from forge_ci.refs import is_zero
from forge_ci.repos import find_repository
from forge_ci.settings import Settings


@dataclass(frozen=True)
class Verdict:
    """What resolving one event did."""

    event_id: int
    ref: str
    #: The ref's value before (None: it did not exist) and after.
    was: str | None
    now: str | None
    #: The event's state afterwards: confirmed or aborted.
    state: str


def resolve_push_event(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    event_id: int,
    *,
    pushed: bool,
) -> Verdict:
    """Set the event's ref as the operator says and settle; refuse anything already settled.

    Needs the owner role (operators have every role). May still raise NeedsInspection, naming
    the repository's *other* events that need a verdict; this one is settled by then.
    """
    repository = find_repository(session, actor, full_name, Role.OWNER)
    repository_id, name = repository.id, repository.full_name
    owner, short = name.split("/", 1)
    session.rollback()
    with repository_lock(settings.locks_dir, repository_id, name, settings.repo_lock_timeout):
        event = session.scalar(
            select(PushEvent).where(
                PushEvent.id == event_id, PushEvent.repository_id == repository_id
            )
        )
        if event is None:
            raise NotFound(f"push event {event_id} of {name} not found")
        if event.state != PushEventState.PREPARED.value:
            raise Conflict(
                f"push event {event_id} of {name} is already {event.state}; "
                "only an event still being settled can be resolved"
            )
        ref, old_sha, new_sha = event.ref, event.old_sha, event.new_sha
        session.rollback()
        git = open_repository(repository_path(settings.repositories_dir, owner, short))
        target = new_sha if pushed else old_sha
        wanted = None if is_zero(target) else target
        if wanted is not None and not has_object(git, wanted):
            side = "new" if pushed else "old"
            raise Conflict(
                f"push event {event_id} of {name}: its {side} commit {wanted[:12]} is missing "
                "from the repository, so the ref cannot be set to it"
                + ("; resolve it with --not-pushed" if pushed else "")
            )
        was = read_ref(git, ref)
        set_ref(git, ref, wanted)
        try:
            settle_repository(session, settings, repository_id)
        except NeedsInspection as exc:
            raise NeedsInspection(
                f"push event {event_id} of {name} is now {_state(session, event_id)}, but "
                + exc.message.replace(f"writes to {name}", "writes", 1)
            ) from None
        state = _state(session, event_id)
    return Verdict(event_id, ref, was, wanted, state)


def _state(session: Session, event_id: int) -> str:
    state = session.scalar(select(PushEvent.state).where(PushEvent.id == event_id))
    session.rollback()
    return str(state)
