"""Runs, their jobs, the dependency edges between jobs and the outputs jobs publish.

::

    repositories 1──1 run_sequences          last run number handed out (row-locked counter),
         │                                   last claim (served_at: the claims' fairness key)
         │
         1──* runs                           (repository_id, number) unique; immutable snapshot:
                │                            sha, pin_ref, workflow_source, plan, context
                1──* jobs                    one per job instance of the plan (matrix legs)
                       │   \\
                       │    *──* job_dependencies   job -> every instance of each job it needs
                       1──* job_outputs            (job_id, name) unique

The runner-protocol tables (attempts, steps, logs) reference ``jobs.id``. A run's snapshot
columns never change after insert: the ORM refuses it (``Run._refuse_snapshot_changes``) and the
database refuses it with a trigger (migration ``0003_runs``). State and conclusion are separate,
and a conclusion exists exactly when the state is ``completed`` (check constraints below, and
every change goes through :func:`forge_ci.states.require_transition`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy import inspect as inspect_instance
from sqlalchemy.orm import Mapped, mapped_column, relationship, validates

from forge_ci import states
from forge_ci.models.base import Base, utcnow
from forge_ci.models.queue import follow_queue
from forge_ci.models.repositories import Repository
from forge_ci.models.revisions import count_changes


def _one_of(column: str, values: frozenset[str] | dict[str, Any]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in sorted(values))})"


def _conclusion_iff_completed() -> str:
    return (
        "(state = 'completed' AND conclusion IS NOT NULL) "
        "OR (state <> 'completed' AND conclusion IS NULL)"
    )


#: Columns of a run that form its immutable snapshot (also protected by a database trigger).
RUN_SNAPSHOT_COLUMNS = (
    "repository_id",
    "number",
    "workflow_path",
    "workflow_name",
    "event_name",
    "ref",
    "sha",
    "pin_ref",
    "workflow_source",
    "plan",
    "plan_version",
    "plan_digest",
    "context",
    "actions",
)


class RunSequence(Base):
    """A repository's scheduling row: the last run number handed out, and its last claim.

    Locked (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) by every
    transaction that numbers, starts, completes or cancels runs of the repository, so numbers
    are gapless and concurrency-group decisions are serialized; a PostgreSQL claim of the
    repository's work holds it too, so writing ``served_at`` there adds no lock.
    """

    __tablename__ = "run_sequences"

    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), primary_key=True
    )
    last_number: Mapped[int] = mapped_column(default=0)
    #: When a provider last claimed a job of the repository (None: never), stamped by the
    #: claim: the fairness key, least recently served first (``coordinator.claims``). Kept as
    #: data so a claim's look reads it with the row instead of the latest attempt by an index
    #: (migration 0010_served).
    served_at: Mapped[datetime | None]


class Run(Base):
    """One execution of one workflow file at one pinned commit."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("repository_id", "number"),
        CheckConstraint("number >= 1", name="number_positive"),
        CheckConstraint(_one_of("state", states.RUN_TRANSITIONS), name="state"),
        CheckConstraint(
            "conclusion IS NULL OR " + _one_of("conclusion", states.CONCLUSIONS),
            name="conclusion",
        ),
        CheckConstraint(_conclusion_iff_completed(), name="conclusion_iff_completed"),
        Index("ix_runs_concurrency", "repository_id", "concurrency_key", "state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Grows with every shown change (:mod:`forge_ci.models.revisions`).
    revision: Mapped[int] = mapped_column(default=1, server_default="1")
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int]

    # --- The immutable snapshot ----------------------------------------------------------
    workflow_path: Mapped[str] = mapped_column(String(255))
    workflow_name: Mapped[str | None] = mapped_column(Text)
    #: ``push``, ``workflow_dispatch`` or ``schedule`` (also in ``context``).
    event_name: Mapped[str] = mapped_column(String(32))
    #: The branch the run was created for, as a full ref (``refs/heads/main``).
    ref: Mapped[str] = mapped_column(String(255))
    sha: Mapped[str] = mapped_column(String(64))
    #: ``refs/forge-ci/pipelines/<token>``: keeps ``sha`` reachable whatever happens to branches.
    pin_ref: Mapped[str] = mapped_column(String(255), unique=True)
    #: The workflow file exactly as read from the pinned commit.
    workflow_source: Mapped[str] = mapped_column(Text)
    #: The normalized plan with ``github.*`` env references resolved.
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    plan_version: Mapped[int]
    #: SHA-256 of the canonical JSON of ``plan``.
    plan_digest: Mapped[str] = mapped_column(String(64))
    #: ``{"repository", "sha", "event_name", "head_ref", "base_ref"}`` captured at creation.
    context: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: The resolved ``uses:`` actions: commits, pins, action.yml (see forge_ci.runs.actions).
    #: None for runs created before actions existed (they use none).
    actions: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    # --- Scheduling ------------------------------------------------------------------------
    #: The resolved concurrency group (None: no group) and its SHA-256, which is indexed.
    concurrency_group: Mapped[str | None] = mapped_column(Text)
    concurrency_key: Mapped[str | None] = mapped_column(String(64))
    cancel_in_progress: Mapped[bool] = mapped_column(default=False)
    #: True while an earlier run of the same group is active (no job is queued meanwhile).
    concurrency_blocked: Mapped[bool] = mapped_column(default=False)

    state: Mapped[str] = mapped_column(String(16), default=states.QUEUED)
    conclusion: Mapped[str | None] = mapped_column(String(16))
    cancel_requested_at: Mapped[datetime | None]
    cancel_reason: Mapped[str | None] = mapped_column(Text)

    # --- Provenance ------------------------------------------------------------------------
    #: Who asked for the run (the pusher, the dispatcher, the person rerunning); rechecked
    #: when providers claim its jobs. None for the operator CLI or a deleted user.
    requested_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    requested_by_name: Mapped[str] = mapped_column(String(40))
    rerun_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]

    repository: Mapped[Repository] = relationship()
    jobs: Mapped[list[Job]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Job.position"
    )

    @property
    def is_active(self) -> bool:
        return not states.is_terminal(self.state)

    @validates(*RUN_SNAPSHOT_COLUMNS)
    def _refuse_snapshot_changes(self, key: str, value: Any) -> Any:
        # Invariant 4: what a run executes never changes once the run exists.
        if inspect_instance(self).has_identity:
            raise ValueError(f"run {self.id}: {key} is part of the immutable snapshot")
        return value

    @classmethod
    def __declare_last__(cls) -> None:
        count_changes(cls)


class Job(Base):
    """One job instance of a run (a matrix leg is a job of its own)."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("run_id", "position"),
        CheckConstraint(_one_of("state", states.JOB_TRANSITIONS), name="state"),
        CheckConstraint(
            "conclusion IS NULL OR " + _one_of("conclusion", states.CONCLUSIONS),
            name="conclusion",
        ),
        CheckConstraint(_conclusion_iff_completed(), name="conclusion_iff_completed"),
        Index("ix_jobs_state_queued_at", "state", "queued_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Grows with every shown change (:mod:`forge_ci.models.revisions`).
    revision: Mapped[int] = mapped_column(default=1, server_default="1")
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    #: Index of the job instance in ``run.plan["jobs"]``.
    position: Mapped[int]
    #: The instance key (``build (linux, 3.11)``), unique within the plan.
    key: Mapped[str] = mapped_column(Text)
    #: The job id in the workflow file (``build``); shared by the legs of a matrix.
    job_id: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(Text)
    #: The job ids this job needs, as written (every instance of each is a dependency).
    needs: Mapped[list[str]] = mapped_column(JSON)
    #: The runner labels a provider must have (copied from the plan for claim matching).
    runs_on: Mapped[list[str]] = mapped_column(JSON)
    #: This instance's entry of ``run.plan["jobs"]``, copied when the job is made (the run's
    #: snapshot is immutable, so the copy never differs): a claim reads its job's entry
    #: without parsing the run's whole plan, which it did once per job claimed (a tenth of a
    #: SQLite claim at 20 jobs a run; bench/README.md). Deferred: loaded only when read.
    plan: Mapped[dict[str, Any]] = mapped_column(JSON, deferred=True)

    #: Its old value is kept for the flush (active history): the claim queue follows it.
    state: Mapped[str] = mapped_column(String(16), active_history=True)
    conclusion: Mapped[str | None] = mapped_column(String(16))
    #: Why the server decided the job's fate (skipped, cancelled, failed before running).
    status_reason: Mapped[str | None] = mapped_column(Text)
    #: Set once when cancellation of a running job is requested; the runner protocol stops it.
    cancel_requested_at: Mapped[datetime | None]
    #: For ``rerun --failed``: the job of the earlier run whose result this one reuses.
    reused_from_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True
    )

    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    queued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]

    run: Mapped[Run] = relationship(back_populates="jobs")
    outputs: Mapped[list[JobOutput]] = relationship(
        back_populates="job", cascade="all, delete-orphan", order_by="JobOutput.name"
    )

    @validates("plan")
    def _refuse_plan_changes(self, key: str, value: Any) -> Any:
        # The run's snapshot never changes, nor does a job's copy of its entry.
        if inspect_instance(self).has_identity:
            raise ValueError(f"job {self.id}: its plan entry is part of the run's snapshot")
        return value

    def definition(self) -> dict[str, Any]:
        """This instance's entry of the run's plan (steps, env, outputs, timeout...)."""
        job: dict[str, Any] = self.run.plan["jobs"][self.position]
        return job

    @classmethod
    def __declare_last__(cls) -> None:
        count_changes(cls)
        follow_queue(cls)


class JobDependency(Base):
    """An edge of the run's DAG: ``job`` waits for ``needs`` (matrix needs fan out to legs)."""

    __tablename__ = "job_dependencies"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    needs_id: Mapped[int] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class JobOutput(Base):
    """One output value a job published when it completed (``needs.<id>.outputs.<name>``)."""

    __tablename__ = "job_outputs"
    __table_args__ = (UniqueConstraint("job_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    value: Mapped[str] = mapped_column(Text)

    job: Mapped[Job] = relationship(back_populates="outputs")
