"""scheduled workflows: the repository switch and one row per workflow and scheduled minute

Revision ID: 0006_schedule_inputs
Revises: 0005_log_carry_ending

Scheduled workflows are off by default, like push workflows; the person who switches them on
is the requester of every scheduled run (rechecked each time). ``scheduled_minutes`` holds what
the scheduler decided for a workflow in a minute; its unique key makes a minute fire at most once
whatever the number of workers (issue #16).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0006_schedule_inputs"
down_revision = "0006_secrets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "scheduled_workflows_enabled",
                sa.Boolean(),
                nullable=False,
                server_default=sa.false(),
            )
        )
        batch_op.add_column(
            sa.Column(
                "scheduled_workflows_enabled_at",
                forge_ci.models.base.UTCDateTime(timezone=True),
                nullable=True,
            )
        )
        batch_op.add_column(
            sa.Column("scheduled_workflows_requester_id", sa.Integer(), nullable=True)
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_repositories_scheduled_workflows_requester_id_users"),
            "users",
            ["scheduled_workflows_requester_id"],
            ["id"],
            ondelete="SET NULL",
        )
    op.create_table(
        "scheduled_minutes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("workflow_path", sa.String(length=255), nullable=False),
        sa.Column("minute", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('failed', 'not_authorized', 'run_created')",
            name=op.f("ck_scheduled_minutes_outcome"),
        ),
        sa.CheckConstraint(
            "run_id IS NULL OR outcome = 'run_created'",
            name=op.f("ck_scheduled_minutes_run_only_if_created"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_scheduled_minutes_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_scheduled_minutes_run_id_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduled_minutes")),
        sa.UniqueConstraint(
            "repository_id",
            "workflow_path",
            "minute",
            name=op.f("uq_scheduled_minutes_repository_id"),
        ),
        sa.UniqueConstraint("run_id", name=op.f("uq_scheduled_minutes_run_id")),
    )
    with op.batch_alter_table("scheduled_minutes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_scheduled_minutes_repository_id"), ["repository_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduled_minutes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scheduled_minutes_repository_id"))
    op.drop_table("scheduled_minutes")
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_repositories_scheduled_workflows_requester_id_users"),
            type_="foreignkey",
        )
        batch_op.drop_column("scheduled_workflows_requester_id")
        batch_op.drop_column("scheduled_workflows_enabled_at")
        batch_op.drop_column("scheduled_workflows_enabled")
