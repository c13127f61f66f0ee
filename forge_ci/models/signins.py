"""Browser sign-ins: server-side sessions and the login throttle (issue #14, findings 7 and 8)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from forge_ci.models.base import Base, utcnow


class WebSession(Base):
    """One signed-in browser. The cookie carries a random token; only its SHA-256 is stored.

    A session is valid while it is not revoked and not expired (and its user is active with the
    password it signed in with: web/auth.py checks that binding too).
    """

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class LoginThrottle(Base):
    """Failed sign-ins counted for one key: ``account:<name>`` or ``address:<ip>``."""

    __tablename__ = "login_throttles"

    key: Mapped[str] = mapped_column(String(120), primary_key=True)
    failures: Mapped[int] = mapped_column(default=0)
    last_failure_at: Mapped[datetime] = mapped_column(default=utcnow)
    blocked_until: Mapped[datetime | None]
