"""runner protocol: providers, attempts and their steps, issued secrets, logs and carry-over

Revision ID: 0004_runner_protocol
Revises: 0003_runs

Credentials are stored as SHA-256 hashes only; issued secret values and withheld log tails are
sealed under keys derived from attempt credentials (forge_ci.masking), which are not stored.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import forge_ci.models.base

COMPLETED_HAS_CONCLUSION = (
    "(state = 'completed' AND conclusion IS NOT NULL) "
    "OR (state <> 'completed' AND conclusion IS NULL)"
)

revision = "0004_runner_protocol"
down_revision = "0003_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "providers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.String(length=600), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column(
            "last_contact_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.CheckConstraint("scope IN ('all', 'selected')", name=op.f("ck_providers_scope")),
        sa.CheckConstraint(
            "state IN ('active', 'paused', 'revoked')", name=op.f("ck_providers_state")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_providers")),
        sa.UniqueConstraint("name", name=op.f("uq_providers_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_providers_token_hash")),
    )
    op.create_table(
        "provider_repositories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_provider_repositories_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_provider_repositories_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provider_repositories")),
        sa.UniqueConstraint(
            "provider_id",
            "repository_id",
            name="uq_provider_repositories_provider_id_repository_id",
        ),
    )
    with op.batch_alter_table("provider_repositories", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_provider_repositories_repository_id"), ["repository_id"], unique=False
        )

    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("execution_id", sa.String(length=32), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("conclusion", sa.String(length=16), nullable=True),
        sa.Column("reported_conclusion", sa.String(length=16), nullable=True),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("completion_digest", sa.String(length=64), nullable=True),
        sa.Column("timeout_minutes", sa.Integer(), nullable=False),
        sa.Column("claimed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column(
            "lease_expires_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("started_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column(
            "job_deadline_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("completed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("next_check_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column(
            "cancel_requested_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column(
            "cancel_deadline_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("cancel_reason", sa.Text(), nullable=True),
        sa.Column("cancelled_by_provider_change", sa.Boolean(), nullable=False),
        sa.Column("acknowledged_sequence", sa.Integer(), nullable=False),
        sa.Column("log_bytes", sa.BigInteger(), nullable=False),
        sa.Column("log_limit_reached", sa.Boolean(), nullable=False),
        sa.Column("log_records", sa.Integer(), nullable=False),
        sa.Column("log_mask", sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            COMPLETED_HAS_CONCLUSION,
            name=op.f("ck_attempts_conclusion_iff_completed"),
        ),
        sa.CheckConstraint(
            "conclusion IS NULL OR "
            "conclusion IN ('cancelled', 'failure', 'lost', 'success', 'timed_out')",
            name=op.f("ck_attempts_conclusion"),
        ),
        sa.CheckConstraint(
            "state IN ('completed', 'leased', 'running')", name=op.f("ck_attempts_state")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_attempts_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_attempts_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_attempts_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("job_id", "number", name="uq_attempts_job_id_number"),
        sa.UniqueConstraint("provider_id", "request_id", name="uq_attempts_provider_id_request_id"),
        sa.UniqueConstraint("token_hash", name=op.f("uq_attempts_token_hash")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attempts_repository_id_claimed_at", ["repository_id", "claimed_at"], unique=False
        )
        batch_op.create_index(
            "ix_attempts_state_next_check_at", ["state", "next_check_at"], unique=False
        )

    op.create_table(
        "attempt_secrets",
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_attempt_secrets_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attempt_id", "step_id", "name", name=op.f("pk_attempt_secrets")),
    )
    op.create_table(
        "attempt_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=100), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("conclusion", sa.String(length=16), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("continue_on_error", sa.Boolean(), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("started_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            COMPLETED_HAS_CONCLUSION,
            name=op.f("ck_attempt_steps_conclusion_iff_completed"),
        ),
        sa.CheckConstraint(
            "conclusion IS NULL OR "
            "conclusion IN ('cancelled', 'failure', 'skipped', 'success', 'timed_out')",
            name=op.f("ck_attempt_steps_conclusion"),
        ),
        sa.CheckConstraint(
            "state IN ('completed', 'pending', 'running')", name=op.f("ck_attempt_steps_state")
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_attempt_steps_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempt_steps")),
        sa.UniqueConstraint("attempt_id", "position", name="uq_attempt_steps_attempt_id_position"),
        sa.UniqueConstraint("attempt_id", "step_id", name="uq_attempt_steps_attempt_id_step_id"),
    )
    op.create_table(
        "log_carries",
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=100), nullable=False),
        sa.Column("stream", sa.String(length=8), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_log_carries_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attempt_id", "step_id", "stream", name=op.f("pk_log_carries")),
    )
    op.create_table(
        "log_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=True),
        sa.Column("step_id", sa.String(length=100), nullable=False),
        sa.Column("stream", sa.String(length=8), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("created_at", forge_ci.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_log_records_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_records")),
        sa.UniqueConstraint("attempt_id", "position", name="uq_log_records_attempt_id_position"),
        sa.UniqueConstraint("attempt_id", "sequence", name="uq_log_records_attempt_id_sequence"),
    )


def downgrade() -> None:
    op.drop_table("log_records")
    op.drop_table("log_carries")
    op.drop_table("attempt_steps")
    op.drop_table("attempt_secrets")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_state_next_check_at")
        batch_op.drop_index("ix_attempts_repository_id_claimed_at")

    op.drop_table("attempts")
    with op.batch_alter_table("provider_repositories", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_provider_repositories_repository_id"))

    op.drop_table("provider_repositories")
    op.drop_table("providers")
