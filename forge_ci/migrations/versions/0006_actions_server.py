"""runs.actions: the resolved uses: actions of a run (snapshot); repositories.mirror_url

Revision ID: 0006_actions_server
Revises: 0005_log_carry_ending

Issue #15: every action a run uses is resolved to a commit at run creation and stored with the
action.yml read (forge_ci.runs.actions). The column joins the snapshot, so the trigger that
protects the snapshot columns (0003_runs) is recreated with it. Older runs have NULL: no actions.
repositories.mirror_url marks an operator's mirror (``forge-ci repo mirror``), usable as an
action by every run creator.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_actions_server"
down_revision = "0006_schedule_inputs"
branch_labels = None
depends_on = None

_BEFORE = (
    "repository_id",
    "number",
    "workflow_path",
    "workflow_name",
    "event_name",
    "ref",
    "sha",
    "pin_ref",
    "workflow_source",
    "plan",
    "plan_version",
    "plan_digest",
    "context",
)
_AFTER = (*_BEFORE, "actions")
_JSON = ("plan", "context", "actions")
_MESSAGE = "the snapshot of a run (source, workflow, plan, context) never changes"


def _changed(columns: tuple[str, ...], cast: str) -> str:
    return " OR ".join(
        f"OLD.{c}{cast if c in _JSON else ''} IS DISTINCT FROM NEW.{c}{cast if c in _JSON else ''}"
        for c in columns
    )


def _recreate_trigger(columns: tuple[str, ...]) -> None:
    listed = ", ".join(columns)
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS runs_snapshot_immutable")
        changed = _changed(columns, "").replace("IS DISTINCT FROM", "IS NOT")
        op.execute(
            f"CREATE TRIGGER runs_snapshot_immutable BEFORE UPDATE OF {listed} ON runs "
            f"FOR EACH ROW WHEN {changed} "
            f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END"
        )
    else:
        op.execute("DROP TRIGGER IF EXISTS runs_snapshot_immutable ON runs")
        op.execute(
            f"CREATE TRIGGER runs_snapshot_immutable BEFORE UPDATE OF {listed} ON runs "
            f"FOR EACH ROW WHEN ({_changed(columns, '::text')}) "
            "EXECUTE FUNCTION runs_snapshot_immutable()"
        )


def upgrade() -> None:
    # A plain ADD COLUMN (no batch copy of the table on SQLite, which would drop the trigger).
    op.add_column("runs", sa.Column("actions", sa.JSON(), nullable=True))
    _recreate_trigger(_AFTER)
    op.add_column("repositories", sa.Column("mirror_url", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_column("mirror_url")
    _recreate_trigger(_BEFORE)
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("actions")
    if op.get_bind().dialect.name == "sqlite":
        _recreate_trigger(_BEFORE)
