"""Confirming events: pinning what git moved, and recovering what a crash left open.

Everything here runs under the repository lock, which the SSH parent holds for a whole push (its
``git receive-pack`` inherits it). So while intents are open nobody else pushes to the
repository, and a ref's value says exactly what became of each intent:

- at the new value: git moved it -> pinned and confirmed;
- at the old value: git did not (it refused the update, the push failed) -> aborted;
- anything else: someone moved the ref outside forge-ci. Guessing could invent or lose an
  event, so writes are refused until an operator looks (NeedsInspection, naming the event).

``settle_push`` does this for one push's intents when its receive-pack has ended: that is how a
push's events are confirmed. ``settle_repository`` does it for every open intent of a repository
before every managed write (so a crash of an earlier push is resolved first) and in the worker's
scan.

Pins are written before the database commit: a crash between the two leaves a pin that the next
settle rewrites to the same value, never a confirmed event without its pin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pygit2
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from forge_ci.db import begin_write
from forge_ci.errors import NeedsInspection, NotFound
from forge_ci.gitstore import (
    has_object,
    open_repository,
    peeled_tag,
    pin,
    read_ref,
    repository_path,
)
from forge_ci.models import PushEvent, PushEventState, Repository
from forge_ci.models.base import utcnow
from forge_ci.packedrefs import add_packed_refs
from forge_ci.pushes.intents import PushContext, session_events
from forge_ci.refs import is_zero
from forge_ci.settings import Settings

OPEN_STATES = (PushEventState.PREPARED.value,)


@dataclass
class Settled:
    """What one settle did, for the caller's log and enqueueing."""

    confirmed: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    #: One line per intent that needs inspection (it stays open).
    problems: list[str] = field(default_factory=list)


def _git(settings: Settings, full_name: str) -> pygit2.Repository:
    owner, name = full_name.split("/", 1)
    return open_repository(repository_path(settings.repositories_dir, owner, name))


def settle_push(session: Session, settings: Settings, push: PushContext) -> Settled:
    """Resolve the open intents ``push`` recorded against the refs, after its receive-pack ended.

    Commits; ``problems`` names the intents that need inspection (they stay open, and the next
    write to the repository refuses until an operator resolves them).
    """
    if session.in_transaction():
        raise RuntimeError("settle_push() needs a session with no transaction in progress")
    begin_write(session)
    result = Settled()
    events = session_events(session, push, prepared=True)
    if events:
        _resolve_all(session, push.open_git(settings.repositories_dir), events, result)
    session.commit()
    return result


def settle_repository(session: Session, settings: Settings, repository_id: int) -> Settled:
    """Resolve the repository's open intents against its refs, commit, say what was confirmed.

    Raises NeedsInspection (after committing whatever could be settled) when an intent cannot be
    resolved; the message names each such event.
    """
    if session.in_transaction():  # the read below ends its transaction: never someone else's
        raise RuntimeError("settle_repository() needs a session with no transaction in progress")
    result = Settled()
    # Almost always there is nothing to settle: find that out with one read, not a write
    # transaction (on SQLite that would serialize every push of every repository). The caller's
    # lock keeps new intents for this repository from appearing in between.
    has_open = session.scalar(
        select(PushEvent.id)
        .where(PushEvent.repository_id == repository_id, PushEvent.state.in_(OPEN_STATES))
        .limit(1)
    )
    session.rollback()
    if has_open is None:
        return result
    begin_write(session)
    open_events = list(
        session.scalars(
            select(PushEvent)
            .where(PushEvent.repository_id == repository_id, PushEvent.state.in_(OPEN_STATES))
            .order_by(PushEvent.id)
        )
    )
    repository = session.get(Repository, repository_id)
    if repository is None:
        raise NotFound(f"repository {repository_id} not found")
    _resolve_all(session, _git(settings, repository.full_name), open_events, result)
    session.commit()
    if result.problems:
        raise needs_inspection(repository.full_name, result.problems)
    return result


def needs_inspection(full_name: str, problems: list[str]) -> NeedsInspection:
    """The refusal of writes to a repository whose intents ``problems`` name."""
    return NeedsInspection(
        f"writes to {full_name} are refused until an operator inspects it "
        '(see docs/ssh.md, "Recovery"):\n' + "\n".join(f"  {p}" for p in problems)
    )


def _describe(event: PushEvent) -> str:
    return (
        f"push event {event.id} ({event.ref} {event.old_sha[:12]} -> {event.new_sha[:12]}, "
        f"pushed by {event.pusher.name})"
    )


def _resolve_all(
    session: Session, git: pygit2.Repository, events: list[PushEvent], result: Settled
) -> None:
    moved: list[PushEvent] = []
    unmoved: list[PushEvent] = []
    for event in events:
        current = read_ref(git, event.ref)
        if current is None:  # absent: the "new" side of a deletion, the "old" of a creation
            at_new, at_old = event.is_deletion, is_zero(event.old_sha)
        else:
            at_new, at_old = current == event.new_sha, current == event.old_sha
        if at_new:
            if event.pin_ref is not None and not has_object(git, event.new_sha):
                result.problems.append(
                    f"{_describe(event)} needs inspection: its commit is missing from the "
                    "repository"
                )
            else:
                moved.append(event)
        elif at_old:
            unmoved.append(event)
        else:
            now = (
                "the ref no longer exists"
                if current is None
                else f"the ref is now at {current[:12]}"
            )
            result.problems.append(f"{_describe(event)} needs inspection: {now}")
    _pin_all(git, {e.pin_ref: e.new_sha for e in moved if e.pin_ref is not None})
    _move_all(session, unmoved, PushEventState.ABORTED)
    _move_all(session, moved, PushEventState.CONFIRMED)
    result.aborted += [event.id for event in unmoved]
    result.confirmed += [event.id for event in moved]


#: Ids per UPDATE: well under every database's limit on bound parameters.
_CHUNK = 500


def _move_all(session: Session, events: list[PushEvent], state: PushEventState) -> None:
    """Move prepared ``events`` to ``state`` along the state table, a few UPDATEs for all.

    Each event's move is checked against :data:`~forge_ci.models.push_events.TRANSITIONS`
    first; the UPDATE also requires the state the events were read in (under the lock nobody
    else settles them), and anything else is a bug that rolls the settle back.
    """
    for event in events:
        if not event.can_move_to(state):
            raise ValueError(
                f"push event {event.id}: {event.state} -> {state.value} is not allowed"
            )
    now = utcnow()
    for start in range(0, len(events), _CHUNK):
        chunk = [event.id for event in events[start : start + _CHUNK]]
        moved = session.execute(
            update(PushEvent)
            .where(PushEvent.id.in_(chunk), PushEvent.state.in_(OPEN_STATES))
            .values(state=state.value, settled_at=now)
            .execution_options(synchronize_session=False)
        )
        if moved.rowcount != len(chunk):  # type: ignore[attr-defined]
            raise RuntimeError(f"push events {chunk[0]}...: moved by someone else while settling")
    for event in events:  # the loaded objects say so too, without a second UPDATE at flush
        set_committed_value(event, "state", state.value)
        set_committed_value(event, "settled_at", now)


#: From this many pins in one settle on, they are written into packed-refs in one rewrite.
PACK_FROM = 16


def _pin_all(git: pygit2.Repository, pins: dict[str, str]) -> None:
    """Write every pin (name -> object id) before the confirming commit.

    Many at once go into ``packed-refs`` in one rewrite (``forge_ci.packedrefs``: 1,000 loose
    pins cost 0.6 s); a few, a name that already has a loose file (which would hide a packed
    record: a pin written again after a crash or a restore), or all of them when git holds the
    file's lock, as loose refs.
    """
    folder = Path(git.path)
    loose = {name: oid for name, oid in pins.items() if (folder / name).exists()}
    packed = {name: oid for name, oid in pins.items() if name not in loose}
    if len(packed) >= PACK_FROM and add_packed_refs(
        folder, packed, lambda oid: peeled_tag(git, oid)
    ):
        packed = {}
    for name, oid in (loose | packed).items():
        pin(git, name, oid)
