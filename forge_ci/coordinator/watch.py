"""A run page's poll in one statement: who asks, whether they may read the run, its change token.

Fifty people watching a running run poll ``.../updates`` every two seconds, and nearly every
poll finds nothing changed; such a poll should cost about what a trivial page does. One Core
statement on a plain connection (no ORM session, no ORM objects) reads everything it decides
from, as it is now::

    the browser session's user      live session (signins.live_session), the user row itself
    the repository, the membership  the user's role there (authz.effective_role, as repos does)
    the run's change counters       with the requester's rights (runs.changes.counter_columns)
    the providers                   what the queue blockers follow (blockers.provider_rows)

The caller (``web/views/live.py``) checks the cookie's binding to that user itself, asks
:meth:`RunWatch.role_of` for the user's role in the repository, and compares
:meth:`RunWatch.tag` with the reader's ETag. Nothing is kept between polls: every poll rechecks
the session, the user (active, administrator) and the membership, so a reader removed from the
repository or signed out is refused on the next poll whatever tag they send. The caller answers
anything but "authorized and unchanged" the ordinary way (``repos.repository_access`` and the
use cases), so refusals keep one implementation; such an answer's tag comes from
:func:`run_tag_in`, the same columns read in the request's own transaction, before the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, SQLColumnExpression, and_, bindparam, select
from sqlalchemy.orm import Session, aliased

from forge_ci.authz import Role, actor_as_now, effective_role
from forge_ci.coordinator.blockers import (
    RECENT_CONTACT,
    ProviderState,
    canonical_rows,
    provider_rows,
    states_of_rows,
)
from forge_ci.coordinator.direct_claim_sql import prepared as compiled_once
from forge_ci.errors import InvalidInput, NotFound
from forge_ci.models import Membership, Repository, Run, User, WebSession
from forge_ci.names import split_full_name
from forge_ci.repos import RepositoryAccess
from forge_ci.runs.changes import RunCounters, change_token, counter_columns, counters_of
from forge_ci.signins import SessionUser, live_session, session_token_hash


@dataclass(frozen=True)
class _Owner:
    owner_id: int


@dataclass(frozen=True)
class RunTag:
    """What a run page's change token is computed from (:meth:`tag`)."""

    owner_id: int
    counters: RunCounters
    #: The providers that may serve the repository, as :func:`canonical_rows` text.
    providers: str

    def tag(self, role: Role) -> str:
        """The change token of the run page for a reader with ``role``. What the page shows
        depends on the run's rows, on whether the reader may use its buttons and, while jobs
        are queued, on what the queue blockers are computed from: the requester's rights and
        the providers."""
        counters = self.counters
        queue: tuple[object, ...] = ()
        if counters.has_queued:
            queue = (self.owner_id, *counters.requester, self.providers)
        # The run's id too: two runs of one shape (or a recreated repository's run #1) have
        # the same counters.
        return change_token((counters.id, *counters.values), role >= Role.ADMIN, *queue)

    def provider_states(self) -> tuple[ProviderState, ...]:
        """The providers as this tag saw them (what the queue is explained from)."""
        return states_of_rows(self.providers)


def run_tag_in(session: Session, access: RepositoryAccess, number: int, now: datetime) -> RunTag:
    """What run ``number``'s change token is computed from, in a repository the request has
    authorized (readers; NotFound as for the run): one statement."""
    repository = access.require(Role.READ)
    row = (
        session.connection()
        .execute(
            _tag_statement(),
            {"repository_id": repository.id, "number": number, "cutoff": now - RECENT_CONTACT},
        )
        .first()
    )
    counters = counters_of(row[:-1], repository.id) if row is not None else None
    if row is None or counters is None:
        raise NotFound(f"run #{number} not found in {repository.full_name}")
    return RunTag(repository.owner_id, counters, canonical_rows(row[-1]))


@dataclass(frozen=True)
class RunWatch:
    """What :func:`watch_run` read: decide nothing from it but through :meth:`role_of`."""

    #: The user of the live session the token names (None: no such session, or it ended).
    user: SessionUser | None
    owner_id: int
    #: That user's membership role column in the repository.
    membership: str | None
    #: What the run's token is computed from (None: the repository has no such run).
    run: RunTag | None

    def role_of(self, user: SessionUser | None) -> Role | None:
        """The role in the repository of :attr:`user`, once the caller has checked that the
        request's cookie belongs to it (pass it back; anything else has no role)."""
        if user is None or user is not self.user:
            return None
        return effective_role(actor_as_now(user), _Owner(self.owner_id), self.membership)

    def tag(self, role: Role | None) -> str | None:
        """The run page's change token for a reader with ``role`` (:meth:`role_of`); None for
        no reader, or no such run."""
        if self.run is None or role is None or role < Role.READ:
            return None
        return self.run.tag(role)


def watch_run(
    connection: Connection, session_token: str, full_name: str, number: int, now: datetime
) -> RunWatch | None:
    """Read what an unchanged poll of run ``number`` of ``full_name`` is decided from, in one
    statement (None: no such repository). ``session_token`` is the browser session's token
    from its cookie."""
    try:
        owner, name = split_full_name(full_name)
    except InvalidInput:
        return None
    values = {
        "token_hash": session_token_hash(session_token),
        "now": now,
        "owner": owner,
        "name": name,
        "number": number,
        "cutoff": now - RECENT_CONTACT,
    }
    # Compiled once (:mod:`.driver_sql`): SQLAlchemy's execution of it (the cache-key lookup,
    # constructing and processing some thirty constant values) cost half as much as the
    # statement itself. Run through the connection, so that its events and errors are
    # SQLAlchemy's as ever.
    prepared = compiled_once(connection, watch_statement)
    row = connection.exec_driver_sql(prepared.sql, prepared.parameters(values)).first()
    if row is None:
        return None
    user_id, user_name, is_admin, is_active, password_hash, repository_id, owner_id, role = row[:8]
    user = (
        SessionUser(user_id, user_name, bool(is_admin), bool(is_active), password_hash)
        if user_id is not None
        else None
    )
    counters = counters_of(row[8:-1], repository_id)
    run = RunTag(owner_id, counters, canonical_rows(row[-1])) if counters is not None else None
    return RunWatch(user, owner_id, role, run)


@cache
def _tag_statement() -> Select[Any]:
    """Built once, like :func:`_watch_statement`."""
    columns: tuple[SQLColumnExpression[Any], ...] = (*counter_columns(), provider_rows())
    return select(*columns).where(
        Run.repository_id == bindparam("repository_id"), Run.number == bindparam("number")
    )


@cache
def watch_statement() -> Select[Any]:
    """Built once: every unchanged poll runs it, and building it costs more than running it."""
    owner = aliased(User)
    viewer = aliased(User)
    columns: tuple[SQLColumnExpression[Any], ...] = (
        viewer.id,
        viewer.name,
        viewer.is_admin,
        viewer.is_active,
        viewer.password_hash,
        Repository.id,
        Repository.owner_id,
        Membership.role,
        *counter_columns(),
        provider_rows(),
    )
    return (
        select(*columns)
        .select_from(Repository)
        .join(owner, owner.id == Repository.owner_id)
        .outerjoin(WebSession, live_session())
        .outerjoin(viewer, viewer.id == WebSession.user_id)
        .outerjoin(
            Membership,
            and_(Membership.repository_id == Repository.id, Membership.user_id == viewer.id),
        )
        .outerjoin(Run, and_(Run.repository_id == Repository.id, Run.number == bindparam("number")))
        .where(owner.name == bindparam("owner"), Repository.name == bindparam("name"))
    )
