"""Intents: what a push's ``pre-receive`` report records before git moves any ref.

Called by the SSH parent on the hook's behalf (the hook holds no database connection; see
``forge_ci.hookwire``). ``record_intents`` commits before it returns: git moves refs only after
the answer, so the rows must be durable by then. When receive-pack has ended,
``forge_ci.pushes.settling.settle_push`` confirms (and pins) or aborts them against the refs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from forge_ci.db import begin_write
from forge_ci.errors import Conflict
from forge_ci.gitstore import has_object, open_repository, read_ref, repository_path
from forge_ci.models import PushEvent, PushEventState
from forge_ci.pushes.refpolicy import check_ref_updates
from forge_ci.refs import Update, is_zero


@dataclass(frozen=True)
class PushContext:
    """Who is pushing where: fixed by the SSH parent when the push starts, never by a hook."""

    repository_id: int
    pusher_id: int
    session_id: str
    #: ``owner/name``, to find the repository on disk without a query.
    full_name: str

    def open_git(self, repositories_dir: Path) -> pygit2.Repository:
        """The bare repository being pushed to."""
        owner, name = self.full_name.split("/", 1)
        return open_repository(repository_path(repositories_dir, owner, name))


def moves_git_will_try(git: pygit2.Repository, updates: Iterable[Update]) -> list[Update]:
    """The updates git will try to carry out, each with the old value it will really have.

    pre-receive hears the *client's* old values; git checks them only later, in its ref
    transaction (and under the repository lock nothing else moves a ref in between), so an
    intent recorded as the client said could be confirmed for a move git refused, or stop
    writes as "needs inspection". As receive-pack (git 2.39) does:

    - an update whose old value is not the ref's value now (zeros: the ref is absent) is
      refused by git: no intent;
    - a deletion whose old value names no object git has is carried out whatever the ref holds
      ("allowing deletion of corrupt ref"): its intent takes the ref's value now, and there is
      none when the ref does not exist ("deleting a non-existent ref").
    """
    found: list[Update] = []
    for update in updates:
        current = read_ref(git, update.ref)
        if is_zero(update.new) and (is_zero(update.old) or not has_object(git, update.old)):
            if current is not None:
                found.append(Update(current, update.new, update.ref))
            continue
        if (current or "0" * len(update.old)) == update.old:
            found.append(update)
    return found


def record_intents(session: Session, push: PushContext, updates: Iterable[Update]) -> list[int]:
    """Record one ``prepared`` intent per update and commit; return their ids.

    ``updates`` are those that make events (:func:`forge_ci.refs.events_in`; the hook request
    arrives filtered from :func:`forge_ci.hookwire.decode_request`).

    Idempotent per push: the same update reported again is not recorded twice. A different
    update of a ref this push already recorded is a Conflict (git never does that). Refs the
    policy refuses are refused here too, whoever the caller.
    """
    wanted = list(updates)
    check_ref_updates(wanted)
    begin_write(session)
    existing = {e.ref: e for e in session_events(session, push, [u.ref for u in wanted])}
    ids: list[int] = []
    rows: list[dict[str, object]] = []
    for update in wanted:
        known = existing.get(update.ref)
        if known is not None:
            if (known.old_sha, known.new_sha) != (update.old, update.new):
                raise Conflict(
                    f"{update.ref} was already recorded in this push with other values "
                    f"({known.old_sha[:12]} -> {known.new_sha[:12]})"
                )
            ids.append(known.id)
            continue
        rows.append(
            {
                "repository_id": push.repository_id,
                "pusher_id": push.pusher_id,
                "push_session": push.session_id,
                "ref": update.ref,
                "old_sha": update.old,
                "new_sha": update.new,
                "state": PushEventState.PREPARED.value,
            }
        )
    if rows:  # one multi-row INSERT ... RETURNING, not one ORM object per ref
        ids += session.scalars(insert(PushEvent).returning(PushEvent.id), rows)
    session.commit()
    return sorted(ids)


#: Refs per ``IN (...)``: well under every database's limit on bound parameters.
_CHUNK = 500


def session_events(
    session: Session,
    push: PushContext,
    refs: Iterable[str] | None = None,
    *,
    prepared: bool = False,
) -> list[PushEvent]:
    """The events of ``push`` (for these refs; only those still ``prepared``), oldest first.

    Found through the (push_session, ref) unique index.
    """
    query = select(PushEvent).where(PushEvent.push_session == push.session_id)
    if prepared:
        query = query.where(PushEvent.state == PushEventState.PREPARED.value)
    if refs is None:
        found = list(session.scalars(query))
    else:
        names = sorted(set(refs))
        found = []
        for start in range(0, len(names), _CHUNK):
            found += session.scalars(query.where(PushEvent.ref.in_(names[start : start + _CHUNK])))
    return sorted(found, key=lambda event: event.id)
