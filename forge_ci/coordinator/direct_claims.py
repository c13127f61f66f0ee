"""The direct claim path: the common claim in a handful of prebuilt Core statements.

Same rules as the ORM path in :mod:`forge_ci.coordinator.claims` (which documents them), in
fewer round trips; anything unusual is left to that path (this one rolls back its own
connection, and the caller runs that path)::

    1 look     provider (FOR KEY SHARE) + replay? + waiting out a cancellation? + token reused?
               + every (repository, label set) with queued jobs in scope, with its fairness
               keys (last claim, oldest entry)              ─ one SELECT; on SQLite made
               before the write lock (empty polls never queue for it) and not again under
               it when no other connection committed in between; on PostgreSQL sent with
               the transaction's BEGIN and its plan mode (generic plans) in one round trip
    [touch]    the provider's contact time, at most every 10 s
    2 take     the oldest head of the first candidate's label sets, with its job, run, the
               requester's user row and membership; on PostgreSQL of the first candidate in
               fairness order whose scheduling row no other claimer holds, that row locked
               FOR UPDATE SKIP LOCKED                          ─ one SELECT (index seeks)
    [wait]     PostgreSQL, every candidate busy: wait for one's lock, take again (a later
               round of the claim waits for the lock it was told of first, if its look
               still shows work there)
    3 start    job queued -> running, run queued -> running (the state table decides both),
               the queue entry and its count, the repository's last claim (``served_at``
               on its scheduling row), the attempt and its steps ─ PostgreSQL: one
               statement of data-modifying CTEs (the attempt's id was reserved by the take,
               so the assignment and its steps are built first), sent with 4 and the COMMIT
               in one round trip (pipeline); SQLite: UPDATEs, a DELETE and the INSERT
    4 read     the repository's variables for the assignment
    5 insert   SQLite: the attempt's steps (one executemany), then the commit

Every statement is written in Core (:mod:`.direct_claim_sql`) and run on the bare DB-API
cursor (:mod:`.driver_sql`), in a transaction of a pooled connection used through its driver
(:class:`forge_ci.db.DriverConnection`) rather than a session's or a Core connection's; a
job with ``needs`` or secrets gets an ORM session joined to that transaction.

Left to the ORM path: a replay, a reused attempt token, a provider waiting out its own
cancellation, a credential that is not valid (it raises the error), a requester who may no
longer run code (the job is cancelled there), a job whose secrets cannot be given (it fails
there), and on SQLite a job that left the queue under our feet (on PostgreSQL that is a
claim that committed between the take's snapshot and its lock: the next round takes again).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, NamedTuple

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import actor_as_now, effective_role
from forge_ci.coordinator import direct_claim_sql as sql
from forge_ci.coordinator import secrets
from forge_ci.coordinator.assignments import build_assignment
from forge_ci.coordinator.attempts import may_run_code
from forge_ci.coordinator.claim_rows import (
    EPOCH,
    Candidate,
    ClaimOutcome,
    IssuedTokens,
    fairness_order,
    leased_attempt,
    lists_repository,
    step_rows,
)
from forge_ci.coordinator.credentials import hashes_match, token_hash
from forge_ci.coordinator.direct_claim_sql import TakenJob, TakenRun
from forge_ci.coordinator.driver_sql import cursor_of, execute_together
from forge_ci.db import DriverConnection
from forge_ci.models import (
    Job,
    Run,
)
from forge_ci.models.queue import key_labels
from forge_ci.protocol import Assignment, ClaimRequest
from forge_ci.secrets.policy import variables_query, variables_statement

CONTACT_INTERVAL = timedelta(seconds=10)


class _Unhandled(enum.Enum):
    """The direct path does not decide this claim: the ORM path must."""

    UNHANDLED = 0


class _Left(enum.Enum):
    """The taken job was no longer queued when it was to move (nothing was written)."""

    LEFT_QUEUE = 0


UNHANDLED = _Unhandled.UNHANDLED
_LEFT_QUEUE = _Left.LEFT_QUEUE


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
    #: SQLite's pre-check: ``PRAGMA data_version`` in the look's own snapshot.
    data_version: int | None = None

    def contact_due(self, now: datetime) -> bool:
        return self.last_contact_at is None or now - self.last_contact_at >= CONTACT_INTERVAL


class _Requester(NamedTuple):
    id: int
    name: str
    is_admin: bool
    is_active: bool


# --- the path ------------------------------------------------------------------------------------


def look(
    connection: DriverConnection,
    cursor: Any,
    token: str,
    request: ClaimRequest,
    digest: str,
    versioned: bool = False,
) -> Look | None:
    """The first statement; None when the credential is not a valid provider's. On PostgreSQL
    it opens the transaction, with the generic plans set (``generic_plans_statement``) in the
    same round trip. ``versioned``: SQLite's pre-check, which also reads the data version."""
    statement = sql.prepared(connection, sql.look_statement, versioned)
    values = {
        "provider_hash": token_hash(token),
        "request_id": request.request_id,
        "digest": digest,
    }
    if connection.dialect.name == "postgresql":
        generic = sql.prepared(connection, sql.generic_plans_statement)
        _, looked = execute_together(connection, [(generic, {}), (statement, values)])
        rows = statement.read(looked)
    else:
        rows = statement.rows(cursor, values)
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
                unusual=row.replay is not None or bool(row.reused) or row.token_hash == digest,
                waiting=bool(row.waiting),
                data_version=row.data_version if versioned else None,
            )
        if row.repository_id is None or row.head_at is None:
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


@dataclass
class EarlyLook:
    """SQLite: the look made before the write lock, so that empty polls never queue for it, on
    the connection the claim then takes the lock on. Still true under the lock when no other
    connection committed in between: ``PRAGMA data_version`` on this connection changes exactly
    when another one commits, so the claim then skips its own look."""

    connection: DriverConnection
    #: None: the credential is not a valid provider's.
    seen: Look | None

    def nothing_to_claim(self, now: datetime) -> bool | None:
        """True when a claim would certainly find nothing; None for an invalid credential
        (the caller authenticates it, in a read-only session, to say why)."""
        seen = self.seen
        if seen is None:
            return None
        if seen.unusual or seen.contact_due(now):
            return False
        if seen.state != "active":
            return True
        return not seen.waiting and not seen.candidates

    def still_true(self, cursor: Any) -> Look | None:
        """The look, when nothing was committed since it (call in the write transaction)."""
        if self.seen is None:
            return None
        (version,) = cursor.execute("PRAGMA data_version").fetchone()
        return self.seen if version == self.seen.data_version else None


@contextmanager
def early_look(
    engine: Engine, token: str, request: ClaimRequest, digest: str
) -> Iterator[EarlyLook]:
    """The SQLite look before the write lock: one statement outside any transaction (so it
    takes no lock, and it reads the data version in its own snapshot), on a connection of the
    writers' ``engine`` held until the block ends: the claim's own transaction runs on it (see
    :func:`claim_direct`). On a reader's connection every page another connection wrote since
    is read again (the look cost about 1.6x)."""
    with DriverConnection(engine) as connection:
        try:
            seen = look(connection, connection.cursor(), token, request, digest, versioned=True)
        except DBAPIError as error:
            connection.invalidate_if_gone(error)
            raise
        yield EarlyLook(connection, seen)


def _touch(
    connection: DriverConnection, cursor: Any, seen: Look, now: datetime, egress_policy: str
) -> None:
    values: dict[str, Any] = {}
    if seen.contact_due(now):
        values["last_contact_at"] = now
    # The policy is the provider's own setting: shown on the admin page as last reported.
    if egress_policy and seen.egress_policy != egress_policy:
        values["egress_policy"] = egress_policy
    if values:
        statement = sql.prepared(connection, sql.touch_statement, tuple(sorted(values)))
        statement.execute(cursor, {**values, "provider_pk": seen.provider_id})


@dataclass
class _Claim:
    """One direct claim's inputs and its connection (statements run on its bare cursor)."""

    connection: DriverConnection
    cursor: Any
    request: ClaimRequest = field(repr=False)  # the attempt token stays out of reprs
    issued: IssuedTokens
    now: datetime
    source: secrets.SecretSource
    lease: timedelta
    _orm: Session | None = None
    #: Whether the transaction holds a repository's lock (then it waits for no other).
    holding: bool = False

    def session(self) -> Session:
        """A session in this claim's transaction, for the model-based checks (a job with
        needs or secrets); it neither commits nor rolls back the transaction."""
        if self._orm is None:
            self._orm = Session(bind=self.connection.joined(), expire_on_commit=False)
        return self._orm


def claim_direct(
    engine: Engine,
    token: str | None,
    request: ClaimRequest,
    now: datetime,
    source: secrets.SecretSource,
    lease: timedelta,
    issued: IssuedTokens | None = None,
    wait_for: int | None = None,
    early: EarlyLook | None = None,
) -> ClaimOutcome | _Unhandled:
    """One claim transaction, committed, or UNHANDLED (rolled back: let the ORM path decide).
    The transaction is a pooled connection of the writers' ``engine`` used through its driver
    (:class:`forge_ci.db.DriverConnection`; ``BEGIN IMMEDIATE`` on SQLite), not an ORM
    session's nor a Core connection's: their machinery cost about as much as the statements.
    ``issued``: the fresh token's derived values, computed before the transaction (else
    here). ``wait_for`` (PostgreSQL, a later round of one claim): a repository that was busy,
    whose lock this transaction waits for first. ``early`` (SQLite): the look before the lock,
    whose connection this transaction uses (and closes), and whose rows it uses when they are
    still true."""
    if token is None:
        return UNHANDLED
    issued = issued or IssuedTokens.of(request.attempt_token)
    # The early look's connection too is closed at the end (rolled back if still in a
    # transaction): a claim holds one pooled connection at a time, and a later round or the
    # ORM path never waits for this transaction's write lock.
    with early.connection if early else DriverConnection(engine) as connection:
        connection.begin()
        claim = _Claim(connection, cursor_of(connection), request, issued, now, source, lease)
        try:
            seen = early.still_true(claim.cursor) if early else None
            outcome = _claim(claim, token, wait_for, seen)
        except DBAPIError as error:
            connection.invalidate_if_gone(error)
            raise
        finally:
            if claim._orm is not None:
                claim._orm.close()
        if outcome is UNHANDLED:
            connection.rollback()
        else:
            connection.commit()
        return outcome


def _claim(
    claim: _Claim, token: str, wait_for: int | None, seen: Look | None
) -> ClaimOutcome | _Unhandled:
    """The claim in ``claim``'s transaction; ``seen``: the look, when one made before the lock
    is still true (else it is made here)."""
    connection, request, now = claim.connection, claim.request, claim.now
    if seen is None:
        seen = look(connection, claim.cursor, token, request, claim.issued.digest)
    if seen is None or seen.unusual:
        return UNHANDLED
    _touch(connection, claim.cursor, seen, now, request.egress_policy)
    if seen.state != "active":
        return ClaimOutcome(None)
    if seen.waiting:
        return UNHANDLED
    postgres = connection.dialect.name == "postgresql"
    if wait_for is not None and postgres and lists_repository(seen.candidates, wait_for):
        # A later round: the one lock this transaction waits for (it holds none yet). One
        # whose repository the look shows emptied since takes as a first round does.
        _wait_for(claim, wait_for)
    busy: list[Candidate] = []
    for lockable, group in _groups(seen.candidates, postgres):
        if lockable:
            # PostgreSQL: the first of these repositories no other claimer holds, locked.
            taken = _take_first_free(claim, seen, group)
            if taken is not None:
                return _outcome(taken)
            # Each was locked by another claimer, or emptied since the look (rare: then the
            # wait below finds nothing, as it would after any other claimer emptied it).
            busy.extend(group)
            continue
        for candidate in group:
            taken = _take_from(claim, seen, candidate)
            if taken is not None:
                return _outcome(taken)
    if busy and not claim.holding:
        # As the ORM path: wait for one busy repository, holding no other repository lock.
        chosen = random.choice(busy)
        _wait_for(claim, chosen.repository_id)
        taken = _take_from(claim, seen, chosen)
        if taken is not None:
            return _outcome(taken)
        busy.remove(chosen)
    return ClaimOutcome(None, [candidate.repository_id for candidate in busy])


def _groups(candidates: list[Candidate], postgres: bool) -> Iterator[tuple[bool, list[Candidate]]]:
    """The candidates in fairness order, in runs of those whose take locks the repository's
    scheduling row (PostgreSQL, a repository with one) and of those whose does not."""
    for lockable, group in groupby(candidates, key=lambda c: postgres and c.has_row):
        yield lockable, list(group)


def _wait_for(claim: _Claim, repository_id: int) -> None:
    """PostgreSQL: wait for the repository's scheduling row and lock it."""
    statement = sql.prepared(claim.connection, sql.wait_statement)
    statement.execute(claim.cursor, {"repository_id": repository_id}).fetchall()
    claim.holding = True


#: What a take ends in: a leased job, a decided outcome, the ORM path, or nothing taken.
_Taken = Assignment | ClaimOutcome | _Unhandled | None


def _outcome(taken: Assignment | ClaimOutcome | _Unhandled) -> ClaimOutcome | _Unhandled:
    return ClaimOutcome(taken) if isinstance(taken, Assignment) else taken


def _take_first_free(claim: _Claim, seen: Look, group: list[Candidate]) -> _Taken:
    """The oldest queued job of the first repository of ``group`` that no other claimer holds
    leased (its lock taken in the same statement), or None (every one was busy or had nothing
    queued); see :func:`_left_queue` for a job taken meanwhile."""
    keys = sorted({key for candidate in group for key in candidate.label_keys})
    statement = sql.prepared(claim.connection, sql.first_free_take_statement)
    repositories = [candidate.repository_id for candidate in group]
    while repositories:
        row = statement.first(claim.cursor, {"repositories": repositories, "label_keys": keys})
        if row is None:
            return None
        claim.holding = True
        if row.job_id is not None:
            leased = _lease(claim, seen, row)
            return _left_queue(claim, row.queue_repository) if leased is _LEFT_QUEUE else leased
        # Locked, but the take found no head where the count says one is queued (a count out
        # of step with its entries): passed over, its lock held to the transaction's end.
        repositories.remove(row.locked_repository)
    return None


def _take_from(claim: _Claim, seen: Look, candidate: Candidate) -> _Taken:
    """The oldest queued job of the candidate's label sets leased, or None (their queues are
    empty). Takes no lock: the repository has no scheduling row, or this transaction holds
    it."""
    connection = claim.connection
    keys = candidate.label_keys
    statement = sql.prepared(connection, sql.take_statement, connection.dialect.name, len(keys))
    parameters: dict[str, Any] = {f"labels_{i}": key for i, key in enumerate(keys)}
    parameters["repository_id"] = candidate.repository_id
    row = statement.first(claim.cursor, parameters)
    if row is None:
        return None
    leased = _lease(claim, seen, row)
    return _left_queue(claim, candidate.repository_id) if leased is _LEFT_QUEUE else leased


def _left_queue(claim: _Claim, repository_id: int) -> ClaimOutcome | _Unhandled:
    """The taken job was no longer queued when it was to move, and nothing was written. On
    PostgreSQL the take's snapshot predates its lock, so a claimer that committed in between
    had taken it; the writes' round trip committed the transaction, and the next round waits
    for the repository (free now) and takes again. On SQLite (which serializes claims, so a
    job that left the queue left it by another way) the ORM path decides."""
    if claim.connection.dialect.name == "postgresql":
        return ClaimOutcome(None, [repository_id])
    return UNHANDLED


def _lease(claim: _Claim, seen: Look, row: Any) -> Assignment | _Unhandled | _Left:
    """The taken row's job leased; UNHANDLED (the ORM path decides), or _LEFT_QUEUE (the job
    is no longer queued). On PostgreSQL the transaction is committed either way but for
    UNHANDLED (with the writes, in their round trip)."""
    if row.plan_job is None:
        # A job whose run's plan had no entry for it when migration 0011 copied the entries
        # (none can be made since): the ORM path decides, as it did before the copies.
        return UNHANDLED
    run = TakenRun(**{name: getattr(row, f"run_{name}") for name in sql.RUN_COLUMNS})
    job = TakenJob(
        **{name: getattr(row, f"job_{name}") for name in sql.JOB_COLUMNS}, plan_job=row.plan_job
    )
    if run.requested_by_id is not None:
        requester = None
        if row.user_id is not None:
            requester = _Requester(row.user_id, row.user_name, row.is_admin, row.is_active)
        if not may_run_code(effective_role(actor_as_now(requester), row, row.role)):
            return UNHANDLED  # the ORM path cancels the job and says why
    plan_job = job.plan_job
    if secrets.references(plan_job) and _secret_refusal(claim.session(), claim.source, run, job):
        return UNHANDLED  # the ORM path fails the job and says why
    connection, cursor, now = claim.connection, claim.cursor, claim.now
    states.require_transition("job", job.state, states.RUNNING)
    if run.state == states.QUEUED:
        # No job of a queued run has started before, so this one's start is the run's.
        states.require_transition("run", run.state, states.RUNNING)
    attempt = leased_attempt(
        job_id=job.id,
        number=(row.last_number or 0) + 1,
        provider_id=seen.provider_id,
        repository_id=run.repository_id,
        request=claim.request,
        digest=claim.issued.digest,
        plan_job=plan_job,
        now=now,
        lease=claim.lease,
        issued=claim.issued,
    )
    values = attempt.values()
    # The ORM session is for the ``needs`` context only (the variables are read here).
    models = claim.session() if job.needs else None
    reserved = getattr(row, "reserved_id", None)
    if reserved is None:
        # SQLite: the attempt's id comes from its insert, then the steps are inserted.
        started = _start(claim, job.id, run, row.queue_labels, values)
        if started is None:
            return _LEFT_QUEUE
        attempt_id, variables = started
        attempt = attempt._replace(id=attempt_id)
        assignment = build_assignment(
            models, attempt, job, run, now, claim.issued.job_token, variables
        )
        steps = step_rows(attempt.id, plan_job, assignment)
        if steps:
            sql.prepared(connection, sql.insert_step).execute_many(cursor, steps)
        return assignment
    # PostgreSQL: the id was reserved by the take, so the assignment (but for the variables,
    # read with the writes) and its steps are known before the writes, which insert them too.
    attempt = attempt._replace(id=reserved)
    assignment = build_assignment(models, attempt, job, run, now, claim.issued.job_token, {})
    steps = step_rows(attempt.id, plan_job, assignment)
    started = _start(claim, job.id, run, row.queue_labels, {**values, "id": reserved}, steps)
    if started is None:
        return _LEFT_QUEUE
    return replace(assignment, contexts={**assignment.contexts, "vars": started[1]})


def _start(
    claim: _Claim,
    job_id: int,
    run: TakenRun,
    labels: str,
    values: dict[str, Any],
    steps: list[dict[str, Any]] | None = None,
) -> tuple[int, dict[str, str]] | None:
    """The claim's writes: the job (and a queued run) moved to running, its queue entry gone
    and count dropped, the repository stamped as served, the attempt inserted; and the
    ``vars`` context read. The attempt's id and the variables, or None when the job was no
    longer queued. PostgreSQL: the writes, with the attempt's ``steps``, in one statement
    (``start_statement``), sent with the read and the transaction's COMMIT in one round trip;
    SQLite, where a statement costs no round trip: one each, as ``models.queue.leave_queue``
    (the caller inserts the steps)."""
    connection, cursor, now = claim.connection, claim.cursor, claim.now
    _, parameters = variables_query(run.repository_id, run.ref, run.workflow_path)
    read = sql.prepared(connection, variables_statement, parameters["branch"] is not None)
    run_queued = run.state == states.QUEUED
    moves = {
        "job_pk": job_id,
        "run_pk": run.id,
        "repository_pk": run.repository_id,
        "moved_at": now,
    }
    if connection.dialect.name == "postgresql":
        planned = steps or []
        arrays = {
            "step_positions": [step["position"] for step in planned],
            "step_ids": [step["step_id"] for step in planned],
            "step_names": [step["name"] for step in planned],
        }
        start = sql.prepared(connection, sql.start_statement, run_queued)
        # Everything the assignment needs was read before: commit in the same round trip,
        # which releases the repository's lock one round trip sooner.
        started, found = execute_together(
            connection, [(start, {**values, **moves, **arrays}), (read, parameters)], commit=True
        )
        attempt = started.fetchone()
        if attempt is None:
            return None
        attempt_id = attempt[0]
    else:
        if sql.prepared(connection, sql.move_job).execute(cursor, moves).rowcount != 1:
            return None
        if run_queued:
            sql.prepared(connection, sql.move_run).execute(cursor, moves)
        remove, take = (sql.prepared(connection, sql.leave_statement, index) for index in (0, 1))
        if remove.execute(cursor, {"job_id": job_id}).rowcount == 1:
            take.execute(cursor, {"entry_repository": run.repository_id, "entry_labels": labels})
        sql.prepared(connection, sql.mark_served).execute(cursor, moves)
        insert = sql.prepared(connection, sql.insert_attempt)
        (attempt_id,) = insert.execute(cursor, values).fetchone()
        found = read.execute(cursor, parameters)
    variables = {name: value for name, value in read.read(found) if value is not None}
    return int(attempt_id), variables


def _secret_refusal(
    session: Session, source: secrets.SecretSource, run: TakenRun, job: TakenJob
) -> str | None:
    """The secret check of :func:`secrets.claim_refusal`, on the models (jobs that reference
    secrets only; the source's policy reads the run)."""
    full_run, full_job = session.get(Run, run.id), session.get(Job, job.id)
    assert full_run is not None and full_job is not None
    return secrets.claim_refusal(session, source, full_run, full_job)
