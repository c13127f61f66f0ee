"""actions in the runner: annotations, step summaries, ::add-mask:: values

Revision ID: 0006_actions_runner
Revises: 0006_actions_server (re-chained by the lead at merge time)

Steps of an attempt now report the ``::error``/``::warning``/``::notice`` annotations of their
output (a new table) and what they wrote to ``$GITHUB_STEP_SUMMARY`` (a column of
attempt_steps); ``::add-mask::`` values arrive with log chunks and are kept, sealed, beside the
issued secrets; ``attempts.mask_count`` counts them (the key of the cached masker).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_actions_runner"
down_revision = "0006_actions_server"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("mask_count", sa.Integer(), server_default="0", nullable=False)
        )
    with op.batch_alter_table("attempt_steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("summary", sa.Text(), nullable=True))
    op.create_table(
        "attempt_annotations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=100), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("end_line", sa.Integer(), nullable=False),
        sa.Column("col", sa.Integer(), nullable=False),
        sa.Column("end_column", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "level IN ('error', 'notice', 'warning')", name=op.f("ck_attempt_annotations_level")
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_attempt_annotations_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempt_annotations")),
        sa.UniqueConstraint(
            "attempt_id", "position", name="uq_attempt_annotations_attempt_id_position"
        ),
    )


def downgrade() -> None:
    op.drop_table("attempt_annotations")
    with op.batch_alter_table("attempt_steps", schema=None) as batch_op:
        batch_op.drop_column("summary")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("mask_count")
