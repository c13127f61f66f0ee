"""A run's change token: has anything its page shows changed since the reader last looked?

One aggregate query over the run's rows: the run's ``revision``, and for its jobs, attempts
and steps the sum of their revisions plus their count (:mod:`forge_ci.models.revisions`: every
shown change bumps a revision, every insert adds a row, so the numbers only grow). The page also
shows why queued jobs wait, which follows providers and the requester's rights rather than the
run: while jobs are queued the caller folds what those explanations are computed from into the
token (:func:`change_token`; the requester's rights come with the counters,
:attr:`RunCounters.requester`, the providers from :mod:`forge_ci.coordinator.blockers`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session, aliased

from forge_ci import states
from forge_ci.authz import Role
from forge_ci.errors import NotFound
from forge_ci.models import Attempt, AttemptStep, Job, Membership, Run, User
from forge_ci.repos import RepositoryAccess


@dataclass(frozen=True)
class RunCounters:
    """A run's change counters and what the queue blockers need of it (no second lookup)."""

    id: int
    repository_id: int
    requested_by_id: int | None
    requested_by_name: str
    #: Whether jobs are queued: then the caller folds the queue blockers into the token.
    has_queued: bool
    #: The run's revision, then sum + count of its jobs', attempts' and steps' revisions.
    values: tuple[int, ...]
    #: Everything the requester's rights are decided from (``requester_refusal``): whether the
    #: user is active and a site administrator, and their membership role in the repository.
    requester: tuple[object, ...] = ()


def run_counters(session: Session, access: RepositoryAccess, number: int) -> RunCounters:
    """The run's change counters (readers); NotFound as for the run itself.

    :attr:`RunCounters.values` grows (in some position) with every change the run page shows,
    except queue blockers.
    """
    repository = access.require(Role.READ)
    row = (
        session.connection()
        .execute(_counters_statement(), {"repository_id": repository.id, "number": number})
        .first()
    )
    if row is None:
        raise NotFound(f"run #{number} not found in {repository.full_name}")
    run_id, requested_by_id, requested_by_name, queued, active, admin, membership, *values = row
    return RunCounters(
        run_id,
        repository.id,
        requested_by_id,
        requested_by_name,
        bool(queued),
        tuple(values),
        (bool(active), bool(admin), membership or ""),
    )


@cache
def _counters_statement() -> Select[Any]:
    """Built once: polls run it many times a second, and building it costs more than running."""
    jobs = aliased(Job)
    queued = (
        select(func.count())
        .select_from(jobs)
        .where(jobs.run_id == Run.id, jobs.state == states.QUEUED)
        .scalar_subquery()
    )
    job_sum = (
        select(func.coalesce(func.sum(jobs.revision), 0) + func.count())
        .select_from(jobs)
        .where(jobs.run_id == Run.id)
        .scalar_subquery()
    )
    # Each sum is correlated with the run one level up (a nested IN (SELECT ... FROM jobs, runs)
    # would not be: it summed every run's attempts and steps, on every poll).
    attempt_sum = (
        select(func.coalesce(func.sum(Attempt.revision), 0) + func.count())
        .select_from(Attempt)
        .join(jobs, jobs.id == Attempt.job_id)
        .where(jobs.run_id == Run.id)
        .scalar_subquery()
    )
    step_sum = (
        select(func.coalesce(func.sum(AttemptStep.revision), 0) + func.count())
        .select_from(AttemptStep)
        .join(Attempt, Attempt.id == AttemptStep.attempt_id)
        .join(jobs, jobs.id == Attempt.job_id)
        .where(jobs.run_id == Run.id)
        .scalar_subquery()
    )
    requester = select(User.is_active).where(User.id == Run.requested_by_id).scalar_subquery()
    requester_admin = select(User.is_admin).where(User.id == Run.requested_by_id).scalar_subquery()
    membership = (
        select(Membership.role)
        .where(Membership.repository_id == Run.repository_id)
        .where(Membership.user_id == Run.requested_by_id)
        .scalar_subquery()
    )
    return select(
        Run.id,
        Run.requested_by_id,
        Run.requested_by_name,
        queued,
        requester,
        requester_admin,
        membership,
        Run.revision,
        job_sum,
        attempt_sum,
        step_sum,
    ).where(Run.repository_id == bindparam("repository_id"), Run.number == bindparam("number"))


def change_token(counters: Iterable[object], *extra: object) -> str:
    """An opaque token (an ETag value) of the counters and whatever else the answer depends on."""
    text = "\x1f".join(str(part) for part in (*counters, *extra))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
