"""Providers: the machines (a Docker host, a standalone runner) that claim and execute jobs.

::

    providers 1──* provider_repositories *──1 repositories     (scope "selected" only)
        │
        1──* attempts                                           (forge_ci.models.attempts)

A provider authenticates with a long-lived credential of which only the SHA-256 is stored.
``state`` is administrative (active, paused, revoked); ``last_contact_at`` is connectivity.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.base import Base, utcnow
from forge_ci.models.repositories import Repository

PROVIDER_STATES = ("active", "paused", "revoked")
PROVIDER_SCOPES = ("selected", "all")


class Provider(Base):
    """A registered provider with its labels and repository scope."""

    __tablename__ = "providers"
    __table_args__ = (
        CheckConstraint("state IN ('active', 'paused', 'revoked')", name="state"),
        CheckConstraint("scope IN ('all', 'selected')", name="scope"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    #: SHA-256 (hex) of the 64-hex-character credential; the credential itself is never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: Normalized labels joined by commas (lowercase, unique, sorted).
    labels: Mapped[str] = mapped_column(String(600))
    scope: Mapped[str] = mapped_column(String(16), default="selected")
    state: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: The last claim or lease renewal by this provider or one of its attempts.
    last_contact_at: Mapped[datetime | None]
    #: The egress policy the provider last reported with a claim (its own settings), or None.
    egress_policy: Mapped[str | None] = mapped_column(String(1000))

    grants: Mapped[list[ProviderGrant]] = relationship(
        back_populates="provider", cascade="all, delete-orphan"
    )

    @property
    def label_set(self) -> frozenset[str]:
        return frozenset(self.labels.split(",")) if self.labels else frozenset()


class ProviderGrant(Base):
    """A repository a provider with scope ``selected`` may run jobs for."""

    __tablename__ = "provider_repositories"
    __table_args__ = (
        UniqueConstraint(
            "provider_id",
            "repository_id",
            name="uq_provider_repositories_provider_id_repository_id",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Indexed by the unique (provider_id, repository_id) constraint.
    provider_id: Mapped[int] = mapped_column(ForeignKey("providers.id", ondelete="CASCADE"))
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    provider: Mapped[Provider] = relationship(back_populates="grants")
    repository: Mapped[Repository] = relationship()
