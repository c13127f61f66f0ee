"""Assignments: what a claimed attempt runs, built from the run's immutable snapshot.

Built at claim and again for each replay of that claim (never stored): the job's steps as
planned, the pinned actions it uses with where the runner fetches them, its contexts (with the
repository's variables as they are now) and its deadlines. It names secrets but holds no value:
the runner asks for a started step's values.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.orm import Session

from forge_ci.coordinator.contexts import PlannedJob, SnapshotRun, github_context
from forge_ci.coordinator.leases import to_ms
from forge_ci.models import Job, Run
from forge_ci.protocol import API_PREFIX, Action, Assignment, AssignmentStep
from forge_ci.runs.actions import job_action_keys
from forge_ci.runs.scheduling import RunGraph
from forge_ci.secrets.policy import variables_for


class AssignedAttempt(Protocol):
    """What an assignment reads of its attempt (a :class:`forge_ci.models.Attempt`, or the
    direct claim path's row values)."""

    @property
    def id(self) -> int: ...
    @property
    def number(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def timeout_minutes(self) -> int: ...
    @property
    def lease_expires_at(self) -> datetime: ...
    @property
    def job_deadline_at(self) -> datetime | None: ...


def source_archive_path(attempt_id: int) -> str:
    """Where the runner fetches the pinned commit's tar snapshot (served by the runner API)."""
    return f"{API_PREFIX}/attempts/{attempt_id}/source.tar"


def reads_contents(plan_job: dict[str, Any]) -> bool:
    """Whether a planned job may read the source (``permissions: {contents: read}``)."""
    permissions = plan_job.get("permissions") or {}
    return bool(permissions.get("contents", "read") == "read")


def action_archive_path(attempt_id: int, index: int) -> str:
    """Where the runner fetches the tree of the run's ``index``-th action (sorted by key)."""
    return f"{API_PREFIX}/attempts/{attempt_id}/actions/{index}.tar"


def wire_actions(run: SnapshotRun, attempt_id: int, keys: list[str]) -> dict[str, Action]:
    """The assignment's ``actions``: the snapshot's entries for ``keys``, with archive paths."""
    entries = (run.actions or {}).get("actions") or {}
    ordered = sorted(entries)
    result: dict[str, Action] = {}
    for key in keys:
        entry = entries[key]
        result[key] = Action.from_json(
            {
                "reference": entry["reference"],
                "repository": entry["repository"],
                "commit": entry["commit"],
                "path": entry["path"],
                "archive_path": action_archive_path(attempt_id, ordered.index(key)),
                "metadata": entry["metadata"],
            },
            f"actions[{key!r}]",
        )
    return result


def _wire_step(step: dict[str, Any], references: dict[str, str] | None = None) -> AssignmentStep:
    return AssignmentStep(
        id=str(step["id"]),
        name=step.get("name") or str(step["id"]),
        uses=step.get("uses") or "",
        run=step.get("run") or "",
        shell=step.get("shell") or "",
        working_directory=step.get("working_directory") or "",
        env=dict(step.get("env") or {}),
        condition=step.get("if") or "success()",
        continue_on_error=step.get("continue_on_error", False),
        timeout_minutes=step.get("timeout_minutes") or 0,
        action=(references or {}).get(step.get("uses") or "", ""),
        inputs=dict(step.get("with") or {}),
    )


def build_assignment(
    session: Session | None,
    attempt: AssignedAttempt,
    job: PlannedJob,
    run: SnapshotRun,
    now: datetime,
    token: str,
    variables: dict[str, str] | None = None,
) -> Assignment:
    """The assignment for ``attempt``, from the run's immutable snapshot (never stored).

    It names secrets but holds no value: the runner asks for a started step's values. ``job``
    and ``run`` may be rows lighter than the models (the direct claim path reads only what it
    needs); the ``needs`` context reads the run's jobs as models. ``variables``: the ``vars``
    context when the caller has read it (``secrets.policy.variables_query``), else it is read here.
    ``session`` is used only for those two reads: None when neither is needed. ``token``: the
    attempt's job token (``credentials.job_token``), the ``github.token`` context.
    """
    from forge_ci.runs.event_payload import run_inputs

    def models() -> Session:
        assert session is not None, "a job with needs, or unread variables, need a session"
        return session

    plan_job = job.definition()
    steps = list(plan_job.get("steps", []))
    references = dict((run.actions or {}).get("references") or {})
    actions = wire_actions(run, attempt.id, job_action_keys(run.actions or {}, steps))
    needs: dict[str, Any] = {}
    if job.needs:
        full_run, full_job = models().get(Run, run.id), models().get(Job, job.id)
        assert full_run is not None and full_job is not None
        graph = RunGraph(models(), full_run)
        needs = {name: entry.as_context() for name, entry in graph.needs_context(full_job).items()}
    return Assignment(
        attempt_id=attempt.id,
        attempt_number=attempt.number,
        state=attempt.state,
        run_id=run.id,
        run_number=run.number,
        job_id=job.id,
        job_key=job.key,
        job_workflow_id=job.job_id,
        job_name=job.name,
        timeout_minutes=attempt.timeout_minutes,
        steps=tuple(_wire_step(step, references) for step in steps),
        outputs=dict(plan_job.get("outputs") or {}),
        contexts={
            "github": github_context(run, job, token),
            "matrix": plan_job.get("matrix"),
            "strategy": plan_job.get("strategy"),
            "needs": needs,
            "inputs": run_inputs(run.context),
            # Current values (like secrets): a rerun sees the variables as they are now.
            "vars": variables
            if variables is not None
            else variables_for(models(), run.repository_id, run.ref, run.workflow_path),
        },
        source_archive_path=source_archive_path(attempt.id) if reads_contents(plan_job) else "",
        actions=actions,
        lease_deadline_ms=to_ms(attempt.lease_expires_at),
        job_deadline_ms=to_ms(attempt.job_deadline_at),
        server_time_ms=to_ms(now),
    )
