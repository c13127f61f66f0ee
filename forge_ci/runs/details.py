"""A run as its pages show it: jobs with timing, the dependency edges, attempts and steps.

Read-only and scoped like every query: the repository must be readable by the actor, the run is
looked up inside it, and nothing of another repository or of a provider's identity is included.
Jobs that no provider has claimed yet show the steps of their plan as ``pending``.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from datetime import datetime
from threading import Lock
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.models import Attempt, AttemptStep, Job, JobDependency, Run
from forge_ci.repos import RepositoryAccess, repository_access
from forge_ci.runs.queries import RunView, find_run, run_view


@dataclass(frozen=True)
class StepDetail:
    step_id: str
    name: str
    state: str
    conclusion: str | None
    exit_code: int | None = None
    status_reason: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None


@dataclass(frozen=True)
class AttemptDetail:
    id: int
    number: int
    state: str
    conclusion: str | None
    status_reason: str | None
    claimed_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    cancel_requested: bool
    steps: tuple[StepDetail, ...]


@dataclass(frozen=True)
class JobDetail:
    id: int
    key: str
    job_id: str
    name: str
    state: str
    conclusion: str | None
    status_reason: str | None
    #: Database ids of the jobs this one waits for (matrix needs fan out to every leg).
    needs: tuple[int, ...]
    runs_on: tuple[str, ...]
    cancel_requested: bool
    reused: bool
    created_at: datetime
    queued_at: datetime | None
    started_at: datetime | None
    completed_at: datetime | None
    attempts: tuple[AttemptDetail, ...]
    #: The steps of the plan (what the job will run), for jobs without an attempt yet.
    planned_steps: tuple[StepDetail, ...]
    #: For a job reused by ``rerun --failed``: the run number and job id whose result it kept.
    reused_from: tuple[int, int] | None = None

    @property
    def latest_attempt(self) -> AttemptDetail | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def steps(self) -> tuple[StepDetail, ...]:
        """The latest attempt's steps, or the planned ones before any attempt."""
        attempt = self.latest_attempt
        return attempt.steps if attempt is not None else self.planned_steps

    @property
    def is_terminal(self) -> bool:
        return self.state == states.COMPLETED


@dataclass(frozen=True)
class RunDetails:
    run: RunView
    jobs: tuple[JobDetail, ...]

    @property
    def is_terminal(self) -> bool:
        return self.run.state == states.COMPLETED

    def job(self, job_id: int) -> JobDetail | None:
        for job in self.jobs:
            if job.id == job_id:
                return job
        return None


def _planned_steps(plan_job: dict[str, Any]) -> tuple[StepDetail, ...]:
    from forge_ci.workflow.render import as_written

    steps = []
    for step in plan_job.get("steps", []):
        name = step.get("name")
        step_id = str(step["id"])
        steps.append(StepDetail(step_id, as_written(name) or step_id, states.PENDING, None))
    return tuple(steps)


@dataclass(frozen=True)
class _Planned:
    """What a run's pages show of its plan: each entry's steps (as ``pending``) and
    deployment environment, and the plan's notices."""

    steps: tuple[tuple[StepDetail, ...], ...]
    environments: tuple[dict[str, Any] | None, ...]
    notices: tuple[dict[str, Any], ...]


#: What pages show of a plan, by (run id, plan digest), most recent last. A run's plan never
#: changes (a database trigger refuses it), and decoding a large plan (hundreds of KB for 256
#: jobs) was the largest single cost of every run page view and every poll of it.
_PLANNED: OrderedDict[tuple[int, str], _Planned] = OrderedDict()
_PLANNED_SIZE = 64
_PLANNED_LOCK = Lock()


def _planned(run: Run) -> _Planned:
    """The run's :class:`_Planned`; the plan is read only on a cache miss."""
    key = (run.id, run.plan_digest)
    with _PLANNED_LOCK:
        found = _PLANNED.get(key)
        if found is not None:
            _PLANNED.move_to_end(key)
            return found
    plan = run.plan
    planned = _Planned(
        steps=tuple(_planned_steps(plan_job) for plan_job in plan["jobs"]),
        environments=tuple(plan_job.get("environment") for plan_job in plan["jobs"]),
        notices=tuple(plan.get("notices", ())),
    )
    with _PLANNED_LOCK:
        _PLANNED[key] = planned
        while len(_PLANNED) > _PLANNED_SIZE:
            _PLANNED.popitem(last=False)
    return planned


def run_details(session: Session, actor: Actor, full_name: str, number: int) -> RunDetails:
    """Run ``number`` of ``full_name`` with everything its page shows (readers may look)."""
    return run_details_in(session, repository_access(session, actor, full_name), number)


def run_details_in(session: Session, access: RepositoryAccess, number: int) -> RunDetails:
    """:func:`run_details` in a repository already looked up for this request."""
    repository = access.require(Role.READ)
    run = find_run(session, repository, number)
    jobs = list(
        session.scalars(
            select(Job)
            .where(Job.run_id == run.id)
            .order_by(Job.position)
            .execution_options(populate_existing=True)
        )
    )
    job_ids = [job.id for job in jobs]
    needs: dict[int, list[int]] = defaultdict(list)
    steps: dict[int, list[StepDetail]] = defaultdict(list)
    attempts: dict[int, list[AttemptDetail]] = defaultdict(list)
    if job_ids:
        for job_id, needs_id in session.execute(
            select(JobDependency.job_id, JobDependency.needs_id).where(
                JobDependency.job_id.in_(job_ids)
            )
        ):
            needs[job_id].append(needs_id)
        # Columns, not entities: a page reads hundreds of attempts and steps and changes none,
        # and plain rows are always current (no populate_existing needed) and cheaper to build.
        # Attempts first: a claim commits an attempt with its steps, so every attempt read
        # here finds its steps in the next statement (PostgreSQL reads each one afresh).
        attempt_rows = session.execute(
            select(
                Attempt.id,
                Attempt.job_id,
                Attempt.number,
                Attempt.state,
                Attempt.conclusion,
                Attempt.status_reason,
                Attempt.claimed_at,
                Attempt.started_at,
                Attempt.completed_at,
                Attempt.cancel_requested_at,
            )
            .where(Attempt.job_id.in_(job_ids))
            .order_by(Attempt.job_id, Attempt.number)
        ).all()
        for step in session.execute(
            select(
                AttemptStep.attempt_id,
                AttemptStep.step_id,
                AttemptStep.name,
                AttemptStep.state,
                AttemptStep.conclusion,
                AttemptStep.exit_code,
                AttemptStep.status_reason,
                AttemptStep.started_at,
                AttemptStep.completed_at,
            )
            .join(Attempt, Attempt.id == AttemptStep.attempt_id)
            .where(Attempt.job_id.in_(job_ids))
            .order_by(AttemptStep.attempt_id, AttemptStep.position)
        ):
            steps[step.attempt_id].append(
                StepDetail(
                    step_id=step.step_id,
                    name=step.name,
                    state=step.state,
                    conclusion=step.conclusion,
                    exit_code=step.exit_code,
                    status_reason=step.status_reason,
                    started_at=step.started_at,
                    completed_at=step.completed_at,
                )
            )
        for attempt in attempt_rows:
            attempts[attempt.job_id].append(
                AttemptDetail(
                    id=attempt.id,
                    number=attempt.number,
                    state=attempt.state,
                    conclusion=attempt.conclusion,
                    status_reason=attempt.status_reason,
                    claimed_at=attempt.claimed_at,
                    started_at=attempt.started_at,
                    completed_at=attempt.completed_at,
                    cancel_requested=attempt.cancel_requested_at is not None,
                    steps=tuple(steps[attempt.id]),
                )
            )
    # Where reused jobs got their result (same repository: reruns copy their own run's jobs).
    sources = [job.reused_from_id for job in jobs if job.reused_from_id is not None]
    reused_from: dict[int, tuple[int, int]] = {}
    if sources:
        for source_id, source_number in session.execute(
            select(Job.id, Run.number)
            .join(Run, Run.id == Job.run_id)
            .where(Job.id.in_(sources), Run.repository_id == repository.id)
        ):
            reused_from[source_id] = (source_number, source_id)
    # What the page shows of the plan, read from the plan only once per run and process.
    planned = _planned(run)
    details = []
    for job in jobs:
        details.append(
            JobDetail(
                id=job.id,
                key=job.key,
                job_id=job.job_id,
                name=job.name,
                state=job.state,
                conclusion=job.conclusion,
                status_reason=job.status_reason,
                needs=tuple(sorted(needs[job.id])),
                runs_on=tuple(job.runs_on),
                cancel_requested=job.cancel_requested_at is not None,
                reused=job.reused_from_id is not None,
                created_at=job.created_at,
                queued_at=job.queued_at,
                started_at=job.started_at,
                completed_at=job.completed_at,
                attempts=tuple(attempts[job.id]),
                planned_steps=planned.steps[job.position],
                reused_from=reused_from.get(job.reused_from_id)
                if job.reused_from_id is not None
                else None,
            )
        )
    view = run_view(
        session,
        repository,
        run,
        jobs,
        with_reruns=True,
        from_plan=(planned.environments, planned.notices),
    )
    return RunDetails(view, tuple(details))
