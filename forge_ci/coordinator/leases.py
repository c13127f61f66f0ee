"""Lease, deadline and cancellation arithmetic for one attempt, and deciding when it is over.

An attempt lives on three clocks; whichever runs out first decides (the server decides, the
runner is never trusted to)::

    claim ──► start window (60 s, no renewal) ──► start ──► lease (60 s, renewed by heartbeats,
                                                  │         never past the job deadline)
                                                  └──────► job deadline (fixed once at start)
    cancellation request ──► 30 s to complete (a repeated request does not move it)

    start window runs out           -> lost       (no runner started: the job is queued again)
    lease runs out first            -> lost       (the provider stopped renewing)
    job deadline reached, lease ok  -> timed_out
    cancel grace runs out first     -> lost       (nobody confirmed the stop)
    cancel while still leased       -> cancelled  (nothing ran: a runner must start first)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from forge_ci import states
from forge_ci.models import Attempt, Job

#: The default lease; ``Settings.lease_seconds`` (``Coordinator.lease``) may set another.
LEASE = timedelta(seconds=60)
#: Long enough for the runner to stop the step and run the actions' post steps
#: (worker.runner.watchdog.POST_GRACE) before it completes.
CANCEL_GRACE = timedelta(seconds=30)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NEVER = datetime.max.replace(tzinfo=UTC)


def to_ms(moment: datetime | None) -> int:
    """Epoch milliseconds (0 for None), as the wire carries times."""
    if moment is None:
        return 0
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def renewed_lease(attempt: Attempt, now: datetime, lease_time: timedelta = LEASE) -> datetime:
    """The lease a heartbeat grants now: 60 s, but never past the fixed job deadline."""
    lease = now + lease_time
    if attempt.job_deadline_at is not None:
        lease = min(lease, attempt.job_deadline_at)
    return max(lease, attempt.lease_expires_at)


def refresh_next_check(attempt: Attempt) -> None:
    """Keep the sweeper's index in step with the attempt's clocks."""
    if attempt.state == states.COMPLETED:
        attempt.next_check_at = None
        return
    candidates = [attempt.lease_expires_at]
    if attempt.job_deadline_at is not None:
        candidates.append(attempt.job_deadline_at)
    if attempt.cancel_deadline_at is not None:
        candidates.append(attempt.cancel_deadline_at)
    if attempt.state == states.LEASED and attempt.cancel_requested_at is not None:
        candidates.append(attempt.cancel_requested_at)
    attempt.next_check_at = min(candidates)


def observe_cancel(attempt: Attempt, job: Job) -> bool:
    """Copy the job's durable cancellation request into the attempt, once. True if new."""
    if attempt.state == states.COMPLETED or job.cancel_requested_at is None:
        return False
    if attempt.cancel_requested_at is not None:
        return False
    attempt.cancel_requested_at = job.cancel_requested_at
    # The grace counts from the request itself, so observing it late never extends it.
    attempt.cancel_deadline_at = job.cancel_requested_at + CANCEL_GRACE
    attempt.cancel_reason = job.status_reason or "cancelled"
    refresh_next_check(attempt)
    return True


@dataclass(frozen=True)
class Verdict:
    """How and why the server ends an attempt."""

    conclusion: str
    reason: str
    #: Nothing of the job ran (no runner started): it may be queued again for a new attempt.
    unstarted: bool = False


def due_verdict(attempt: Attempt, now: datetime) -> Verdict | None:
    """The server's verdict if one of the attempt's clocks has run out at ``now``."""
    if attempt.state == states.COMPLETED:
        return None
    if attempt.state == states.LEASED and attempt.cancel_requested_at is not None:
        return Verdict(
            states.CANCELLED, f"cancelled before a runner started: {attempt.cancel_reason}"
        )
    lease = attempt.lease_expires_at
    deadline = attempt.job_deadline_at or _NEVER
    grace = attempt.cancel_deadline_at or _NEVER
    if now < min(lease, deadline, grace):
        return None
    if grace <= lease and grace <= deadline:
        return Verdict(
            states.LOST,
            f"cancellation ({attempt.cancel_reason}) was not confirmed within "
            f"{int(CANCEL_GRACE.total_seconds())} s",
        )
    if deadline <= lease:
        return Verdict(
            states.TIMED_OUT, f"the job reached its time limit of {attempt.timeout_minutes} minutes"
        )
    if attempt.state == states.LEASED:
        window = (attempt.lease_expires_at - attempt.claimed_at).total_seconds()
        return Verdict(
            states.LOST, f"no runner started within {window:g} s of the claim", unstarted=True
        )
    return Verdict(states.LOST, "the lease expired: the runner stopped sending heartbeats")
