"""egress_connections (the egress audit) and providers.egress_policy

Revision ID: 0007_egress
Revises: 0007_claims

Jobs reach the network only through their provider's per-attempt proxy; every connection it
was asked for is stored here, and each provider reports the policy it applies (shown on the
admin page). Providers from before have reported none (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0007_egress"
down_revision = "0007_claims"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "egress_connections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("requested_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=200), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        sa.Column("explicit", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("closed", sa.String(length=200), nullable=False),
        sa.Column("bytes_out", sa.BigInteger(), nullable=False),
        sa.Column("bytes_in", sa.BigInteger(), nullable=False),
        sa.Column("milliseconds", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_egress_connections_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_egress_connections")),
        sa.UniqueConstraint(
            "attempt_id", "sequence", name="uq_egress_connections_attempt_id_sequence"
        ),
    )
    with op.batch_alter_table("providers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("egress_policy", sa.String(length=1000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("providers", schema=None) as batch_op:
        batch_op.drop_column("egress_policy")
    op.drop_table("egress_connections")
