"""Claims: a provider asks for work and gets one leased attempt with its assignment, or null.

One claim is one serialized transaction (SQLite ``BEGIN IMMEDIATE``; on PostgreSQL the
provider row ``FOR KEY SHARE`` and the chosen repository's scheduling row, the lock every run
transition of that repository takes, with ``FOR UPDATE SKIP LOCKED``)::

    authenticate provider ─► replay? (same request_id: same attempt, lease not extended)
      ─► active, not waiting out a provider-change cancellation?
      ─► repositories with queued jobs in the provider's scope whose labels ⊆ provider labels,
         least recently served first (read from ``job_queue_counts``: a few rows whatever the
         queue's depth; see forge_ci/models/queue.py)
      ─► per repository, oldest queued job first (``job_queue``, one index seek): requester
         still authorized (else the job is cancelled), secrets deliverable (else it fails)
      ─► attempt leased for 60 s (the lease setting), job running, steps pending, assignment built

Fairness: a repository that was served least recently goes first, so one repository with a
thousand queued jobs cannot starve another with one (ties: the oldest queued job).

On PostgreSQL a claimer skips repositories other claimers are serving right now; if every
candidate repository was busy it waits for one of them, in the same transaction when it holds
no other repository lock, else in a new transaction that holds none. So, within its
``MAX_ROUNDS`` transactions, a claim does not answer null while claimable work exists, and claims
cannot deadlock each other: a claim's transaction waits for at most one repository lock, and
only while it holds no other (reconciling an attempt takes its repository's lock as every run
transition does; a transaction holding such a lock waits for no other).

Empty polls return None and store nothing but the provider's contact time (at most every
10 s).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Select, UniqueConstraint, and_, exists, func, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.coordinator import direct_claims, secrets
from forge_ci.coordinator.assignments import build_assignment
from forge_ci.coordinator.attempts import reconcile, requester_refusal
from forge_ci.coordinator.claim_lock import sqlite_claim_lock
from forge_ci.coordinator.claim_rows import (
    EPOCH,
    Candidate,
    ClaimOutcome,
    IssuedTokens,
    fairness_order,
    insert_steps,
    leased_attempt,
    lists_repository,
    new_attempt,
)
from forge_ci.coordinator.credentials import hashes_match, job_token, token_hash
from forge_ci.coordinator.direct_claim_sql import mark_served
from forge_ci.coordinator.errors import ClaimConflict
from forge_ci.coordinator.leases import LEASE
from forge_ci.coordinator.providers import authenticate_provider
from forge_ci.db import SessionScope, begin_write, is_sqlite, violates
from forge_ci.models import (
    Attempt,
    Job,
    Provider,
    ProviderGrant,
    QueueCount,
    QueuedJob,
    RunSequence,
    utcnow,
)
from forge_ci.models.base import table_of
from forge_ci.models.queue import key_labels
from forge_ci.protocol import (
    Assignment,
    ClaimRequest,
)
from forge_ci.runs.scheduling import complete_job, request_job_cancel, start_job

CONTACT_INTERVAL = timedelta(seconds=10)
#: Queued jobs looked at per repository and claim (oldest first).
JOB_BATCH = 200
#: Queued jobs read first (each further one costs only when these were all refused).
FIRST_LOOK = 4
#: Claim transactions one call may use (retry races, busy repositories) before answering null.
MAX_ROUNDS = 8
#: The columns of the unique constraints two racing claims can trip (see :func:`_lost_race`).
_RACED = ({"provider_id", "request_id"}, {"token_hash"}, {"job_token_hash"})


# --- One claim transaction -----------------------------------------------------------------------


def _replay(session: Session, attempt: Attempt, request: ClaimRequest, now: datetime) -> Assignment:
    if not hashes_match(attempt.token_hash, request.attempt_token):
        raise ClaimConflict(
            "this request_id was already used with another attempt_token; every new claim "
            "needs a fresh request_id"
        )
    reconcile(session, attempt, now)
    if attempt.state == states.COMPLETED:
        raise ClaimConflict(
            f"the attempt of this claim has ended ({attempt.conclusion}); claim again with a "
            "fresh request_id and attempt_token"
        )
    job = session.get(Job, attempt.job_id)
    assert job is not None
    return build_assignment(session, attempt, job, job.run, now, job_token(request.attempt_token))


def _check_fresh_token(session: Session, provider: Provider, token: str) -> str:
    digest = token_hash(token)
    reused = digest == provider.token_hash or session.scalar(
        select(
            or_(
                exists().where(Attempt.token_hash == digest),
                exists().where(Provider.token_hash == digest),
            )
        )
    )
    if reused:
        raise ClaimConflict(
            "attempt_token was already used; generate a fresh one (32 random bytes) per claim"
        )
    return digest


def _claimable_counts(provider: Provider) -> Select[int, str]:
    """Label sets with queued jobs per repository in the provider's scope (count rows only)."""
    query = select(QueueCount.repository_id, QueueCount.labels).where(QueueCount.queued > 0)
    if provider.scope != "all":
        granted = select(ProviderGrant.repository_id).where(
            ProviderGrant.provider_id == provider.id
        )
        query = query.where(QueueCount.repository_id.in_(granted))
    return query


def _candidate_repositories(session: Session, provider: Provider) -> list[Candidate]:
    """Repositories with queued jobs the provider may take, least recently served first.

    Read from the queue counts (a few rows whatever the queue's depth); the fairness keys are
    the repository's last claim (on its scheduling row) and its oldest queued job of the set
    (an index seek per row).
    """
    oldest = (
        select(func.min(QueuedJob.queued_at))
        .where(
            QueuedJob.repository_id == QueueCount.repository_id,
            QueuedJob.labels == QueueCount.labels,
        )
        .correlate(QueueCount)
        .scalar_subquery()
    )
    labels = provider.label_set
    found: dict[int, Candidate] = {}
    query = (
        _claimable_counts(provider)
        .outerjoin(RunSequence, RunSequence.repository_id == QueueCount.repository_id)
        .add_columns(RunSequence.served_at, oldest, RunSequence.repository_id.is_not(None))
    )
    for repository_id, key, last, first, row in session.execute(query):
        if not key_labels(key) <= labels:
            continue
        candidate = found.setdefault(
            repository_id, Candidate(repository_id, bool(row), served=last or EPOCH)
        )
        candidate.label_keys.append(key)
        first = first or EPOCH
        candidate.oldest = first if candidate.oldest == EPOCH else min(candidate.oldest, first)
    return fairness_order(list(found.values()))


def _lock_repository(session: Session, repository_id: int, *, wait: bool) -> bool:
    """PostgreSQL: take the repository's scheduling lock (skip it if busy unless ``wait``).

    Only called for repositories that have the row: the scheduler creates it (under the
    repository's file lock) when it numbers the first run, so a repository without one is
    never busy.
    """
    if is_sqlite(session):
        return True
    query = select(RunSequence.repository_id).where(RunSequence.repository_id == repository_id)
    query = query.with_for_update() if wait else query.with_for_update(skip_locked=True)
    return session.scalar(query) is not None


def _touch(session: Session, provider: Provider, now: datetime, egress_policy: str = "") -> None:
    changed = False
    if provider.last_contact_at is None or now - provider.last_contact_at >= CONTACT_INTERVAL:
        provider.last_contact_at = now
        changed = True
    # The policy is the provider's own setting: shown on the admin page as last reported.
    if egress_policy and provider.egress_policy != egress_policy:
        provider.egress_policy = egress_policy
        changed = True
    if changed:
        session.flush()


def _own_attempts(
    session: Session, provider: Provider, request_id: str
) -> tuple[Attempt | None, list[Attempt]]:
    """Locked, in one statement: the attempt of this ``request_id`` (a replay) if any, and the
    provider's unended attempts cancelled by its own change (see ``_waiting_out_cancellation``).
    """
    rows = session.scalars(
        select(Attempt)
        .where(
            Attempt.provider_id == provider.id,
            or_(
                Attempt.request_id == request_id,
                and_(
                    Attempt.state != states.COMPLETED,
                    Attempt.cancelled_by_provider_change.is_(True),
                ),
            ),
        )
        .order_by(Attempt.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    previous = next((row for row in rows if row.request_id == request_id), None)
    return previous, [row for row in rows if row is not previous]


def _waiting_out_cancellation(
    session: Session, pending: list[Attempt], now: datetime
) -> tuple[bool, bool]:
    """A provider whose own change cancelled its work claims nothing until that work ended.

    Returns (still waiting, reconciled any): ending an attempt takes its repository's lock.
    """
    for attempt in pending:
        reconcile(session, attempt, now)
    return any(attempt.state != states.COMPLETED for attempt in pending), bool(pending)


def _allocate(
    session: Session,
    provider: Provider,
    job: Job,
    request: ClaimRequest,
    digest: str,
    now: datetime,
    lease: timedelta,
) -> Assignment:
    run = job.run
    plan_job = job.definition()
    number = (
        session.scalar(select(func.max(Attempt.number)).where(Attempt.job_id == job.id)) or 0
    ) + 1
    attempt = new_attempt(
        leased_attempt(
            job_id=job.id,
            number=number,
            provider_id=provider.id,
            repository_id=run.repository_id,
            request=request,
            digest=digest,
            plan_job=plan_job,
            now=now,
            lease=lease,
        )
    )
    # The job moves first (it takes the run's locks), then the attempt is inserted in one flush.
    start_job(session, job, now)
    # The repository's fairness key, on its scheduling row (which exists once a run does:
    # forge_ci.runs.numbering), by the direct path's statement.
    session.execute(mark_served(), {"repository_pk": run.repository_id, "moved_at": now})
    session.add(attempt)
    session.flush()
    assignment = build_assignment(session, attempt, job, run, now, job_token(request.attempt_token))
    insert_steps(session.connection(), attempt.id, plan_job, assignment)
    return assignment


def _queued_in(session: Session, candidate: Candidate, limit: int) -> list[int]:
    """The candidate's first ``limit`` queued job ids the provider may take, oldest first."""
    rows: list[Any] = []
    for key in candidate.label_keys:
        rows.extend(
            session.execute(
                select(QueuedJob.queued_at, QueuedJob.job_id)
                .where(QueuedJob.repository_id == candidate.repository_id, QueuedJob.labels == key)
                .order_by(QueuedJob.queued_at, QueuedJob.job_id)
                .limit(limit)
            )
        )
    rows.sort(key=lambda row: (row.queued_at, row.job_id))
    return [row.job_id for row in rows[:limit]]


def _candidate_jobs(session: Session, candidate: Candidate) -> Iterator[int]:
    """Queued job ids oldest first: a few (the first one is almost always taken), then more."""
    seen: set[int] = set()
    for limit in (FIRST_LOOK, JOB_BATCH):
        for job_id in _queued_in(session, candidate, limit):
            if job_id not in seen:
                seen.add(job_id)
                yield job_id
        if len(seen) < limit:
            return


def _claim_in_repository(
    session: Session,
    provider: Provider,
    candidate: Candidate,
    request: ClaimRequest,
    digest: str,
    now: datetime,
    source: secrets.SecretSource,
    lease: timedelta,
) -> Assignment | None:
    refusals: dict[int, str | None] = {}
    for job_id in _candidate_jobs(session, candidate):
        job = session.get(Job, job_id)
        if job is None or job.state != states.QUEUED:
            continue  # decided earlier in this transaction (a sibling's cancellation)
        run = job.run
        if run.id not in refusals:
            refusals[run.id] = requester_refusal(session, run)
        refusal = refusals[run.id]
        if refusal is not None:
            request_job_cancel(session, job, refusal, now)
            continue
        secret_refusal = secrets.claim_refusal(session, source, run, job)
        if secret_refusal is not None:
            complete_job(session, job, states.FAILURE, {}, reason=secret_refusal, now=now)
            continue
        return _allocate(session, provider, job, request, digest, now, lease)
    return None


def claim_once(
    session: Session,
    token: str | None,
    request: ClaimRequest,
    now: datetime,
    source: secrets.SecretSource,
    *,
    wait_for_repository: int | None = None,
    lease: timedelta = LEASE,
) -> ClaimOutcome:
    """One claim transaction on a fresh session; the caller commits (also when it is empty)."""
    begin_write(session)
    provider = authenticate_provider(session, token)
    if not is_sqlite(session):
        session.execute(
            select(Provider.id)
            .where(Provider.id == provider.id)
            .with_for_update(read=True, key_share=True)
        )
    previous, pending = _own_attempts(session, provider, request.request_id)
    if previous is not None:
        return ClaimOutcome(_replay(session, previous, request, now))
    digest = _check_fresh_token(session, provider, request.attempt_token)
    _touch(session, provider, now, request.egress_policy)
    if provider.state != "active":
        return ClaimOutcome(None)
    waiting, holding = _waiting_out_cancellation(session, pending, now)
    if waiting:
        return ClaimOutcome(None)
    # Read before the wait (as the direct path's look): after it, a repository that gained
    # work meanwhile waits for the next claim, and the order is the one seen before.
    candidates = _candidate_repositories(session, provider)
    if (
        wait_for_repository is not None
        and not holding
        and lists_repository(candidates, wait_for_repository)
    ):
        # The only lock this transaction waits for; every other one is skipped when busy.
        # (Holding the locks of the reconciliations above, it waits for none: the busy
        # repository is then tried, as the others, without waiting. Emptied since, it is not
        # waited for.)
        _lock_repository(session, wait_for_repository, wait=True)
        holding = True
    busy: list[Candidate] = []
    for candidate in candidates:
        if candidate.has_row and not _lock_repository(session, candidate.repository_id, wait=False):
            busy.append(candidate)
            continue
        holding = holding or candidate.has_row
        assignment = _claim_in_repository(
            session, provider, candidate, request, digest, now, source, lease
        )
        if assignment is not None:
            return ClaimOutcome(assignment)
    if busy and not holding:
        # Every candidate was busy and this transaction holds no repository lock, so it may
        # wait for one here (no lock to deadlock on) instead of starting over. Any one: all
        # claimers saw the same order, and queueing on the first would idle the others.
        chosen = random.choice(busy)
        _lock_repository(session, chosen.repository_id, wait=True)
        assignment = _claim_in_repository(
            session, provider, chosen, request, digest, now, source, lease
        )
        if assignment is not None:
            return ClaimOutcome(assignment)
        busy.remove(chosen)
    return ClaimOutcome(None, [candidate.repository_id for candidate in busy])


def _lost_race(error: IntegrityError) -> bool:
    """Two claims raced on what identifies a claim: the same ``request_id`` (the loser's next
    round replays the winner's attempt) or the same attempt token (the loser's next round says
    it was already used). Any other integrity error is a bug and is raised."""
    return any(
        violates(error, constraint)
        for constraint in table_of(Attempt).constraints
        if isinstance(constraint, UniqueConstraint)
        and {column.name for column in constraint.columns} in _RACED
    )


def bound_engine(sessions: SessionScope) -> Engine:
    """The engine ``sessions`` are bound to (a claim's direct path runs on its connections)."""
    with sessions() as session:
        bound = session.get_bind()
    if not isinstance(bound, Engine):  # a programming error, whatever the credential
        raise TypeError(f"claims take sessions bound to an engine, not to {type(bound)!r}")
    return bound


def claim(
    sessions: SessionScope,
    token: str | None,
    request: ClaimRequest,
    source: secrets.SecretSource | None = None,
    clock: Callable[[], datetime] = utcnow,
    lock_dir: Path | None = None,
    lease: timedelta = LEASE,
    engine: Engine | None = None,
) -> Assignment | None:
    """Claim once (no waiting) and commit; see :func:`claim_once` for the rules.

    ``sessions`` yields a fresh session per transaction (``Database.session``); ``engine`` is
    the engine they are bound to, when the caller knows it (else a session is opened to ask
    for it: about 4% of a claim's time). Each round takes the direct path
    (:mod:`.direct_claims`), and what it leaves the ORM path. On SQLite a look outside any
    transaction (one read statement) first answers empty polls without taking the write
    lock. Two identical retries racing each other: the loser's insert fails and its next
    round replays the winner's attempt. PostgreSQL: when every candidate repository was busy,
    the next round waits for one of them (while its look still shows work there). SQLite:
    claim transactions queue on a file lock in ``lock_dir`` (:mod:`.claim_lock`).
    """
    source = source or secrets.NO_SECRETS
    # Pure: derived from the fresh token before any transaction takes a lock.
    issued = IssuedTokens.of(request.attempt_token)
    # The direct path runs on the engine's own connections; sessions are for the ORM path.
    engine = engine or bound_engine(sessions)
    sqlite = engine.dialect.name == "sqlite"
    with ExitStack() as stack:
        early: direct_claims.EarlyLook | None = None
        if sqlite and token is not None:
            # SQLite has one writer at a time: answer empty polls without asking for the
            # lock (and keep the look for the claim, while it is true).
            look = direct_claims.early_look(engine, token, request, issued.digest)
            early = stack.enter_context(look)
        # None: not a valid credential (SQLite's look found none, or there is no token).
        nothing = early.nothing_to_claim(clock()) if early else (None if sqlite else False)
        if nothing is None:
            with sessions(read_only=True) as session:
                authenticate_provider(session, token)  # raises: not a valid provider credential
            nothing = False
        if nothing:
            return None
        rounds = _Rounds(sessions, engine, token, request, source, clock, lease, issued)
        return rounds.run(lock_dir if sqlite else None, early)


@dataclass
class _Rounds:
    """One claim's transactions (see :func:`claim`)."""

    sessions: SessionScope
    engine: Engine
    token: str | None = field(repr=False)  # credentials stay out of reprs and tracebacks
    request: ClaimRequest = field(repr=False)
    source: secrets.SecretSource
    clock: Callable[[], datetime]
    lease: timedelta
    issued: IssuedTokens

    def run(
        self, sqlite_lock: Path | None, early: direct_claims.EarlyLook | None
    ) -> Assignment | None:
        """The rounds: ``sqlite_lock``, the folder of the claims' file lock (SQLite);
        ``early``, the SQLite look before the lock, for the first one."""
        wait_for: int | None = None
        for _ in range(MAX_ROUNDS):
            with sqlite_claim_lock(sqlite_lock, early) as usable:
                early = None  # the first round's only (claim_direct closes its connection)
                try:
                    outcome = self.one(wait_for, usable)
                except IntegrityError as error:
                    # Rolled back (the direct path's connection, or the ORM path's session).
                    if not _lost_race(error):
                        raise
                    wait_for = None
                    continue
            if outcome.assignment is not None or not outcome.busy_repositories:
                return outcome.assignment
            # Any busy repository, not the first: claimers that all saw the same order would
            # otherwise queue on one lock while other repositories' work waits.
            wait_for = random.choice(outcome.busy_repositories)
        return None

    def one(self, wait_for: int | None, early: direct_claims.EarlyLook | None) -> ClaimOutcome:
        """One claim transaction, committed: the direct path first, and when it leaves the
        claim the ORM path, in a session of its own. ``early``: see
        :func:`.direct_claims.claim_direct`."""
        now = self.clock()
        outcome = direct_claims.claim_direct(
            self.engine,
            self.token,
            self.request,
            now,
            self.source,
            self.lease,
            self.issued,
            wait_for,
            early,
        )
        if outcome is not direct_claims.UNHANDLED:
            assert isinstance(outcome, ClaimOutcome)
            return outcome
        with self.sessions() as session:
            try:
                outcome = claim_once(
                    session,
                    self.token,
                    self.request,
                    now,
                    self.source,
                    wait_for_repository=wait_for,
                    lease=self.lease,
                )
            except ClaimConflict:
                # Raised before any change but a reconciliation (a replayed attempt found to
                # have run out of lease), which stands.
                session.commit()
                raise
            session.commit()
            return outcome
