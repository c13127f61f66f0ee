"""Settling a repository's open intents: recovery and pinning, under the repository lock.

Run before every managed write (so a crash of an earlier push is resolved first) and after every
push (so this push's events are pinned and confirmed before the lock is released). For each
open event, oldest first:

- ``prepared`` (git's answer never arrived: a crash, a lost hook): compare with the ref now.
  Ref at the new value -> git moved it -> committed. Ref at the old value -> git did not ->
  aborted. Anything else -> someone moved the ref outside forge-ci; guessing could invent or
  lose an event, so writes are refused until an operator looks (NeedsInspection).
- ``committed``: pin the new commit under ``refs/forge-ci/push-events/<id>`` (deletions have
  nothing to pin), then confirmed.

Pins are written before the database commit: a crash between the two leaves a pin that the next
settle rewrites to the same value, never a confirmed event without its pin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pygit2
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.db import begin_write
from forge_ci.errors import NeedsInspection, NotFound
from forge_ci.gitstore import has_object, open_repository, pin, read_ref, repository_path
from forge_ci.hookwire import is_zero
from forge_ci.models import PushEvent, PushEventState, Repository
from forge_ci.settings import Settings

OPEN_STATES = (PushEventState.PREPARED.value, PushEventState.COMMITTED.value)


@dataclass
class Settled:
    """What one settle did, for the caller's log and enqueueing."""

    confirmed: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)


def settle_repository(session: Session, settings: Settings, repository_id: int) -> Settled:
    """Resolve and pin the repository's open events, commit, and say which were confirmed.

    The caller holds the repository lock. Raises NeedsInspection (after committing whatever
    could be settled) when an event cannot be resolved; the message names each such event.
    """
    begin_write(session)
    open_events = list(
        session.scalars(
            select(PushEvent)
            .where(PushEvent.repository_id == repository_id, PushEvent.state.in_(OPEN_STATES))
            .order_by(PushEvent.id)
        )
    )
    result = Settled()
    if not open_events:
        session.commit()
        return result
    repository = session.get(Repository, repository_id)
    if repository is None:
        raise NotFound(f"repository {repository_id} not found")
    git = open_repository(
        repository_path(settings.repositories_dir, repository.owner.name, repository.name)
    )
    problems: list[str] = []
    for event in open_events:
        if event.state == PushEventState.PREPARED.value:
            problem = _resolve_prepared(git, event, result)
            if problem:
                problems.append(problem)
                continue
        if event.state == PushEventState.COMMITTED.value:
            problem = _confirm(git, event)
            if problem:
                problems.append(problem)
                continue
            result.confirmed.append(event.id)
    session.commit()
    if problems:
        raise NeedsInspection(
            f"writes to {repository.full_name} are refused until an operator inspects it "
            '(see docs/ssh.md, "Recovery"):\n' + "\n".join(f"  {p}" for p in problems)
        )
    return result


def _describe(event: PushEvent) -> str:
    return (
        f"push event {event.id} ({event.ref} {event.old_sha[:12]} -> {event.new_sha[:12]}, "
        f"pushed by {event.pusher.name})"
    )


def _resolve_prepared(git: pygit2.Repository, event: PushEvent, result: Settled) -> str | None:
    current = read_ref(git, event.ref)
    if current is None:  # an absent ref is the "new" side of a deletion, the "old" of a creation
        at_new, at_old = event.is_deletion, is_zero(event.old_sha)
    else:
        at_new, at_old = current == event.new_sha, current == event.old_sha
    if at_new:
        event.move_to(PushEventState.COMMITTED)
    elif at_old:
        event.move_to(PushEventState.ABORTED)
        result.aborted.append(event.id)
    else:
        now = "the ref no longer exists" if current is None else f"the ref is now at {current[:12]}"
        return f"{_describe(event)} needs inspection: {now}"
    return None


def _confirm(git: pygit2.Repository, event: PushEvent) -> str | None:
    pin_ref = event.pin_ref
    if pin_ref is not None:
        if not has_object(git, event.new_sha):
            return f"{_describe(event)} needs inspection: its commit is missing from the repository"
        pin(git, pin_ref, event.new_sha)
    event.move_to(PushEventState.CONFIRMED)
    return None
