"""Repository secrets and variables, and the audit trail of their changes.

::

    repositories 1──* repository_secrets     sealed value (NULL once deleted), scope, version
                 1──* repository_variables   plain value (NULL once deleted), optional scope
                 1──* settings_audit         who changed which name when, at which version

A deleted secret or variable keeps its row (a *tombstone*: no value, ``deleted_at`` set) so
that its version survives deletion and re-creation: a stale form that still holds the version
of the deleted secret cannot overwrite its replacement. Audit rows never hold a value.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from forge_ci.models.base import Base, utcnow


class RepositorySecret(Base):
    """One named secret of a repository, sealed with the server's key file (see secrets.sealing)."""

    __tablename__ = "repository_secrets"
    __table_args__ = (
        UniqueConstraint("repository_id", "name", name="uq_repository_secrets_repository_id_name"),
        CheckConstraint("(deleted_at IS NULL) = (sealed IS NOT NULL)", name="value_iff_live"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    #: Uppercase, at most 100 ASCII letters, digits and underscores.
    name: Mapped[str] = mapped_column(String(100))
    #: Key id, nonce and AES-GCM ciphertext; NULL once deleted.
    sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    #: The one branch and the one workflow file allowed to use it.
    branch: Mapped[str] = mapped_column(String(255))
    workflow_path: Mapped[str] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by_name: Mapped[str] = mapped_column(String(40))
    deleted_at: Mapped[datetime | None]


class RepositoryVariable(Base):
    """One named variable (``vars.NAME``): not secret, repository-wide unless scoped."""

    __tablename__ = "repository_variables"
    __table_args__ = (
        UniqueConstraint(
            "repository_id", "name", name="uq_repository_variables_repository_id_name"
        ),
        CheckConstraint("(deleted_at IS NULL) = (value IS NOT NULL)", name="value_iff_live"),
        CheckConstraint("(branch IS NULL) = (workflow_path IS NULL)", name="scope_whole"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    value: Mapped[str | None] = mapped_column(Text)
    #: NULL (both): every branch and workflow; else only this branch and workflow file.
    branch: Mapped[str | None] = mapped_column(String(255))
    workflow_path: Mapped[str | None] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by_name: Mapped[str] = mapped_column(String(40))
    deleted_at: Mapped[datetime | None]


class SettingsAudit(Base):
    """One change of a secret or variable: who, what, when, which version. Never a value."""

    __tablename__ = "settings_audit"
    __table_args__ = (
        CheckConstraint("kind IN ('secret', 'variable')", name="kind"),
        CheckConstraint("action IN ('create', 'update', 'delete', 'reseal')", name="action"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(16))
    #: The version after the change.
    version: Mapped[int] = mapped_column(BigInteger)
    #: The scope after the change, as text ("main .github/workflows/x.yml", "" = everywhere).
    scope: Mapped[str] = mapped_column(Text, default="")
    #: Whether the value changed (an update may change the scope only).
    value_changed: Mapped[bool] = mapped_column(default=False)
    actor_name: Mapped[str] = mapped_column(String(40))
    at: Mapped[datetime] = mapped_column(default=utcnow)
