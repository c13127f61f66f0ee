"""Attempt use cases: authenticate, start, heartbeat, complete, cancel, and ending an attempt.

Every runner request runs in one serialized write transaction (``begin_write``; the attempt row
``FOR UPDATE`` on PostgreSQL) and first *reconciles*: the job's cancellation request is copied
in and the attempt's clocks are checked, so a request never acts on an attempt that already
ran out of lease or time (see :mod:`forge_ci.coordinator.leases`).

Ending an attempt (:func:`terminate`) is one transaction: steps are finalized, withheld log
tails are ended by the masking rule (a mask when secret, else kept), issued secret values are
forgotten, and the runs scheduler records the job's result so dependents advance
(:func:`forge_ci.runs.scheduling.complete_job`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role, role_in
from forge_ci.coordinator.credentials import hashes_match, keyed_digest, token_hash
from forge_ci.coordinator.errors import (
    AttemptEnded,
    BadCredential,
    CancelRequested,
    CompletionConflict,
    ExecutionMismatch,
    LogSequenceMismatch,
)
from forge_ci.coordinator.leases import (
    LEASE,
    due_verdict,
    observe_cancel,
    refresh_next_check,
    renewed_lease,
    to_ms,
)
from forge_ci.coordinator.records import flush_carries, notice
from forge_ci.coordinator.steps import finalize_steps, success_refusal
from forge_ci.models import Attempt, AttemptSecret, Job, Repository
from forge_ci.protocol import (
    AttemptStatus,
    CompleteRequest,
    HeartbeatRequest,
    StartRequest,
)
from forge_ci.runs.scheduling import complete_job, lock_run, request_job_cancel, requeue_job

MINUTE = timedelta(minutes=1)
#: Attempts in a row that no runner started before the job is lost instead of queued again
#: (a job whose assignment kills every provider that takes it must end).
MAX_UNSTARTED = 3


def status_of(attempt: Attempt, now: datetime) -> AttemptStatus:
    """The attempt as every runner endpoint reports it."""
    completed = attempt.state == states.COMPLETED
    return AttemptStatus(
        attempt_id=attempt.id,
        state=attempt.state,
        execution_id=attempt.execution_id or "",
        acknowledged_log_sequence=attempt.acknowledged_sequence,
        lease_deadline_ms=0 if completed else to_ms(attempt.lease_expires_at),
        job_deadline_ms=to_ms(attempt.job_deadline_at),
        server_time_ms=to_ms(now),
        cancel_requested=attempt.cancel_requested_at is not None,
        cancel_reason=attempt.cancel_reason or "",
        conclusion=attempt.conclusion or "",
    )


def authenticate_attempt(session: Session, token: str | None, attempt_id: int) -> Attempt:
    """The attempt, locked, if ``token`` is its credential; old or foreign credentials fail.

    Unknown attempts and credentials of other attempts get the same answer, so a runner learns
    nothing about attempts that are not its own.
    """
    if token is None:
        raise BadCredential("an attempt credential is required (Authorization: Bearer ...)")
    attempt = session.scalar(
        select(Attempt)
        .where(Attempt.id == attempt_id, Attempt.token_hash == token_hash(token))
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if attempt is None or not hashes_match(attempt.token_hash, token):
        raise BadCredential(f"the credential is not valid for attempt {attempt_id}")
    return attempt


def authenticate_job_token(session: Session, token: str | None, attempt_id: int) -> Attempt | None:
    """The attempt, locked, if ``token`` is its job token (``github.token``); else None.

    A job token reads the attempt's source and nothing else: only the source endpoint calls
    this, every other endpoint knows the attempt credential only.
    """
    if token is None:
        return None
    attempt = session.scalar(
        select(Attempt)
        .where(Attempt.id == attempt_id, Attempt.job_token_hash == token_hash(token))
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if attempt is None or attempt.job_token_hash is None:
        return None
    return attempt if hashes_match(attempt.job_token_hash, token) else None


def _job(session: Session, attempt: Attempt) -> Job:
    job = session.get(Job, attempt.job_id)
    assert job is not None
    return job


def reconcile(session: Session, attempt: Attempt, now: datetime) -> None:
    """Apply what happened meanwhile: a cancellation request, a lease or deadline run out.

    An attempt whose start window ran out ends ``lost`` but its job is queued again (nothing
    of it ran: its provider vanished after the claim, or never heard the answer), at most
    :data:`MAX_UNSTARTED` times in a row; then the job is lost too.
    """
    if attempt.state == states.COMPLETED:
        return
    job = _job(session, attempt)
    observe_cancel(attempt, job)
    verdict = due_verdict(attempt, now)
    if verdict is None:
        return
    if verdict.unstarted:
        # Whether the job may be queued again is decided under its run's lock (which reloads
        # the job): a cancellation committed since the job was read would otherwise make
        # requeue_job refuse, rolling back the whole request or sweep batch. Seen now, the
        # cancellation decides as if it had come first.
        lock_run(session, job.run_id)
        if observe_cancel(attempt, job):
            verdict = due_verdict(attempt, now)
            assert verdict is not None  # a leased attempt with a cancellation ends at once
    requeue = verdict.unstarted and _may_requeue(session, job)
    reason = f"{verdict.reason}; the job is queued again" if requeue else verdict.reason
    terminate(session, attempt, verdict.conclusion, reason, now, by_server=True, requeue=requeue)


def _may_requeue(session: Session, job: Job) -> bool:
    if job.state != states.RUNNING or job.cancel_requested_at is not None:
        return False
    unstarted = session.scalar(
        select(func.count())
        .select_from(Attempt)
        .where(
            Attempt.job_id == job.id,
            Attempt.state == states.COMPLETED,
            Attempt.started_at.is_(None),
            Attempt.conclusion == states.LOST,
        )
    )
    return (unstarted or 0) + 1 < MAX_UNSTARTED


def terminate(
    session: Session,
    attempt: Attempt,
    conclusion: str,
    reason: str | None,
    now: datetime,
    *,
    by_server: bool = False,
    reported: str | None = None,
    outputs: Mapping[str, str] | None = None,
    completion_digest: str | None = None,
    requeue: bool = False,
) -> None:
    """End the attempt with ``conclusion`` and complete its job in the same transaction
    (``requeue``: queue the job again instead; only for an attempt that never started)."""
    states.require_transition("attempt", attempt.state, states.COMPLETED, conclusion)
    job = _job(session, attempt)
    if requeue:
        requeue_job(session, job, now)
    elif job.state != states.COMPLETED:
        complete_job(session, job, conclusion, dict(outputs or {}), reason=reason, now=now)
        # A cancellation that reached the job after we looked wins, as it would have a moment
        # later: the attempt says so too and keeps the runner's outcome separately.
        if job.conclusion == states.CANCELLED and conclusion != states.CANCELLED:
            reported = reported or conclusion
            conclusion = states.CANCELLED
    finalize_steps(attempt, conclusion, now)
    flush_carries(session, attempt)
    if reason is not None and (by_server or reported is not None):
        notice(session, attempt, f"forge-ci: {reason}")
    session.execute(delete(AttemptSecret).where(AttemptSecret.attempt_id == attempt.id))
    attempt.state = states.COMPLETED
    attempt.conclusion = conclusion
    attempt.reported_conclusion = reported
    attempt.status_reason = reason
    attempt.completion_digest = completion_digest
    attempt.completed_at = now
    refresh_next_check(attempt)


def cancel_attempt(
    session: Session,
    attempt: Attempt,
    reason: str,
    now: datetime,
    *,
    provider_change: bool = False,
) -> None:
    """Cancel the attempt's job by durable request; a leased attempt ends at once.

    The request is recorded on the job (the runs scheduler owns it), so a run cancellation and
    a provider change look the same to the runner: ``cancel_requested`` and 30 s to stop.
    """
    if attempt.state == states.COMPLETED:
        return
    request_job_cancel(session, _job(session, attempt), reason, now)
    if provider_change:
        attempt.cancelled_by_provider_change = True
    reconcile(session, attempt, now)


class Requested(Protocol):
    """What :func:`requester_refusal` reads of a run (a :class:`Run`, or a lighter row)."""

    @property
    def repository_id(self) -> int: ...
    @property
    def requested_by_id(self) -> int | None: ...
    @property
    def requested_by_name(self) -> str: ...


def requester_refusal(session: Session, run: Requested) -> str | None:
    """Why the person who started ``run`` may no longer make the server run its code, if so."""
    if run.requested_by_id is None:
        return None  # the operator CLI
    repository = session.get(Repository, run.repository_id)
    if repository is None:
        return "the repository no longer exists"
    actor = Actor(user_id=run.requested_by_id, name=run.requested_by_name)
    if not may_run_code(role_in(session, actor, repository)):
        return (
            f"{run.requested_by_name}, who started the run, may no longer run workflows in "
            f"{repository.full_name}"
        )
    return None


def may_run_code(role: Role | None) -> bool:
    """Whether a requester's current role lets the server run the code they asked for (the
    rule :func:`requester_refusal` and the direct claim path apply alike)."""
    return role is not None and role >= Role.ADMIN


def _require_live(attempt: Attempt) -> None:
    if attempt.state == states.COMPLETED:
        raise AttemptEnded(
            f"attempt {attempt.id} has ended ({attempt.conclusion}"
            + (f": {attempt.status_reason}" if attempt.status_reason else "")
            + ")"
        )


def require_running(attempt: Attempt) -> None:
    """The attempt must have started and not ended."""
    _require_live(attempt)
    if attempt.state != states.RUNNING:
        raise ExecutionMismatch(f"attempt {attempt.id} has not started; call start first")


def require_execution(attempt: Attempt, execution_id: str) -> None:
    """The attempt must be running and bound to this runner instance."""
    require_running(attempt)
    if execution_id != attempt.execution_id:
        raise ExecutionMismatch(f"attempt {attempt.id} is bound to another runner instance")


def running_job(
    session: Session,
    attempt: Attempt,
    execution_id: str,
    now: datetime,
    purpose: str,
    *,
    by_job_token: bool = False,
) -> Job | str:
    """The job of a running attempt bound to ``execution_id``, for a request that reads
    something of it (``purpose``: "fetching the source"), with the run's requester rechecked.

    ``by_job_token``: the request came with the job token (any process of the running job),
    not the runner's credential, so it is not bound to an execution. Cancellation requested:
    CancelRequested. A string instead of the job means the requester
    may no longer run code and the attempt was just cancelled (the caller commits that and
    refuses the request).
    """
    if by_job_token:
        require_running(attempt)  # a job token is not bound to the runner instance
    else:
        require_execution(attempt, execution_id)
    if attempt.cancel_requested_at is not None:
        raise CancelRequested(
            f"attempt {attempt.id} is being cancelled ({attempt.cancel_reason}); stop instead "
            f"of {purpose}"
        )
    job = session.get(Job, attempt.job_id)
    assert job is not None
    refusal = requester_refusal(session, job.run)
    if refusal is not None:
        cancel_attempt(session, attempt, refusal, now)
        return refusal
    return job


def start(
    session: Session,
    attempt: Attempt,
    request: StartRequest,
    now: datetime,
    lease: timedelta = LEASE,
    minute: timedelta = MINUTE,
) -> None:
    """Bind the runner instance and fix the job deadline; repeats by the same instance are fine.

    ``minute`` is how long one of the job's ``timeout-minutes`` lasts (shorter only in tests).
    """
    reconcile(session, attempt, now)
    _require_live(attempt)
    if attempt.state == states.RUNNING:
        if attempt.execution_id != request.execution_id:
            raise ExecutionMismatch(f"attempt {attempt.id} was started by another runner instance")
        return
    states.require_transition("attempt", attempt.state, states.RUNNING)
    attempt.state = states.RUNNING
    attempt.execution_id = request.execution_id
    attempt.started_at = now
    attempt.job_deadline_at = now + attempt.timeout_minutes * minute
    attempt.lease_expires_at = min(now + lease, attempt.job_deadline_at)
    refresh_next_check(attempt)


def heartbeat(
    session: Session,
    attempt: Attempt,
    request: HeartbeatRequest,
    now: datetime,
    lease: timedelta = LEASE,
) -> None:
    """Renew a running attempt's lease (up to the job deadline); recheck authorization.

    Before start the heartbeat only reports status: leased work never holds a lease longer
    than the start window.
    """
    reconcile(session, attempt, now)
    _require_live(attempt)
    if attempt.state == states.LEASED:
        if request.execution_id:
            raise ExecutionMismatch(f"attempt {attempt.id} has not started; call start first")
        return
    require_execution(attempt, request.execution_id)
    attempt.lease_expires_at = renewed_lease(attempt, now, lease)
    refresh_next_check(attempt)
    if attempt.cancel_requested_at is None:
        job = _job(session, attempt)
        refusal = requester_refusal(session, job.run)
        if refusal is not None:
            cancel_attempt(session, attempt, refusal, now)


def completion_digest(token: str, request: CompleteRequest) -> str:
    """Recognizes a replayed completion; keyed by the attempt credential, like log replays,
    so that nothing derived from the (unmasked) outputs is stored without a key."""
    canonical = json.dumps(
        [request.execution_id, request.conclusion, request.last_log_sequence, request.outputs],
        sort_keys=True,
        separators=(",", ":"),
    )
    return keyed_digest(token, "completion", canonical)


def complete(
    session: Session,
    attempt: Attempt,
    request: CompleteRequest,
    now: datetime,
    *,
    token: str,
    masked_outputs: Mapping[str, str],
) -> None:
    """Record the runner's result; an identical replay is acknowledged, anything else refused.

    A completion after cancellation is recorded ``cancelled`` (the reported outcome is kept);
    a reported success with a step that did not succeed is recorded ``failure``.
    """
    digest = completion_digest(token, request)
    if attempt.state == states.COMPLETED:
        if attempt.completion_digest == digest:
            return
        if attempt.completion_digest is not None:
            raise CompletionConflict(
                f"attempt {attempt.id} already completed ({attempt.conclusion}) with another result"
            )
        _require_live(attempt)
    reconcile(session, attempt, now)
    _require_live(attempt)
    if attempt.state == states.LEASED:
        if request.execution_id:
            raise ExecutionMismatch(f"attempt {attempt.id} has not started; call start first")
    else:
        require_execution(attempt, request.execution_id)
    if request.last_log_sequence != attempt.acknowledged_sequence:
        raise LogSequenceMismatch(
            f"completion cites log sequence {request.last_log_sequence}, but the last "
            f"acknowledged one is {attempt.acknowledged_sequence}"
        )
    reported = request.conclusion
    reason: str | None = None
    if attempt.cancel_requested_at is not None:
        conclusion = states.CANCELLED
        reason = f"cancelled: {attempt.cancel_reason}"
    elif reported == states.SUCCESS and (refusal := success_refusal(attempt)) is not None:
        conclusion = states.FAILURE
        reason = f"recorded as failure: the runner reported success, but {refusal}"
    else:
        conclusion = reported
    terminate(
        session,
        attempt,
        conclusion,
        reason,
        now,
        reported=reported if conclusion != reported else None,
        outputs=masked_outputs,
        completion_digest=digest,
    )
