"""Browser sign-ins: revocable server-side sessions and the login throttle (issue #14, 7 and 8).

**Sessions.** Signing in opens a :class:`~forge_ci.models.WebSession`; the cookie carries its
random token, the database only the token's SHA-256. Logout revokes it, so a copied cookie is
worthless afterwards; :func:`revoke_user_sessions` signs a person out everywhere.

**Throttle.** Failed sign-ins are counted per account name and per source address. The first
few of each are free; after that each failure blocks the key for twice as long as the last one
(1 s, 2 s, 4 s ... at most 15 minutes), and while a key is blocked the password is not even
checked, so guessing gets no answer at all. Failures are forgotten a day after the last one; a
successful sign-in forgets the account's (not the address's).

    failures:  1 .. free      free+1   free+2   free+3  ...   free+10 and on
    blocked:   0              1 s      2 s      4 s           15 min (the cap)
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from sqlalchemy import ColumnElement, Select, and_, bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forge_ci.authz import Actor
from forge_ci.errors import PermissionDenied
from forge_ci.models import LoginThrottle, User, WebSession, utcnow

FREE_ACCOUNT_FAILURES = 5
FREE_ADDRESS_FAILURES = 20
MAX_BLOCK = timedelta(minutes=15)
FORGET_AFTER = timedelta(days=1)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def session_token_hash(token: str) -> str:
    """What the database keeps of a session's token (:attr:`WebSession.token_hash`)."""
    return _digest(token)


def live_session() -> ColumnElement[bool]:
    """The session of ``:token_hash`` while it is live (not revoked, not expired at ``:now``)."""
    return and_(
        WebSession.token_hash == bindparam("token_hash"),
        WebSession.revoked_at.is_(None),
        WebSession.expires_at > bindparam("now"),
    )


# -- sessions ---------------------------------------------------------------------------------


def open_session(session: Session, user: User, lifetime: timedelta) -> str:
    """Start a signed-in session for ``user``; returns the token for the cookie (not stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        WebSession(
            token_hash=_digest(token), user_id=user.id, created_at=now, expires_at=now + lifetime
        )
    )
    session.flush()
    return token


@dataclass(frozen=True)
class SessionUser:
    """What a request needs of a signed-in user, read as a plain row (no ORM object)."""

    id: int
    name: str
    is_admin: bool
    is_active: bool
    password_hash: str | None


def session_user(session: Session, token: str) -> SessionUser | None:
    """The user of a live (not revoked, not expired) session, or None (one Core statement on
    the session's connection: every page view and every poll of a run page asks, and an ORM
    object cost a third of an unchanged poll)."""
    row = (
        session.connection()
        .execute(_session_user_statement(), {"token_hash": _digest(token), "now": utcnow()})
        .first()
    )
    if row is None:
        return None
    return SessionUser(row[0], row[1], bool(row[2]), bool(row[3]), row[4])


@cache
def _session_user_statement() -> Select[int, str, bool, bool, str | None]:
    """Built once: building it costs more than running it, many times a second."""
    return (
        select(User.id, User.name, User.is_admin, User.is_active, User.password_hash)
        .join(WebSession, WebSession.user_id == User.id)
        .where(live_session())
    )


def revoke_session(session: Session, token: str) -> None:
    """End one session (logout); unknown or ended sessions are left as they are."""
    session.execute(
        update(WebSession)
        .where(WebSession.token_hash == _digest(token), WebSession.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )


def revoke_user_sessions(session: Session, actor: Actor, user_id: int) -> int:
    """Sign ``user_id`` out everywhere (themself, or a site administrator); returns how many."""
    if not (actor.is_site_admin or actor.user_id == user_id):
        raise PermissionDenied("only site administrators may sign other people out")
    result = session.execute(
        update(WebSession)
        .where(WebSession.user_id == user_id, WebSession.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


# -- throttle ---------------------------------------------------------------------------------


def throttle_keys(name: str, address: str | None) -> dict[str, int]:
    """The keys a sign-in attempt counts against, each with its free failures."""
    keys = {f"account:{name.strip().lower()[:100]}": FREE_ACCOUNT_FAILURES}
    if address:
        keys[f"address:{address[:100]}"] = FREE_ADDRESS_FAILURES
    return keys


def blocked_for(session: Session, keys: dict[str, int], now: datetime | None = None) -> float:
    """Seconds until an attempt counted against ``keys`` may be checked (0: now)."""
    now = now or utcnow()
    rows = session.scalars(select(LoginThrottle).where(LoginThrottle.key.in_(list(keys))))
    waits = [
        (row.blocked_until - now).total_seconds()
        for row in rows
        if row.blocked_until is not None and row.last_failure_at + FORGET_AFTER > now
    ]
    return max([0.0, *waits])


def record_failure(session: Session, keys: dict[str, int], now: datetime | None = None) -> None:
    """Count one failed sign-in against every key (in the caller's write transaction)."""
    now = now or utcnow()
    for key, free in keys.items():
        row = _throttle_row(session, key, now)
        if row.last_failure_at + FORGET_AFTER <= now:
            row.failures = 0
        row.failures += 1
        row.last_failure_at = now
        beyond = row.failures - free
        if beyond > 0:
            block = min(timedelta(seconds=2 ** min(beyond - 1, 20)), MAX_BLOCK)
            row.blocked_until = now + block
    session.flush()


def record_success(session: Session, keys: dict[str, int]) -> None:
    """A sign-in succeeded: forget the account's failures (the address keeps its count)."""
    for key in keys:
        if key.startswith("account:"):
            row = session.get(LoginThrottle, key)
            if row is not None:
                session.delete(row)
    session.flush()


def _throttle_row(session: Session, key: str, now: datetime) -> LoginThrottle:
    row = session.get(LoginThrottle, key)
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = LoginThrottle(key=key, failures=0, last_failure_at=now, blocked_until=None)
            session.add(row)
        return row
    except IntegrityError:  # a concurrent first failure for the same key
        row = session.get(LoginThrottle, key)
        assert row is not None
        return row
