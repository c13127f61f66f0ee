"""server-side browser sessions and the login throttle

Revision ID: 0006_security
Revises: 0005_log_carry_ending

Issue #14, findings 7 and 8: a copied session cookie kept working after logout, and nothing
slowed down password guessing. Sessions signed in before this migration carry no session token
and are signed out once.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0006_security"
down_revision = "0006_live_pages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_web_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_web_sessions_token_hash")),
    )
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_web_sessions_user_id", ["user_id"], unique=False)
    op.create_table(
        "login_throttles",
        sa.Column("key", sa.String(length=120), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column(
            "last_failure_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("blocked_until", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_login_throttles")),
    )


def downgrade() -> None:
    op.drop_table("login_throttles")
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_web_sessions_user_id")
    op.drop_table("web_sessions")
