"""The direct claim path: the common claim in a handful of prebuilt Core statements.

Same rules as the ORM path in :mod:`forge_ci.coordinator.claims` (which documents them), in
fewer round trips; anything unusual is left to that path (the caller rolls back and runs it)::

    1 look     provider (FOR KEY SHARE) + replay? + waiting out a cancellation? + token reused?
               + every (repository, label set) with queued jobs in scope, with its fairness
               keys (last claim, oldest entry)              ─ one SELECT, also the SQLite pre-check
    [touch]    the provider's contact time, at most every 10 s
    2 take     the oldest head of the chosen repository's label sets, with its job, run,
               the requester's user row and membership, and on PostgreSQL the repository's
               scheduling row FOR UPDATE SKIP LOCKED          ─ one SELECT (index seeks)
    [wait]     PostgreSQL, every candidate busy: wait for one's lock, take again
    3 move     job queued -> running, run queued -> running (the state table decides both),
               the queue entry and its count                 ─ UPDATEs and a DELETE
    4 insert   the attempt (RETURNING id), its steps (one multi-row INSERT)
    5 read     the repository's variables for the assignment

Left to the ORM path: a replay, a reused attempt token, a provider waiting out its own
cancellation, a credential that is not valid (it raises the error), a requester who may no
longer run code (the job is cancelled there) and a job whose secrets cannot be given (it fails
there), a job that left the queue under our feet, and later rounds of one claim.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import (
    JSON,
    String,
    and_,
    bindparam,
    cast,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import actor_as_now, effective_role
from forge_ci.coordinator import secrets
from forge_ci.coordinator.assignments import build_assignment
from forge_ci.coordinator.attempts import may_run_code
from forge_ci.coordinator.claim_rows import (
    CLAIMED_COLUMNS,
    EPOCH,
    Candidate,
    ClaimOutcome,
    fairness_order,
    insert_steps,
    new_attempt,
)
from forge_ci.coordinator.credentials import hashes_match, token_hash
from forge_ci.coordinator.providers import authenticate_provider
from forge_ci.db import is_sqlite
from forge_ci.models import (
    Attempt,
    Job,
    Membership,
    Provider,
    ProviderGrant,
    QueueCount,
    QueuedJob,
    Repository,
    Run,
    RunSequence,
    User,
)
from forge_ci.models.base import table_of
from forge_ci.models.queue import key_labels, leave_queue
from forge_ci.protocol import Assignment, ClaimRequest

CONTACT_INTERVAL = timedelta(seconds=10)


class _Unhandled(enum.Enum):
    """The direct path does not decide this claim: the ORM path must."""

    UNHANDLED = 0


UNHANDLED = _Unhandled.UNHANDLED


@dataclass
class Look:
    """What the first statement saw: the provider, what needs the ORM path, the candidates."""

    provider_id: int
    state: str
    labels: frozenset[str]
    last_contact_at: datetime | None
    egress_policy: str | None
    #: A replay, a reused token or a provider waiting out its own cancellation.
    unusual: bool
    waiting: bool
    #: Candidates in fairness order (which of a repository's label sets goes first is decided
    #: by the take, after the lock).
    candidates: list[Candidate] = field(default_factory=list)

    def contact_due(self, now: datetime) -> bool:
        return self.last_contact_at is None or now - self.last_contact_at >= CONTACT_INTERVAL


class _Requester(NamedTuple):
    id: int
    name: str
    is_admin: bool
    is_active: bool


# --- the statements (built once per process, on first use: no work at import time) ------------


@cache
def _look_statement() -> Any:
    p = table_of(Provider)
    other = table_of(Provider).alias("other_providers")
    a = table_of(Attempt)
    counts = table_of(QueueCount)
    entries = table_of(QueuedJob)
    # The provider's own flags do not depend on the candidate row: uncorrelated subqueries (on
    # the provider found by its credential), so the database computes each once, by index.
    me = select(other.c.id).where(other.c.token_hash == bindparam("provider_hash"))
    replay = (
        select(a.c.id)
        .where(a.c.provider_id == me.scalar_subquery(), a.c.request_id == bindparam("request_id"))
        .scalar_subquery()
    )
    # Unended attempts by the state index: how many there are is bounded by capacity, while
    # the provider's attempts grow with its history (``+ 0`` keeps the planners off the
    # provider's index).
    waiting = (
        select(a.c.id)
        .where(
            a.c.state.in_([literal(states.LEASED), literal(states.RUNNING)]),
            a.c.provider_id + 0 == me.scalar_subquery(),
            a.c.cancelled_by_provider_change.is_(True),
        )
        .exists()
    )
    reused = or_(
        select(a.c.id).where(a.c.token_hash == bindparam("digest")).exists(),
        select(other.c.id).where(other.c.token_hash == bindparam("digest")).exists(),
    )
    granted = select(table_of(ProviderGrant).c.repository_id).where(
        table_of(ProviderGrant).c.provider_id == p.c.id
    )
    served = (
        select(func.max(a.c.claimed_at))
        .where(a.c.repository_id == counts.c.repository_id)
        .scalar_subquery()
    )

    def head(column: Any) -> Any:
        return (
            select(column)
            .where(
                entries.c.repository_id == counts.c.repository_id,
                entries.c.labels == counts.c.labels,
            )
            .order_by(entries.c.queued_at, entries.c.job_id)
            .limit(1)
            .scalar_subquery()
        )

    sequences = table_of(RunSequence)
    has_row = select(sequences.c.repository_id).where(
        sequences.c.repository_id == counts.c.repository_id
    )
    scoped = p.outerjoin(
        counts,
        and_(counts.c.queued > 0, or_(p.c.scope == "all", counts.c.repository_id.in_(granted))),
    )
    return (
        select(
            p.c.id,
            p.c.token_hash,
            p.c.state,
            p.c.labels.label("provider_labels"),
            p.c.last_contact_at,
            p.c.egress_policy,
            replay.label("replay"),
            waiting.label("waiting"),
            reused.label("reused"),
            counts.c.repository_id,
            counts.c.labels,
            served.label("served"),
            head(entries.c.queued_at).label("head_at"),
            head(entries.c.job_id).label("head_id"),
            has_row.exists().label("has_row"),
        )
        .select_from(scoped)
        .where(p.c.token_hash == bindparam("provider_hash"))
        .with_for_update(read=True, key_share=True, of=p)  # PostgreSQL only
    )


@cache
def _wait_statement() -> Any:
    """PostgreSQL: wait for a busy repository's scheduling row."""
    sequences = table_of(RunSequence)
    query = select(sequences.c.repository_id).where(
        sequences.c.repository_id == bindparam("repository_id")
    )
    return query.with_for_update()


@dataclass(frozen=True)
class TakenRun:
    """What the direct path reads of the taken job's run (see ``contexts.SnapshotRun``)."""

    id: int
    number: int
    repository_id: int
    ref: str
    sha: str
    workflow_path: str
    workflow_name: str | None
    requested_by_id: int | None
    requested_by_name: str
    context: dict[str, Any]
    actions: dict[str, Any] | None
    state: str


@dataclass(frozen=True)
class TakenJob:
    """What the direct path reads of the taken job: its own entry of the plan, not the plan."""

    id: int
    key: str
    job_id: str
    name: str
    needs: list[str]
    state: str
    plan_job: dict[str, Any]

    def definition(self) -> dict[str, Any]:
        return self.plan_job


_RUN_COLUMNS = tuple(f.name for f in fields(TakenRun))
_JOB_COLUMNS = ("id", "key", "job_id", "name", "needs", "state")


def _plan_entry(dialect: str) -> Any:
    """The job's own entry of its run's plan, extracted by the database (a run's plan holds
    every job; decoding all of it for one claim cost more than the rest of the read)."""
    jobs, runs = table_of(Job), table_of(Run)
    entry: Any
    if dialect == "postgresql":
        entry = runs.c.plan.op("->")(literal_column("'jobs'")).op("->")(jobs.c.position)
    else:
        path = literal("$.jobs[", String) + cast(jobs.c.position, String) + literal("]", String)
        entry = func.json_extract(runs.c.plan, path)
    return type_coerce(entry, JSON).label("plan_job")


@cache
def _take_statement(dialect: str, locking: bool = False) -> Any:
    """The take; ``locking`` (PostgreSQL): also the repository's scheduling row, ``FOR UPDATE
    SKIP LOCKED``, in the same round trip (no row: busy, or nothing queued any more)."""
    statement = _take(dialect)
    if not locking:
        return statement
    sequences = table_of(RunSequence)
    return statement.join(
        sequences, sequences.c.repository_id == table_of(QueueCount).c.repository_id
    ).with_for_update(of=sequences, skip_locked=True)


def _take(dialect: str) -> Any:
    jobs, runs, entries = table_of(Job), table_of(Run), table_of(QueuedJob)
    users, memberships, attempts = table_of(User), table_of(Membership), table_of(Attempt)
    counts, others = table_of(QueueCount), table_of(QueuedJob).alias("heads")
    # The head of each of the repository's label sets, by index seek (flat in queue depth),
    # and the oldest of those heads, read by the statement that takes the repository lock (not
    # in the look): a claim that took a head before it cannot make us pass over an older job of
    # another label set. One that commits between this statement's snapshot and its lock left
    # us a taken job: its move finds it no longer queued and the ORM path decides.
    head = (
        select(others.c.job_id)
        .where(others.c.repository_id == counts.c.repository_id, others.c.labels == counts.c.labels)
        .order_by(others.c.queued_at, others.c.job_id)
        .limit(1)
        .scalar_subquery()
    )
    last_number = (
        select(func.max(attempts.c.number))
        .where(attempts.c.job_id == entries.c.job_id)
        .scalar_subquery()
    )
    return (
        select(
            *(jobs.c[name].label(f"job_{name}") for name in _JOB_COLUMNS),
            *(runs.c[name].label(f"run_{name}") for name in _RUN_COLUMNS),
            _plan_entry(dialect),
            table_of(Repository).c.owner_id,
            users.c.id.label("user_id"),
            users.c.name.label("user_name"),
            users.c.is_admin,
            users.c.is_active,
            memberships.c.role,
            last_number.label("last_number"),
            entries.c.labels.label("queue_labels"),
        )
        .select_from(counts)
        .join(entries, entries.c.job_id == head)
        .join(jobs, jobs.c.id == entries.c.job_id)
        .join(runs, runs.c.id == jobs.c.run_id)
        .join(table_of(Repository), table_of(Repository).c.id == runs.c.repository_id)
        .outerjoin(users, users.c.id == runs.c.requested_by_id)
        .outerjoin(
            memberships,
            and_(
                memberships.c.repository_id == runs.c.repository_id,
                memberships.c.user_id == runs.c.requested_by_id,
            ),
        )
        .where(
            counts.c.repository_id == bindparam("repository_id"),
            counts.c.labels.in_(bindparam("labels", expanding=True)),
            counts.c.queued > 0,
        )
        .order_by(entries.c.queued_at, entries.c.job_id)
        .limit(1)
    )


@cache
def _move_statements() -> tuple[Any, Any]:
    return _to_running(table_of(Job), "job_pk"), _to_running(table_of(Run), "run_pk")


def _to_running(table: Any, key: str) -> Any:
    """queued -> running of the row ``key`` names, stamped ``moved_at``; ``revision`` grows with
    the shown change, as the ORM's counter does (models/revisions.py)."""
    return (
        update(table)
        .where(table.c.id == bindparam(key), table.c.state == states.QUEUED)
        .values(
            state=states.RUNNING,
            started_at=bindparam("moved_at", type_=table.c.started_at.type),
            revision=table.c.revision + 1,
        )
    )


@cache
def _insert_attempt() -> Any:
    attempts = table_of(Attempt)
    return insert(attempts).returning(attempts.c.id)


# --- the path ------------------------------------------------------------------------------------


def look(session: Session, token: str, request: ClaimRequest) -> Look | None:
    """The first statement; None when the credential is not a valid provider's."""
    rows = session.connection().execute(
        _look_statement(),
        {
            "provider_hash": token_hash(token),
            "request_id": request.request_id,
            "digest": token_hash(request.attempt_token),
        },
    )
    seen: Look | None = None
    found: dict[int, Candidate] = {}
    for row in rows:
        if seen is None:
            if row.state == "revoked" or not hashes_match(row.token_hash, token):
                return None
            seen = Look(
                provider_id=row.id,
                state=row.state,
                labels=frozenset(row.provider_labels.split(","))
                if row.provider_labels
                else frozenset(),
                last_contact_at=row.last_contact_at,
                egress_policy=row.egress_policy,
                unusual=row.replay is not None
                or bool(row.reused)
                or row.token_hash == token_hash(request.attempt_token),
                waiting=bool(row.waiting),
            )
        if row.repository_id is None or row.head_id is None:
            continue
        if not key_labels(row.labels) <= seen.labels:
            continue
        candidate = found.setdefault(
            row.repository_id,
            Candidate(row.repository_id, bool(row.has_row), served=row.served or EPOCH),
        )
        candidate.label_keys.append(row.labels)
        candidate.oldest = (
            row.head_at if candidate.oldest == EPOCH else min(candidate.oldest, row.head_at)
        )
    if seen is None:
        return None
    seen.candidates = fairness_order(list(found.values()))
    return seen


def nothing_to_claim(
    session: Session, token: str | None, request: ClaimRequest, now: datetime
) -> bool:
    """The SQLite pre-check (read-only, one statement): True when a claim would certainly
    find nothing, so empty polls never queue for the write lock. Raises BadCredential."""
    seen = look(session, token, request) if token is not None else None
    if seen is None:
        authenticate_provider(session, token)  # raises: not a valid provider credential
        return False
    if seen.unusual or seen.contact_due(now):
        return False
    if seen.state != "active":
        return True
    return not seen.waiting and not seen.candidates


def _touch(session: Session, seen: Look, now: datetime, egress_policy: str) -> None:
    values: dict[str, Any] = {}
    if seen.contact_due(now):
        values["last_contact_at"] = now
    # The policy is the provider's own setting: shown on the admin page as last reported.
    if egress_policy and seen.egress_policy != egress_policy:
        values["egress_policy"] = egress_policy
    if values:
        providers = table_of(Provider)
        session.connection().execute(
            update(providers).where(providers.c.id == seen.provider_id).values(**values)
        )


def claim_direct(
    session: Session,
    token: str | None,
    request: ClaimRequest,
    now: datetime,
    source: secrets.SecretSource,
    lease: timedelta,
) -> ClaimOutcome | _Unhandled:
    """One claim transaction (begun by the caller with ``begin_write``), or UNHANDLED: roll
    back and let the ORM path decide. The caller commits."""
    if token is None:
        return UNHANDLED
    seen = look(session, token, request)
    if seen is None or seen.unusual:
        return UNHANDLED
    _touch(session, seen, now, request.egress_policy)
    if seen.state != "active":
        return ClaimOutcome(None)
    if seen.waiting:
        return UNHANDLED
    postgres = not is_sqlite(session)
    wait = _wait_statement()
    busy: list[Candidate] = []
    for candidate in seen.candidates:
        # PostgreSQL: the take also locks the repository's scheduling row (skipping it when
        # another claimer holds it); a repository without one has nothing to lock.
        locking = postgres and candidate.has_row
        taken = _take_from(session, seen, candidate, request, now, source, lease, locking)
        if taken is not None:
            return taken if taken is UNHANDLED else ClaimOutcome(taken)
        if locking:
            # Locked by another claimer, or emptied since the look (rare: then the wait
            # below finds nothing, as it would after any other claimer emptied it).
            busy.append(candidate)
    if busy:
        # As the ORM path: wait for one busy repository, holding no other repository lock.
        chosen = random.choice(busy)
        session.connection().execute(wait, {"repository_id": chosen.repository_id})
        taken = _take_from(session, seen, chosen, request, now, source, lease)
        if taken is not None:
            return taken if taken is UNHANDLED else ClaimOutcome(taken)
        busy.remove(chosen)
    return ClaimOutcome(None, [candidate.repository_id for candidate in busy])


def _take_from(
    session: Session,
    seen: Look,
    candidate: Candidate,
    request: ClaimRequest,
    now: datetime,
    source: secrets.SecretSource,
    lease: timedelta,
    locking: bool = False,
) -> Assignment | _Unhandled | None:
    """The oldest queued job of the candidate's label sets leased, UNHANDLED, or None (their
    queues are empty; ``locking``: or the repository is another claimer's)."""
    statement = _take_statement(session.connection().dialect.name, locking)
    parameters = {"repository_id": candidate.repository_id, "labels": candidate.label_keys}
    row = session.connection().execute(statement, parameters).first()
    if row is None:
        return None
    return _lease(session, seen, row, row.queue_labels, request, now, source, lease)


def _lease(
    session: Session,
    seen: Look,
    row: Any,
    labels: str,
    request: ClaimRequest,
    now: datetime,
    source: secrets.SecretSource,
    lease: timedelta,
) -> Assignment | _Unhandled:
    run = TakenRun(**{name: getattr(row, f"run_{name}") for name in _RUN_COLUMNS})
    job = TakenJob(
        **{name: getattr(row, f"job_{name}") for name in _JOB_COLUMNS}, plan_job=row.plan_job
    )
    if run.requested_by_id is not None:
        requester = None
        if row.user_id is not None:
            requester = _Requester(row.user_id, row.user_name, row.is_admin, row.is_active)
        if not may_run_code(effective_role(actor_as_now(requester), row, row.role)):
            return UNHANDLED  # the ORM path cancels the job and says why
    plan_job = job.plan_job
    if secrets.references(plan_job) and _secret_refusal(session, source, run, job):
        return UNHANDLED  # the ORM path fails the job and says why
    connection = session.connection()
    move_job, move_run = _move_statements()
    states.require_transition("job", job.state, states.RUNNING)
    if connection.execute(move_job, {"job_pk": job.id, "moved_at": now}).rowcount != 1:
        return UNHANDLED
    if run.state == states.QUEUED:
        # No job of a queued run has started before, so this one's start is the run's.
        states.require_transition("run", run.state, states.RUNNING)
        connection.execute(move_run, {"run_pk": run.id, "moved_at": now})
    leave_queue(connection, job.id, run.repository_id, labels)
    attempt = new_attempt(
        job_id=job.id,
        number=(row.last_number or 0) + 1,
        provider_id=seen.provider_id,
        repository_id=run.repository_id,
        request=request,
        digest=token_hash(request.attempt_token),
        plan_job=plan_job,
        now=now,
        lease=lease,
    )
    values = {name: getattr(attempt, name) for name in CLAIMED_COLUMNS}
    attempt.id = connection.execute(_insert_attempt(), values).scalar_one()
    assignment = build_assignment(session, attempt, job, run, now, request.attempt_token)
    insert_steps(connection, attempt.id, plan_job, assignment)
    return assignment


def _secret_refusal(
    session: Session, source: secrets.SecretSource, run: TakenRun, job: TakenJob
) -> str | None:
    """The secret check of :func:`secrets.claim_refusal`, on the models (jobs that reference
    secrets only; the source's policy reads the run)."""
    full_run, full_job = session.get(Run, run.id), session.get(Job, job.id)
    assert full_run is not None and full_job is not None
    return secrets.claim_refusal(session, source, full_run, full_job)
