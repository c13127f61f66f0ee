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
    #: Whether ``on: schedule`` workflows of the default branch run (off by default).
    scheduled_workflows_enabled: Mapped[bool] = mapped_column(default=False)
    scheduled_workflows_enabled_at: Mapped[datetime | None]
    #: Who switched them on: scheduled runs are requested by this person, whose role is
    #: rechecked at every run (None once the user is deleted: then nothing runs).
    scheduled_workflows_requester_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: Set by ``forge-ci repo mirror``: the URL it mirrors. An operator's mirror is an action
    #: every run creator may use (``uses: OWNER/NAME@REF``); other repositories need read access.
    mirror_url: Mapped[str | None] = mapped_column(Text)

    owner: Mapped[User] = relationship(foreign_keys=[owner_id])
    scheduled_workflows_requester: Mapped[User | None] = relationship(
        foreign_keys=[scheduled_workflows_requester_id]
    )
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
