"""push_events.claimed_by and claimed_until: a confirmed event is processed by one worker at a time

Revision ID: 0008_events
Revises: 0007_egress

A worker claims an event with a conditional UPDATE before it processes it (issue #14, finding
5: no event processed twice); the claim is a lease that ends by itself when its holder died.
Events from before have no claim (NULL), so the scan offers them as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

revision = "0008_events"
down_revision = "0007_egress"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("push_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_by", sa.String(length=255), nullable=True))
        batch_op.add_column(
            sa.Column(
                "claimed_until", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("push_events", schema=None) as batch_op:
        batch_op.drop_column("claimed_until")
        batch_op.drop_column("claimed_by")
