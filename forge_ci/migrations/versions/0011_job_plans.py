"""jobs.plan: each job's own entry of its run's plan, copied beside the job

Revision ID: 0011_job_plans
Revises: 0010_served

A claim read its job's entry out of the run's whole plan (``json_extract`` on SQLite, ``->`` on
PostgreSQL's ``json``), parsing all of it once per job claimed: a tenth of a SQLite claim's
instructions at 20 jobs a run, and quadratic in a run's jobs (bench/README.md, claims,
thirteenth round). The run's plan is an immutable snapshot, and so is the copy: a trigger
refuses to change it, and another refuses a job made without it (JSON ``null`` or none).

The upgrade adds the column with a default of JSON ``null`` (SQLite adds a NOT NULL column only
with a default; removing it again, or adding the column in batch mode, would rebuild ``jobs``,
whose drop cascades to the queue and every attempt while foreign keys are on), fills it from
the runs' plans, and on PostgreSQL drops the default. A job whose run's plan has no entry at
its position cannot exist (jobs are made from the entries); should one, it keeps ``null``, its
claim is left to the ORM path, and that fails as it did before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_job_plans"
down_revision = "0010_served"
branch_labels = None
depends_on = None

_CHANGED = "a job's copy of its plan entry never changes (the run's plan is immutable)"
_MISSING = "a job is made with its own entry of its run's plan (jobs.plan)"


def upgrade() -> None:
    # Not in batch mode (see above).
    op.add_column(
        "jobs", sa.Column("plan", sa.JSON(), nullable=False, server_default=sa.text("'null'"))
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE jobs SET plan = coalesce(runs.plan -> 'jobs' -> jobs.position, 'null'::json)"
            " FROM runs WHERE runs.id = jobs.run_id"
        )
        op.alter_column("jobs", "plan", server_default=None)
        for name, message in (("changed", _CHANGED), ("missing", _MISSING)):
            op.execute(
                f"CREATE FUNCTION jobs_plan_{name}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN RAISE EXCEPTION '{_quoted(message)}'; END $$"
            )
        op.execute(
            "CREATE TRIGGER jobs_plan_changed BEFORE UPDATE OF plan ON jobs FOR EACH ROW"
            " WHEN (OLD.plan::text IS DISTINCT FROM NEW.plan::text)"
            " EXECUTE FUNCTION jobs_plan_changed()"
        )
        op.execute(
            "CREATE TRIGGER jobs_plan_missing BEFORE INSERT ON jobs FOR EACH ROW"
            " WHEN (NEW.plan IS NULL OR NEW.plan::text = 'null')"
            " EXECUTE FUNCTION jobs_plan_missing()"
        )
    else:
        op.execute(
            "UPDATE jobs SET plan = coalesce((SELECT json_extract(runs.plan, '$.jobs['"
            " || jobs.position || ']') FROM runs WHERE runs.id = jobs.run_id), 'null')"
        )
        op.execute(
            "CREATE TRIGGER jobs_plan_changed BEFORE UPDATE OF plan ON jobs FOR EACH ROW"
            f" WHEN OLD.plan IS NOT NEW.plan BEGIN SELECT RAISE(ABORT, '{_quoted(_CHANGED)}'); END"
        )
        op.execute(
            "CREATE TRIGGER jobs_plan_missing BEFORE INSERT ON jobs FOR EACH ROW"
            " WHEN NEW.plan IS NULL OR NEW.plan = 'null'"
            f" BEGIN SELECT RAISE(ABORT, '{_quoted(_MISSING)}'); END"
        )


def _quoted(message: str) -> str:
    """``message`` inside an SQL string literal."""
    return message.replace("'", "''")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in ("changed", "missing"):
            op.execute(f"DROP TRIGGER IF EXISTS jobs_plan_{name} ON jobs")
            op.execute(f"DROP FUNCTION IF EXISTS jobs_plan_{name}()")
    else:
        for name in ("changed", "missing"):
            op.execute(f"DROP TRIGGER IF EXISTS jobs_plan_{name}")
    # Not in batch mode: SQLite would rebuild ``jobs`` (see above); it drops a column itself.
    op.execute("ALTER TABLE jobs DROP COLUMN plan")
