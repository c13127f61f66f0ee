"""People and their SSH keys."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.base import Base, utcnow


class User(Base):
    """A person who logs in to the web UI and pushes over SSH."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(200))
    is_admin: Mapped[bool] = mapped_column(default=False)
    is_active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    keys: Mapped[list[SshKey]] = relationship(
        back_populates="user", cascade="all, delete-orphan", order_by="SshKey.id"
    )


class SshKey(Base):
    """An SSH public key; the key (never the login name) identifies the pusher."""

    __tablename__ = "ssh_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # "SHA256:<base64 without padding>", as ssh-keygen -l prints it; unique across users.
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    key_type: Mapped[str] = mapped_column(String(40))
    bits: Mapped[int]
    # The canonical "type base64" form, without the comment.
    public_key: Mapped[str] = mapped_column(Text)
    comment: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    user: Mapped[User] = relationship(back_populates="keys")
