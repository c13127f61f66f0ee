"""The contexts of an assignment that the coordinator fills in at claim time.

The run's snapshot holds the queue-time ``github`` fields and the event payload
(``forge_ci.workflow.context``); a claim adds the facts of the job and its attempt, the job
token, and this forge's web origin. The runner adds the rest (``worker/runner/contexts.py``).
"""

from __future__ import annotations

from typing import Any, Protocol

from forge_ci.protocol import API_PREFIX, Assignment


class SnapshotRun(Protocol):
    """What an assignment reads of a run (a :class:`forge_ci.models.Run`, or a lighter row)."""

    @property
    def id(self) -> int: ...
    @property
    def number(self) -> int: ...
    @property
    def repository_id(self) -> int: ...
    @property
    def ref(self) -> str: ...
    @property
    def sha(self) -> str: ...
    @property
    def workflow_path(self) -> str: ...
    @property
    def workflow_name(self) -> str | None: ...
    @property
    def requested_by_name(self) -> str: ...
    @property
    def context(self) -> dict[str, Any]: ...
    @property
    def actions(self) -> dict[str, Any] | None: ...


class PlannedJob(Protocol):
    """What an assignment reads of a job (a :class:`forge_ci.models.Job`, or a lighter row)."""

    @property
    def id(self) -> int: ...
    @property
    def key(self) -> str: ...
    @property
    def job_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def needs(self) -> list[str]: ...
    def definition(self) -> dict[str, Any]: ...


def github_context(run: SnapshotRun, job: PlannedJob, token: str = "") -> dict[str, Any]:
    """The run's captured context plus the facts of this job (the same for each attempt).

    Runs created before the full context was captured lack some queue-time fields; they get
    the values the run row still knows. ``server_url``/``api_url`` are added by the service
    (:func:`with_server_url`), ``workspace``/``action``/``action_path`` by the runner.
    """
    from forge_ci.workflow.context import ref_parts

    # The typed inputs live beside the github fields in the snapshot; they are a context of
    # their own (``inputs``), not a github field.
    context: dict[str, Any] = {k: v for k, v in run.context.items() if k != "inputs"}
    owner = str(run.context.get("repository", "")).partition("/")[0]
    ref_name, ref_type = ref_parts(run.ref)
    for name, value in (
        ("repository_owner", owner),
        ("ref_name", ref_name),
        ("ref_type", ref_type),
        ("ref_protected", False),
        ("actor", run.requested_by_name),
        ("triggering_actor", run.requested_by_name),
        ("workflow", run.workflow_name or run.workflow_path),
        ("workflow_ref", f"{context.get('repository', '')}/{run.workflow_path}@{run.ref}"),
        ("workflow_sha", run.sha),
        ("event", {}),
    ):
        context.setdefault(name, value)
    context.update(
        {
            "ref": run.ref,
            "sha": run.sha,
            "repository_id": str(run.repository_id),
            "run_id": str(run.id),
            # A rerun's captured context holds the first run's number and its own attempt
            # (forge_ci.runs.rerun); a job's requeue after a lost provider is not a new one.
            "run_number": str(context.get("run_number", run.number)),
            "run_attempt": str(context.get("run_attempt", 1)),
            "job": job.job_id,
            "retention_days": "0",
            "token": token,
        }
    )
    return context


def with_server_url(assignment: Assignment | None, public_url: str) -> Assignment | None:
    """``github.server_url`` and ``github.api_url``: this forge's web origin (a setting)."""
    if assignment is not None:
        origin = public_url.rstrip("/")
        github = assignment.contexts["github"]
        github["server_url"] = origin
        github["api_url"] = origin + API_PREFIX
    return assignment
