"""revisions: change counters on runs, jobs, attempts and steps for cheap live pages

Revision ID: 0006_live_pages
Revises: 0005_log_carry_ending

Each row counts its shown changes (forge_ci.models.revisions), so a run page's poll can tell
"nothing changed" from one aggregate query instead of reloading the run. Existing rows start at 1.
Plain ADD COLUMN (no batch copy): on SQLite a table copy would drop the runs snapshot trigger.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_live_pages"
down_revision = "0005_log_carry_ending"
branch_labels = None
depends_on = None

TABLES = ("runs", "jobs", "attempts", "attempt_steps")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table, sa.Column("revision", sa.Integer(), nullable=False, server_default="1")
        )


def downgrade() -> None:
    for table in TABLES:
        if op.get_bind().dialect.name == "sqlite":
            # SQLite 3.35+ drops a plain column in place (no table copy, the trigger stays).
            op.execute(f"ALTER TABLE {table} DROP COLUMN revision")
        else:
            op.drop_column(table, "revision")
