"""job_queue and job_queue_counts: the claim queue as data (issue #21, claims)

Revision ID: 0007_claims
Revises: 0006_contexts

One row per queued job (indexed by repository, label set and age) and a count per repository
and label set, kept in step with ``jobs.state`` by the models (forge_ci/models/queue.py). The
upgrade fills both from the jobs queued at that moment.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007_claims"
down_revision = "0006_contexts"
branch_labels = None
depends_on = None


def _label_key(runs_on: Any) -> str:
    # A copy of forge_ci.models.queue.label_key as of this revision (migrations never change).
    labels = json.loads(runs_on) if isinstance(runs_on, str) else runs_on
    normalized = sorted({str(label).strip().lower() for label in labels or []})
    return json.dumps(normalized, separators=(",", ":"))


def upgrade() -> None:
    op.create_table(
        "job_queue",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_queue_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_job_queue_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_queue")),
    )
    op.create_index(
        "ix_job_queue_repository_id_labels",
        "job_queue",
        ["repository_id", "labels", "queued_at", "job_id"],
    )
    op.create_table(
        "job_queue_counts",
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("queued", sa.Integer(), nullable=False),
        sa.CheckConstraint("queued >= 0", name=op.f("ck_job_queue_counts_queued_not_negative")),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_job_queue_counts_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("repository_id", "labels", name=op.f("pk_job_queue_counts")),
    )
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "INSERT INTO job_queue (job_id, repository_id, labels, queued_at) "
            "SELECT jobs.id, runs.repository_id, '', jobs.queued_at FROM jobs "
            "JOIN runs ON runs.id = jobs.run_id WHERE jobs.state = 'queued'"
        )
    )
    labels = [
        {"job_id": job_id, "labels": _label_key(runs_on)}
        for job_id, runs_on in bind.execute(
            sa.text(
                "SELECT jobs.id, jobs.runs_on FROM jobs JOIN job_queue "
                "ON job_queue.job_id = jobs.id"
            )
        )
    ]
    if labels:
        bind.execute(
            sa.text("UPDATE job_queue SET labels = :labels WHERE job_id = :job_id"), labels
        )
    bind.execute(
        sa.text(
            "INSERT INTO job_queue_counts (repository_id, labels, queued) "
            "SELECT repository_id, labels, count(*) FROM job_queue GROUP BY repository_id, labels"
        )
    )


def downgrade() -> None:
    op.drop_table("job_queue_counts")
    op.drop_index("ix_job_queue_repository_id_labels", table_name="job_queue")
    op.drop_table("job_queue")
