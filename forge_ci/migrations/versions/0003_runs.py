"""runs: run numbers, runs with their snapshot, jobs, edges, outputs, push-event outcomes

Revision ID: 0003_runs
Revises: 0002_push_events

The snapshot columns of ``runs`` are protected by a trigger on both databases (invariant 4). A
later SQLite batch migration that recreates ``runs`` must recreate the trigger as well.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0003_runs"
down_revision = "0002_push_events"
branch_labels = None
depends_on = None

#: Mirrors forge_ci.models.runs.RUN_SNAPSHOT_COLUMNS at the time of this revision.
SNAPSHOT_COLUMNS = (
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
)
COMPLETED_HAS_CONCLUSION = (
    "(state = 'completed' AND conclusion IS NOT NULL) "
    "OR (state <> 'completed' AND conclusion IS NULL)"
)
KNOWN_CONCLUSION = (
    "conclusion IS NULL OR "
    "conclusion IN ('cancelled', 'failure', 'lost', 'skipped', 'success', 'timed_out')"
)
_MESSAGE = "the snapshot of a run (source, workflow, plan, context) never changes"


def _changed(cast: str) -> str:
    return " OR ".join(
        f"OLD.{c}{cast if c in ('plan', 'context') else ''} IS DISTINCT FROM "
        f"NEW.{c}{cast if c in ('plan', 'context') else ''}"
        for c in SNAPSHOT_COLUMNS
    )


def _create_snapshot_trigger() -> None:
    columns = ", ".join(SNAPSHOT_COLUMNS)
    if op.get_bind().dialect.name == "sqlite":
        changed = _changed("").replace("IS DISTINCT FROM", "IS NOT")
        op.execute(
            f"CREATE TRIGGER runs_snapshot_immutable BEFORE UPDATE OF {columns} ON runs "
            f"FOR EACH ROW WHEN {changed} "
            f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END"
        )
    else:
        op.execute(
            "CREATE FUNCTION runs_snapshot_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN RAISE EXCEPTION '{_MESSAGE}'; END $$"
        )
        op.execute(
            f"CREATE TRIGGER runs_snapshot_immutable BEFORE UPDATE OF {columns} ON runs "
            f"FOR EACH ROW WHEN ({_changed('::text')}) "
            "EXECUTE FUNCTION runs_snapshot_immutable()"
        )


def _drop_snapshot_trigger() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS runs_snapshot_immutable")
    else:
        op.execute("DROP TRIGGER IF EXISTS runs_snapshot_immutable ON runs")
        op.execute("DROP FUNCTION IF EXISTS runs_snapshot_immutable()")


def upgrade() -> None:
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "push_workflows_enabled_at",
                forge_ci.models.base.UTCDateTime(timezone=True),
                nullable=True,
            )
        )
    op.create_table(
        "run_sequences",
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("last_number", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_run_sequences_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("repository_id", name=op.f("pk_run_sequences")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("workflow_path", sa.String(length=255), nullable=False),
        sa.Column("workflow_name", sa.Text(), nullable=True),
        sa.Column("event_name", sa.String(length=32), nullable=False),
        sa.Column("ref", sa.String(length=255), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("pin_ref", sa.String(length=255), nullable=False),
        sa.Column("workflow_source", sa.Text(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("plan_version", sa.Integer(), nullable=False),
        sa.Column("plan_digest", sa.String(length=64), nullable=False),
        sa.Column("context", sa.JSON(), nullable=False),
        sa.Column("concurrency_group", sa.Text(), nullable=True),
        sa.Column("concurrency_key", sa.String(length=64), nullable=True),
        sa.Column("cancel_in_progress", sa.Boolean(), nullable=False),
        sa.Column("concurrency_blocked", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("conclusion", sa.String(length=16), nullable=True),
        sa.Column(
            "cancel_requested_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("cancel_reason", sa.Text(), nullable=True),
        sa.Column("requested_by_id", sa.Integer(), nullable=True),
        sa.Column("requested_by_name", sa.String(length=40), nullable=False),
        sa.Column("rerun_of_id", sa.Integer(), nullable=True),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            COMPLETED_HAS_CONCLUSION,
            name=op.f("ck_runs_conclusion_iff_completed"),
        ),
        sa.CheckConstraint(
            KNOWN_CONCLUSION,
            name=op.f("ck_runs_conclusion"),
        ),
        sa.CheckConstraint(
            "state IN ('completed', 'queued', 'running')", name=op.f("ck_runs_state")
        ),
        sa.CheckConstraint("number >= 1", name=op.f("ck_runs_number_positive")),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_runs_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["requested_by_id"],
            ["users.id"],
            name=op.f("fk_runs_requested_by_id_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["rerun_of_id"], ["runs.id"], name=op.f("fk_runs_rerun_of_id_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("pin_ref", name=op.f("uq_runs_pin_ref")),
        sa.UniqueConstraint("repository_id", "number", name=op.f("uq_runs_repository_id")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_concurrency", ["repository_id", "concurrency_key", "state"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_runs_repository_id"), ["repository_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_runs_requested_by_id"), ["requested_by_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_runs_rerun_of_id"), ["rerun_of_id"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("job_id", sa.String(length=100), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("needs", sa.JSON(), nullable=False),
        sa.Column("runs_on", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("conclusion", sa.String(length=16), nullable=True),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column(
            "cancel_requested_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("reused_from_id", sa.Integer(), nullable=True),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("queued_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("started_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            COMPLETED_HAS_CONCLUSION,
            name=op.f("ck_jobs_conclusion_iff_completed"),
        ),
        sa.CheckConstraint(
            KNOWN_CONCLUSION,
            name=op.f("ck_jobs_conclusion"),
        ),
        sa.CheckConstraint(
            "state IN ('completed', 'queued', 'running', 'waiting')", name=op.f("ck_jobs_state")
        ),
        sa.ForeignKeyConstraint(
            ["reused_from_id"],
            ["jobs.id"],
            name=op.f("fk_jobs_reused_from_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_jobs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("run_id", "position", name=op.f("uq_jobs_run_id")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_jobs_reused_from_id"), ["reused_from_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_jobs_run_id"), ["run_id"], unique=False)
        batch_op.create_index("ix_jobs_state_queued_at", ["state", "queued_at"], unique=False)

    op.create_table(
        "job_dependencies",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("needs_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["needs_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_needs_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "needs_id", name=op.f("pk_job_dependencies")),
    )
    with op.batch_alter_table("job_dependencies", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_job_dependencies_needs_id"), ["needs_id"], unique=False
        )

    op.create_table(
        "job_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_outputs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_outputs")),
        sa.UniqueConstraint("job_id", "name", name=op.f("uq_job_outputs_job_id")),
    )
    with op.batch_alter_table("job_outputs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_outputs_job_id"), ["job_id"], unique=False)
    op.create_table(
        "push_event_results",
        sa.Column("push_event_id", sa.Integer(), nullable=False),
        sa.Column("result", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("changed_paths_count", sa.Integer(), nullable=True),
        sa.Column("processed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "result IN ('processed', 'ignored', 'disabled', 'not_authorized', 'source_missing')",
            name=op.f("ck_push_event_results_result"),
        ),
        sa.ForeignKeyConstraint(
            ["push_event_id"],
            ["push_events.id"],
            name=op.f("fk_push_event_results_push_event_id_push_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("push_event_id", name=op.f("pk_push_event_results")),
    )
    op.create_table(
        "push_event_workflows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("push_event_id", sa.Integer(), nullable=False),
        sa.Column("workflow_path", sa.String(length=255), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("diagnostics", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('run_created', 'not_matched', 'invalid', 'failed')",
            name=op.f("ck_push_event_workflows_outcome"),
        ),
        sa.CheckConstraint(
            "run_id IS NULL OR outcome = 'run_created'",
            name=op.f("ck_push_event_workflows_run_only_if_created"),
        ),
        sa.ForeignKeyConstraint(
            ["push_event_id"],
            ["push_events.id"],
            name=op.f("fk_push_event_workflows_push_event_id_push_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_push_event_workflows_run_id_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_event_workflows")),
        sa.UniqueConstraint(
            "push_event_id", "workflow_path", name=op.f("uq_push_event_workflows_push_event_id")
        ),
        sa.UniqueConstraint("run_id", name=op.f("uq_push_event_workflows_run_id")),
    )
    with op.batch_alter_table("push_event_workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_push_event_workflows_push_event_id"), ["push_event_id"], unique=False
        )

    _create_snapshot_trigger()


def downgrade() -> None:
    _drop_snapshot_trigger()
    with op.batch_alter_table("push_event_workflows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_push_event_workflows_push_event_id"))
    op.drop_table("push_event_workflows")
    op.drop_table("push_event_results")
    with op.batch_alter_table("job_outputs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_outputs_job_id"))

    op.drop_table("job_outputs")
    with op.batch_alter_table("job_dependencies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_dependencies_needs_id"))

    op.drop_table("job_dependencies")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state_queued_at")
        batch_op.drop_index(batch_op.f("ix_jobs_run_id"))
        batch_op.drop_index(batch_op.f("ix_jobs_reused_from_id"))

    op.drop_table("jobs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_rerun_of_id"))
        batch_op.drop_index(batch_op.f("ix_runs_requested_by_id"))
        batch_op.drop_index(batch_op.f("ix_runs_repository_id"))
        batch_op.drop_index("ix_runs_concurrency")

    op.drop_table("runs")
    op.drop_table("run_sequences")
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_column("push_workflows_enabled_at")
