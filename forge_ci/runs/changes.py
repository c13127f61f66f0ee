"""A run's change token: has anything its page shows changed since the reader last looked?

Aggregates over the run's rows, read as columns of a statement that selects the run
(:func:`counter_columns`): the run's ``revision``, and for its jobs, attempts and steps the sum
of their revisions plus their count (:mod:`forge_ci.models.revisions`: every shown change bumps
a revision, every insert adds a row, so the numbers only grow). The page also shows why queued
jobs wait, which follows providers and the requester's rights rather than the run: while jobs
are queued the caller folds what those explanations are computed from into the token
(:func:`change_token`; the requester's rights come with the counters,
:attr:`RunCounters.requester`, the providers from :mod:`forge_ci.coordinator.blockers`). The
statements that read them are :mod:`forge_ci.coordinator.watch`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import SQLColumnExpression, case, func, select
from sqlalchemy.orm import aliased

from forge_ci import states
from forge_ci.models import Attempt, AttemptStep, Job, Membership, Run, User


@dataclass(frozen=True)
class RunCounters:
    """A run's change counters and what the queue blockers need of it (no second lookup)."""

    id: int
    repository_id: int
    requested_by_id: int | None
    requested_by_name: str
    #: Whether jobs are queued: then the caller folds the queue blockers into the token.
    has_queued: bool
    #: The run's revision, then sum + count of its jobs' (twice that, plus 1 while any is
    #: queued), attempts' and steps' revisions.
    values: tuple[int, ...]
    #: Everything the requester's rights are decided from (``requester_refusal``): whether the
    #: user is active and a site administrator, and their membership role in the repository.
    requester: tuple[object, ...] = ()


def counters_of(row: Sequence[Any], repository_id: int) -> RunCounters | None:
    """:class:`RunCounters` from the :func:`counter_columns` of a row (None: no such run)."""
    run_id, requested_by_id, requested_by_name, active, admin, membership, *values = row
    if run_id is None:
        return None
    return RunCounters(
        run_id,
        repository_id,
        requested_by_id,
        requested_by_name,
        bool(values[1] & 1),  # the jobs' sum carries "any queued" in its lowest bit
        tuple(values),
        (bool(active), bool(admin), membership or ""),
    )


@cache
def counter_columns() -> tuple[SQLColumnExpression[Any], ...]:
    """What :class:`RunCounters` is read from, for a statement that selects from ``runs``
    (:mod:`forge_ci.coordinator.watch`). Every subquery is correlated with the run only,
    whatever else that statement joins. The values grow (in some position) with every change
    the run page shows, except queue blockers."""
    jobs = aliased(Job)
    # One pass over the run's jobs (a second, to count the queued ones, cost a fifth of an
    # unchanged poll's statement): twice the sum, plus 1 if any job is queued.
    queued = func.coalesce(func.max(case((jobs.state == states.QUEUED, 1), else_=0)), 0)
    job_sum = (
        select(2 * (func.coalesce(func.sum(jobs.revision), 0) + func.count()) + queued)
        .select_from(jobs)
        .where(jobs.run_id == Run.id)
        .correlate(Run)
        .scalar_subquery()
    )
    # Each sum is correlated with the run one level up (a nested IN (SELECT ... FROM jobs, runs)
    # would not be: it summed every run's attempts and steps, on every poll).
    attempt_sum = (
        select(func.coalesce(func.sum(Attempt.revision), 0) + func.count())
        .select_from(Attempt)
        .join(jobs, jobs.id == Attempt.job_id)
        .where(jobs.run_id == Run.id)
        .correlate(Run)
        .scalar_subquery()
    )
    step_sum = (
        select(func.coalesce(func.sum(AttemptStep.revision), 0) + func.count())
        .select_from(AttemptStep)
        .join(Attempt, Attempt.id == AttemptStep.attempt_id)
        .join(jobs, jobs.id == Attempt.job_id)
        .where(jobs.run_id == Run.id)
        .correlate(Run)
        .scalar_subquery()
    )
    requester = aliased(User)
    active = (
        select(requester.is_active)
        .where(requester.id == Run.requested_by_id)
        .correlate(Run)
        .scalar_subquery()
    )
    admin = (
        select(requester.is_admin)
        .where(requester.id == Run.requested_by_id)
        .correlate(Run)
        .scalar_subquery()
    )
    requester_role = aliased(Membership)
    membership = (
        select(requester_role.role)
        .where(requester_role.repository_id == Run.repository_id)
        .where(requester_role.user_id == Run.requested_by_id)
        .correlate(Run)
        .scalar_subquery()
    )
    return (
        Run.id,
        Run.requested_by_id,
        Run.requested_by_name,
        active,
        admin,
        membership,
        Run.revision,
        job_sum,
        attempt_sum,
        step_sum,
    )


def change_token(counters: Iterable[object], *extra: object) -> str:
    """An opaque token (an ETag value) of the counters and whatever else the answer depends on."""
    text = "\x1f".join(str(part) for part in (*counters, *extra))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
