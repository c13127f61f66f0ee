"""attempts: a partial index of the attempts a provider's own change cancelled

Revision ID: 0009_claims3
Revises: 0008_events

Every claim asks whether its provider is waiting out a cancellation its own change (revoke,
labels, access) asked for. That read scanned every unended attempt of the forge by the state
index, so each claim cost more the more jobs were running (bench/README.md, claims, fourth
round). The partial index holds only the attempts so cancelled (the flag stays after they
end): a few rows per provider, none for most.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_claims3"
down_revision = "0008_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_attempts_waiting",
        "attempts",
        ["provider_id"],
        # As forge_ci.models.attempts.WAITING_WHERE (the claim's condition, word for word).
        sqlite_where=sa.text("cancelled_by_provider_change IS 1"),
        postgresql_where=sa.text("cancelled_by_provider_change IS true"),
    )


def downgrade() -> None:
    op.drop_index("ix_attempts_waiting", table_name="attempts")
