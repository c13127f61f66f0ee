"""jobs.plan: each job's own entry of its run's plan, copied beside the job

Revision ID: 0011_job_plans
Revises: 0010_served

A claim read its job's entry out of the run's whole plan (``json_extract`` on SQLite, ``->`` on
PostgreSQL's ``json``), parsing all of it once per job claimed: a tenth of a SQLite claim's
instructions at 20 jobs a run, and quadratic in a run's jobs (bench/README.md, claims,
thirteenth round). The run's plan is an immutable snapshot, so the copy never differs from it.

The upgrade adds the column with a default of JSON ``null`` (SQLite adds a NOT NULL column
only with a default, and removing it again would rebuild ``jobs``, whose drop cascades to
every attempt while foreign keys are on), fills it from the runs' plans, and on PostgreSQL
drops the default. A job whose run's plan has no entry at its position cannot exist (jobs
are made from the entries); should one, it keeps ``null``, and its claim takes the ORM path,
which reads the run's plan as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_job_plans"
down_revision = "0010_served"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Not in batch mode: SQLite's batch would rebuild ``jobs`` for a NOT NULL column, and the
    # old table's drop deletes its rows' queue entries and attempts (ON DELETE CASCADE).
    op.add_column(
        "jobs", sa.Column("plan", sa.JSON(), nullable=False, server_default=sa.text("'null'"))
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE jobs SET plan = coalesce(runs.plan -> 'jobs' -> jobs.position, 'null'::json)"
            " FROM runs WHERE runs.id = jobs.run_id"
        )
        op.alter_column("jobs", "plan", server_default=None)
    else:
        op.execute(
            "UPDATE jobs SET plan = coalesce((SELECT json_extract(runs.plan, '$.jobs['"
            " || jobs.position || ']') FROM runs WHERE runs.id = jobs.run_id), 'null')"
        )


def downgrade() -> None:
    # Not in batch mode: SQLite would rebuild ``jobs`` (see above); it drops a column itself.
    op.execute("ALTER TABLE jobs DROP COLUMN plan")
