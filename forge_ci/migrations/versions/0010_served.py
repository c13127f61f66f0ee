"""run_sequences.served_at: when a repository's job was last claimed (the claim's fairness key)

Revision ID: 0010_served
Revises: 0009_claims3

Claims serve the least recently served repository first. Each claim's look read that key as
the latest attempt's ``claimed_at`` per candidate repository, by an index on attempts that
every claim also had to write (about three page reads and one page write a claim on SQLite:
bench/README.md, claims, twelfth round). Now the claim stamps the repository's scheduling row,
which its look reads anyway; the upgrade fills the stamp from the attempts so far, and the
index goes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_served"
down_revision = "0009_claims3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_sequences") as batch_op:
        batch_op.add_column(sa.Column("served_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE run_sequences SET served_at = (SELECT max(attempts.claimed_at) FROM attempts"
        " WHERE attempts.repository_id = run_sequences.repository_id)"
    )
    op.drop_index("ix_attempts_repository_id_claimed_at", table_name="attempts")


def downgrade() -> None:
    op.create_index(
        "ix_attempts_repository_id_claimed_at", "attempts", ["repository_id", "claimed_at"]
    )
    with op.batch_alter_table("run_sequences") as batch_op:
        batch_op.drop_column("served_at")
