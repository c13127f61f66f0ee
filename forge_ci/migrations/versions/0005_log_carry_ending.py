"""log carries: what each withheld tail ends as when the server ends the stream

Revision ID: 0005_log_carry_ending
Revises: 0004_runner_protocol

A short unresolved tail at the end of a stream is released, a long one masked (forge_ci.masking,
MIN_TAIL_BYTES). The server ends streams without the attempt credential too, so each carry now
keeps the text its stream ends with. Rows from before have none (NULL): they end as the mask,
as they always did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_log_carry_ending"
down_revision = "0004_runner_protocol"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("log_carries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ending", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("log_carries", schema=None) as batch_op:
        batch_op.drop_column("ending")
