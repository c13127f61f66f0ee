"""Repositories and who may do what in them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.accounts import User
from forge_ci.models.base import Base, utcnow


class Repository(Base):
    """A bare git repository ``owner/name`` under the data directory."""

    __tablename__ = "repositories"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    default_branch: Mapped[str] = mapped_column(String(255), default="main")
    push_workflows_enabled: Mapped[bool] = mapped_column(default=False)
    #: When push workflows were last switched on: events recorded earlier never start runs
    #: (enabling does not replay older pushes).
    push_workflows_enabled_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: Set by ``forge-ci repo mirror``: the URL it mirrors. An operator's mirror is an action
    #: every run creator may use (``uses: OWNER/NAME@REF``); other repositories need read access.
    mirror_url: Mapped[str | None] = mapped_column(Text)

    owner: Mapped[User] = relationship()
    memberships: Mapped[list[Membership]] = relationship(
        back_populates="repository", cascade="all, delete-orphan"
    )

    @property
    def full_name(self) -> str:
        return f"{self.owner.name}/{self.name}"


class Membership(Base):
    """A user's role in a repository: read < write < admin < owner."""

    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("repository_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    repository: Mapped[Repository] = relationship(back_populates="memberships")
    user: Mapped[User] = relationship()
