"""What both claim paths write and how they rank work: the attempt, its steps, the candidates.

A claim is made by the direct path (:mod:`forge_ci.coordinator.direct_claims`, a handful of
Core statements) or, for anything unusual, by the ORM path (:mod:`forge_ci.coordinator.claims`);
both build the same attempt and step rows and serve repositories in the same order from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from forge_ci import states
from forge_ci.coordinator.credentials import job_token, token_hash
from forge_ci.coordinator.leases import refresh_next_check
from forge_ci.masking import mask_of
from forge_ci.models import Attempt, AttemptStep
from forge_ci.models.base import table_of
from forge_ci.protocol import Assignment, ClaimRequest, hook_steps

DEFAULT_TIMEOUT_MINUTES = 360
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class ClaimOutcome:
    """The result of one claim transaction."""

    assignment: Assignment | None
    #: PostgreSQL: repositories skipped because other claimers held them.
    busy_repositories: list[int] = field(default_factory=list)


@dataclass
class Candidate:
    """A repository with queued jobs this provider may take: its label sets, fairness keys."""

    repository_id: int
    has_row: bool
    label_keys: list[str] = field(default_factory=list)
    served: datetime = EPOCH
    oldest: datetime = EPOCH


def lists_repository(candidates: list[Candidate], repository_id: int) -> bool:
    """Whether the repository is one of the candidates (a look still shows work queued there)."""
    return any(candidate.repository_id == repository_id for candidate in candidates)


def fairness_order(candidates: list[Candidate]) -> list[Candidate]:
    """Least recently served repository first (ties: the oldest queued job, then the id), so
    one repository with a thousand queued jobs cannot starve another with one."""
    return sorted(candidates, key=lambda c: (c.served, c.oldest, c.repository_id))


@dataclass(frozen=True)
class IssuedTokens:
    """What a claim derives from the runner's fresh attempt token: pure, so computed before
    the claim transaction takes its locks."""

    digest: str
    job_token_hash: str
    log_mask: str
    #: The job token itself (``github.token``), for the assignment (required: an assignment
    #: built without it would carry an empty token that every source fetch refuses).
    job_token: str = field(repr=False)

    @classmethod
    def of(cls, attempt_token: str) -> IssuedTokens:
        issued = job_token(attempt_token)
        return cls(
            token_hash(attempt_token),
            token_hash(issued),
            mask_of([attempt_token, issued]),
            issued,
        )


class LeasedAttempt(NamedTuple):
    """A claimed attempt's row values (:data:`CLAIMED_COLUMNS`), without an ORM object: what
    the direct path inserts and builds the assignment from (``id`` once inserted or
    reserved)."""

    job_id: int
    number: int
    provider_id: int
    repository_id: int
    request_id: str
    token_hash: str
    state: str
    timeout_minutes: int
    claimed_at: datetime
    lease_expires_at: datetime
    next_check_at: datetime
    log_mask: str
    job_token_hash: str
    id: int = 0
    #: A new attempt's job deadline starts when its runner reports the job started.
    job_deadline_at: datetime | None = None

    def values(self) -> dict[str, Any]:
        """The row's columns a claim sets (:data:`CLAIMED_COLUMNS`)."""
        return dict(zip(CLAIMED_COLUMNS, self, strict=False))


#: The attempt columns a claim sets (the others keep their column defaults), written out: a
#: field added to :class:`LeasedAttempt` is not inserted unless it is named here too.
CLAIMED_COLUMNS = (
    "job_id",
    "number",
    "provider_id",
    "repository_id",
    "request_id",
    "token_hash",
    "state",
    "timeout_minutes",
    "claimed_at",
    "lease_expires_at",
    "next_check_at",
    "log_mask",
    "job_token_hash",
)
assert LeasedAttempt._fields[: len(CLAIMED_COLUMNS)] == CLAIMED_COLUMNS, "values() zips in order"


def leased_attempt(
    *,
    job_id: int,
    number: int,
    provider_id: int,
    repository_id: int,
    request: ClaimRequest,
    digest: str,
    plan_job: dict[str, Any],
    now: datetime,
    lease: timedelta,
    issued: IssuedTokens | None = None,
) -> LeasedAttempt:
    """The leased attempt a claim creates, as row values."""
    issued = issued or IssuedTokens.of(request.attempt_token)
    assert issued.digest == digest
    lease_expires_at = now + lease
    return LeasedAttempt(
        job_id=job_id,
        number=number,
        provider_id=provider_id,
        repository_id=repository_id,
        request_id=request.request_id,
        token_hash=digest,
        state=states.LEASED,
        timeout_minutes=int(plan_job.get("timeout_minutes") or DEFAULT_TIMEOUT_MINUTES),
        claimed_at=now,
        lease_expires_at=lease_expires_at,
        # As leases.refresh_next_check: a new attempt has no job deadline or cancellation yet.
        next_check_at=lease_expires_at,
        log_mask=issued.log_mask,
        job_token_hash=issued.job_token_hash,
    )


def new_attempt(leased: LeasedAttempt) -> Attempt:
    """The leased attempt a claim creates (not yet added to a session or inserted), as a
    model (the ORM path's)."""
    attempt = Attempt(**leased.values())
    refresh_next_check(attempt)
    return attempt


def insert_steps(
    connection: Connection, attempt_id: int, plan_job: dict[str, Any], assignment: Assignment
) -> None:
    """The attempt's step rows (:func:`step_rows`) in one multi-row INSERT beside the attempt
    (through ``attempt.steps`` the ORM would load the collection and insert row by row)."""
    rows = step_rows(attempt_id, plan_job, assignment)
    if rows:
        connection.execute(insert(table_of(AttemptStep)), rows)


#: The step columns a claim sets (the others keep their column defaults).
STEP_COLUMNS = ("attempt_id", "position", "step_id", "name", "state")


def step_rows(
    attempt_id: int, plan_job: dict[str, Any], assignment: Assignment
) -> list[dict[str, Any]]:
    """The attempt's step rows: the actions' pre steps, the plan's steps, the post steps."""
    from forge_ci.workflow.render import as_written

    rows: list[tuple[str, str]] = []
    for step in plan_job.get("steps", []):
        name = step.get("name")
        rows.append((str(step["id"]), as_written(name) or str(step["id"])))
    pre, post = hook_steps(assignment.steps, assignment.actions)
    rows = [(hook.id, hook.name) for hook in pre] + rows + [(hook.id, hook.name) for hook in post]
    return [
        {
            "attempt_id": attempt_id,
            "position": position,
            "step_id": step_id,
            "name": name,
            "state": states.PENDING,
        }
        for position, (step_id, name) in enumerate(rows)
    ]
