"""attempts.job_token_hash: the per-job token (secrets.GITHUB_TOKEN / github.token)

Revision ID: 0006_contexts
Revises: 0005_log_carry_ending

Each attempt gets a job token derived from its credential (HMAC, so a claim replay gives the same
one); the server keeps only its SHA-256, as for the credential. It reads this repository's
source through the runner API while the attempt is live, and nothing else. Attempts from
before have none (NULL): no token is accepted for them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_contexts"
down_revision = "0006_actions_runner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_token_hash", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint(op.f("uq_attempts_job_token_hash"), ["job_token_hash"])


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("uq_attempts_job_token_hash"), type_="unique")
        batch_op.drop_column("job_token_hash")
