"""push events: intents recorded by the reference-transaction hook, confirmed after each push

Revision ID: 0002_push_events
Revises: 0001_baseline
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0002_push_events"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("pusher_id", sa.Integer(), nullable=False),
        sa.Column("push_session", sa.String(length=64), nullable=False),
        sa.Column("ref", sa.String(length=1024), nullable=False),
        sa.Column("old_sha", sa.String(length=64), nullable=False),
        sa.Column("new_sha", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("settled_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("received_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["pusher_id"], ["users.id"], name=op.f("fk_push_events_pusher_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_push_events_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_events")),
        sa.UniqueConstraint("push_session", "ref", name=op.f("uq_push_events_push_session")),
    )
    with op.batch_alter_table("push_events", schema=None) as batch_op:
        batch_op.create_index(
            "ix_push_events_repository_id_state", ["repository_id", "state"], unique=False
        )
        batch_op.create_index("ix_push_events_state", ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("push_events", schema=None) as batch_op:
        batch_op.drop_index("ix_push_events_state")
        batch_op.drop_index("ix_push_events_repository_id_state")
    op.drop_table("push_events")
