"""Reading runs and push-event outcomes, always scoped by a repository the caller can read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from forge_ci.authz import Actor, Role
from forge_ci.errors import InvalidInput, NotFound
from forge_ci.models import (
    Job,
    PushEvent,
    PushEventResult,
    PushEventWorkflow,
    Repository,
    Run,
)
from forge_ci.repos import find_repository

#: Longest list one call returns.
MAX_LIST = 500


def find_run(session: Session, repository: Repository, number: int) -> Run:
    """Run ``number`` of ``repository``; NotFound otherwise (never another repository's run).

    The plan is loaded when first used: it is the largest column (hundreds of KiB for a run of
    256 jobs) and the pages that look a run up on every poll (its updates, log pages) need
    none of it.
    """
    run = session.scalar(
        select(Run)
        .where(Run.repository_id == repository.id, Run.number == number)
        .options(defer(Run.plan))
    )
    if run is None:
        raise NotFound(f"run #{number} not found in {repository.full_name}")
    return run


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class JobView:
    """A job as people and APIs see it."""

    key: str
    job_id: str
    name: str
    state: str
    conclusion: str | None
    needs: list[str]
    runs_on: list[str]
    status_reason: str | None
    cancel_requested: bool
    reused: bool
    #: The deployment environment the job names (kept and shown; protection rules are not
    #: enforced): ``{"name": ..., "url": ...}`` as in the plan, or None.
    environment: dict[str, Any] | None = None

    @classmethod
    def of(cls, job: Job) -> JobView:
        return cls.planned(job, job.definition().get("environment"))

    @classmethod
    def planned(cls, job: Job, environment: dict[str, Any] | None) -> JobView:
        """The view of ``job`` whose plan entry names ``environment`` (read by the caller)."""
        return cls(
            key=job.key,
            job_id=job.job_id,
            name=job.name,
            state=job.state,
            conclusion=job.conclusion,
            needs=list(job.needs),
            runs_on=list(job.runs_on),
            status_reason=job.status_reason,
            cancel_requested=job.cancel_requested_at is not None,
            reused=job.reused_from_id is not None,
            environment=environment,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "id": self.job_id,
            "name": self.name,
            "state": self.state,
            "conclusion": self.conclusion,
            "needs": self.needs,
            "runs_on": self.runs_on,
            "reason": self.status_reason,
            "cancel_requested": self.cancel_requested,
            "reused": self.reused,
            "environment": self.environment,
        }


@dataclass(frozen=True)
class RunView:
    """A run as people and APIs see it; ``jobs`` is empty in lists."""

    repository: str
    number: int
    workflow_path: str
    workflow_name: str | None
    event_name: str
    ref: str
    sha: str
    state: str
    conclusion: str | None
    context: dict[str, Any]
    plan_digest: str
    concurrency_group: str | None
    waiting_for_concurrency: bool
    cancel_reason: str | None
    requested_by: str
    rerun_of: int | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    jobs: tuple[JobView, ...] = ()
    #: Numbers of the runs that rerun this one, oldest first (empty in lists).
    reruns: tuple[int, ...] = ()
    #: What the workflow asks for that forge-ci accepts and does not do, from the plan:
    #: ``{"line", "column", "message"}`` each (empty in lists).
    notices: tuple[dict[str, Any], ...] = ()

    def as_dict(self, with_jobs: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "repository": self.repository,
            "number": self.number,
            "workflow_path": self.workflow_path,
            "workflow_name": self.workflow_name,
            "event_name": self.event_name,
            "ref": self.ref,
            "sha": self.sha,
            "state": self.state,
            "conclusion": self.conclusion,
            "context": self.context,
            "plan_digest": self.plan_digest,
            "concurrency_group": self.concurrency_group,
            "waiting_for_concurrency": self.waiting_for_concurrency,
            "cancel_reason": self.cancel_reason,
            "requested_by": self.requested_by,
            "rerun_of": self.rerun_of,
            "reruns": list(self.reruns),
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "completed_at": _iso(self.completed_at),
        }
        if with_jobs:
            data["jobs"] = [job.as_dict() for job in self.jobs]
            data["notices"] = list(self.notices)
        return data


def run_view(
    session: Session,
    repository: Repository,
    run: Run,
    jobs: Sequence[Job] = (),
    *,
    with_reruns: bool = False,
    from_plan: tuple[Sequence[dict[str, Any] | None], Sequence[dict[str, Any]]] | None = None,
) -> RunView:
    """``run`` of ``repository`` as people see it, with ``jobs`` (none in lists).

    ``with_reruns``: also the numbers of its reruns, so that a run and its reruns link to each
    other (one more query; lists leave it out), and the plan's notices (lists defer the plan).
    ``from_plan``: each plan entry's environment and the plan's notices, when the caller has
    them (the plan, hundreds of KB, is then not read at all).
    """
    rerun_of = None
    if run.rerun_of_id is not None:
        rerun_of = session.scalar(select(Run.number).where(Run.id == run.rerun_of_id))
    reruns: tuple[int, ...] = ()
    notices: tuple[dict[str, Any], ...] = ()
    if with_reruns:
        notices = tuple(from_plan[1] if from_plan is not None else run.plan.get("notices", ()))
        reruns = tuple(
            session.scalars(
                select(Run.number).where(Run.rerun_of_id == run.id).order_by(Run.number)
            )
        )
    return RunView(
        repository=repository.full_name,
        number=run.number,
        workflow_path=run.workflow_path,
        workflow_name=run.workflow_name,
        event_name=run.event_name,
        ref=run.ref,
        sha=run.sha,
        state=run.state,
        conclusion=run.conclusion,
        context=dict(run.context),
        plan_digest=run.plan_digest,
        concurrency_group=run.concurrency_group,
        waiting_for_concurrency=run.concurrency_blocked,
        cancel_reason=run.cancel_reason,
        requested_by=run.requested_by_name,
        rerun_of=rerun_of,
        created_at=run.created_at,
        started_at=run.started_at,
        completed_at=run.completed_at,
        jobs=tuple(
            JobView.of(job)
            if from_plan is None
            else JobView.planned(job, from_plan[0][job.position])
            for job in jobs
        ),
        reruns=reruns,
        notices=notices,
    )


def list_runs(
    session: Session,
    actor: Actor,
    full_name: str,
    limit: int = 50,
    *,
    branch: str | None = None,
    workflow: str | None = None,
) -> list[RunView]:
    """The repository's runs, newest first (readers may list).

    ``branch`` keeps runs of that branch (``main`` or ``refs/heads/main``); ``workflow`` keeps
    runs of that workflow file (its path, or a bare file name under ``.github/workflows/``).
    """
    if not 1 <= limit <= MAX_LIST:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIST}, not {limit}")
    repository = find_repository(session, actor, full_name, Role.READ)
    query = select(Run).where(Run.repository_id == repository.id)
    if branch is not None:
        query = query.where(
            Run.ref == (branch if branch.startswith("refs/") else f"refs/heads/{branch}")
        )
    if workflow is not None:
        path = workflow if "/" in workflow else f".github/workflows/{workflow}"
        query = query.where(Run.workflow_path == path)
    runs = session.scalars(query.order_by(Run.number.desc()).limit(limit))
    return [run_view(session, repository, run) for run in runs]


def show_run(session: Session, actor: Actor, full_name: str, number: int) -> RunView:
    """One run with its jobs (readers may look)."""
    repository = find_repository(session, actor, full_name, Role.READ)
    run = find_run(session, repository, number)
    return run_view(session, repository, run, run.jobs, with_reruns=True)


@dataclass(frozen=True)
class WorkflowOutcomeView:
    """What one workflow file did for one push event."""

    workflow_path: str
    outcome: str
    detail: str
    diagnostics: list[dict[str, Any]] | None
    run_number: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "workflow_path": self.workflow_path,
            "outcome": self.outcome,
            "detail": self.detail,
            "diagnostics": self.diagnostics,
            "run": self.run_number,
        }


@dataclass(frozen=True)
class PushEventView:
    """A push event with what processing decided (``result`` None while not processed)."""

    id: int
    ref: str
    old_sha: str
    new_sha: str
    pusher: str
    state: str
    result: str | None
    detail: str | None
    workflows: tuple[WorkflowOutcomeView, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ref": self.ref,
            "old_sha": self.old_sha,
            "new_sha": self.new_sha,
            "pusher": self.pusher,
            "state": self.state,
            "result": self.result,
            "detail": self.detail,
            "workflows": [w.as_dict() for w in self.workflows],
        }


def show_push_event(session: Session, actor: Actor, full_name: str, event_id: int) -> PushEventView:
    """One push event of the repository and the outcome of each workflow file (readers)."""
    repository = find_repository(session, actor, full_name, Role.READ)
    event = session.scalar(
        select(PushEvent).where(PushEvent.id == event_id, PushEvent.repository_id == repository.id)
    )
    if event is None:
        raise NotFound(f"push event {event_id} not found in {full_name}")
    result = session.get(PushEventResult, event.id)
    rows = session.execute(
        select(PushEventWorkflow, Run.number)
        .outerjoin(Run, Run.id == PushEventWorkflow.run_id)
        .where(PushEventWorkflow.push_event_id == event.id)
        .order_by(PushEventWorkflow.workflow_path)
    )
    workflows = tuple(
        WorkflowOutcomeView(row.workflow_path, row.outcome, row.detail, row.diagnostics, number)
        for row, number in rows
    )
    return PushEventView(
        id=event.id,
        ref=event.ref,
        old_sha=event.old_sha,
        new_sha=event.new_sha,
        pusher=event.pusher.name,
        state=event.state,
        result=result.result if result is not None else None,
        detail=result.detail if result is not None else None,
        workflows=workflows,
    )
