"""repository secrets and variables, and the audit of their changes

Revision ID: 0006_secrets
Revises: 0005_log_carry_ending

Secret values are stored sealed (AES-GCM under the key file ``secrets.key`` of the data
directory, never in the database); deleted names keep a row without a value so that their
version survives re-creation. Audit rows hold no values.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from forge_ci.models.base import UTCDateTime

revision = "0006_secrets"
down_revision = "0006_security"
branch_labels = None
depends_on = None


def _common() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_by_name", sa.String(length=40), nullable=False),
        sa.Column("deleted_at", UTCDateTime(timezone=True), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "repository_secrets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("workflow_path", sa.String(length=255), nullable=False),
        *_common(),
        sa.CheckConstraint(
            "(deleted_at IS NULL) = (sealed IS NOT NULL)",
            name=op.f("ck_repository_secrets_value_iff_live"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_repository_secrets_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repository_secrets")),
        sa.UniqueConstraint(
            "repository_id", "name", name="uq_repository_secrets_repository_id_name"
        ),
    )
    with op.batch_alter_table("repository_secrets", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_repository_secrets_repository_id"), ["repository_id"], unique=False
        )
    op.create_table(
        "repository_variables",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("workflow_path", sa.String(length=255), nullable=True),
        *_common(),
        sa.CheckConstraint(
            "(deleted_at IS NULL) = (value IS NOT NULL)",
            name=op.f("ck_repository_variables_value_iff_live"),
        ),
        sa.CheckConstraint(
            "(branch IS NULL) = (workflow_path IS NULL)",
            name=op.f("ck_repository_variables_scope_whole"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_repository_variables_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repository_variables")),
        sa.UniqueConstraint(
            "repository_id", "name", name="uq_repository_variables_repository_id_name"
        ),
    )
    with op.batch_alter_table("repository_variables", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_repository_variables_repository_id"), ["repository_id"], unique=False
        )
    op.create_table(
        "settings_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("value_changed", sa.Boolean(), nullable=False),
        sa.Column("actor_name", sa.String(length=40), nullable=False),
        sa.Column("at", UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('secret', 'variable')", name=op.f("ck_settings_audit_kind")),
        sa.CheckConstraint(
            "action IN ('create', 'update', 'delete', 'reseal')",
            name=op.f("ck_settings_audit_action"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repositories.id"],
            name=op.f("fk_settings_audit_repository_id_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_settings_audit")),
    )
    with op.batch_alter_table("settings_audit", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_settings_audit_repository_id"), ["repository_id"], unique=False
        )


def downgrade() -> None:
    op.drop_table("settings_audit")
    op.drop_table("repository_variables")
    op.drop_table("repository_secrets")
