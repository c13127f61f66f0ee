"""Use cases for users and their SSH keys."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forge_ci.authz import Actor
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.models import SshKey, User
from forge_ci.names import check_user_name
from forge_ci.passwords import hash_password, verify_password
from forge_ci.sshkeys import parse_public_key, sha256_fingerprint


def _require_site_admin(actor: Actor, what: str) -> None:
    if not actor.is_site_admin:
        raise PermissionDenied(f"only site administrators may {what}")


def get_user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFound(f"unknown user {name!r}")
    return user


def create_user(
    session: Session,
    actor: Actor,
    name: str,
    password: str | None,
    *,
    is_admin: bool = False,
) -> User:
    """Create a user. ``password`` None makes an SSH-only account that cannot log in."""
    _require_site_admin(actor, "create users")
    check_user_name(name)
    if session.scalar(select(User.id).where(User.name == name)) is not None:
        raise Conflict(f"user {name!r} already exists")
    user = User(
        name=name,
        password_hash=hash_password(password) if password is not None else None,
        is_admin=is_admin,
    )
    session.add(user)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(f"user {name!r} already exists") from None
    return user


def list_users(session: Session, actor: Actor) -> list[User]:
    _require_site_admin(actor, "list users")
    return list(session.scalars(select(User).order_by(User.name)))


def user_rows(session: Session, actor: Actor) -> list[dict[str, object]]:
    """``user list --json`` (operator CLI and SSH alike): site administrators only."""
    return [
        {
            "name": u.name,
            "admin": u.is_admin,
            "active": u.is_active,
            "keys": len(u.keys),
            "created_at": u.created_at.isoformat(),
        }
        for u in list_users(session, actor)
    ]


def authenticate_password(session: Session, name: str, password: str) -> User | None:
    """The active user with this name and password, or None (never says which part was wrong)."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None or not user.is_active or not user.password_hash:
        # Spend the same time as a real check so that names (and SSH-only accounts, which have
        # no password) cannot be probed by timing.
        verify_password(_DUMMY_HASH.value, password)
        return None
    return user if verify_password(user.password_hash, password) else None


class _DummyHash:
    """A hash computed on first use, so that importing this module costs nothing."""

    _value: str | None = None

    @property
    def value(self) -> str:
        if self._value is None:
            self._value = hash_password("dummy-password-for-timing")
        return self._value


_DUMMY_HASH = _DummyHash()


@dataclass(frozen=True)
class KeyInfo:
    id: int
    user: str
    fingerprint: str
    key_type: str
    bits: int
    comment: str

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "user": self.user,
            "fingerprint": self.fingerprint,
            "type": self.key_type,
            "bits": self.bits,
            "comment": self.comment,
        }


def _info(key: SshKey) -> KeyInfo:
    return KeyInfo(key.id, key.user.name, key.fingerprint, key.key_type, key.bits, key.comment)


def add_key(session: Session, actor: Actor, user_name: str, key_text: str) -> KeyInfo:
    """Attach a public key to a user. A key belongs to exactly one user."""
    user = get_user(session, user_name)
    if not (actor.is_site_admin or actor.user_id == user.id):
        raise PermissionDenied("you may only add keys to your own account")
    key = parse_public_key(key_text)
    existing = session.scalar(select(SshKey).where(SshKey.fingerprint == key.fingerprint))
    if existing is not None:
        owner = "this user" if existing.user_id == user.id else "another user"
        raise Conflict(f"key {key.fingerprint} is already registered to {owner}")
    row = SshKey(
        user=user,
        fingerprint=key.fingerprint,
        key_type=key.key_type,
        bits=key.bits,
        public_key=key.openssh,
        comment=key.comment,
    )
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(f"key {key.fingerprint} is already registered") from None
    return _info(row)


def list_keys(session: Session, actor: Actor, user_name: str | None = None) -> list[KeyInfo]:
    query = select(SshKey).join(SshKey.user).order_by(User.name, SshKey.id)
    if user_name is not None:
        user = get_user(session, user_name)
        if not (actor.is_site_admin or actor.user_id == user.id):
            raise PermissionDenied("you may only list your own keys")
        query = query.where(SshKey.user_id == user.id)
    else:
        _require_site_admin(actor, "list every user's keys")
    return [_info(k) for k in session.scalars(query)]


def remove_key(
    session: Session, actor: Actor, fingerprint_or_id: str, *, in_use: str | None = None
) -> KeyInfo:
    """Remove a key named by its SHA256 fingerprint or its numeric id.

    ``in_use``: the fingerprint of the key the caller authenticated with (SSH), which is
    refused: removing it would lock the caller out mid-connection, by mistake more often than not.
    """
    if fingerprint_or_id.isdigit():
        key = session.get(SshKey, int(fingerprint_or_id))
    elif fingerprint_or_id.startswith("SHA256:"):
        key = session.scalar(select(SshKey).where(SshKey.fingerprint == fingerprint_or_id))
    else:
        raise InvalidInput("name the key by its id or its SHA256:... fingerprint")
    if key is None or not (actor.is_site_admin or actor.user_id == key.user_id):
        raise NotFound(f"no key {fingerprint_or_id}")
    if in_use is not None and key.fingerprint == in_use:
        raise Conflict(
            f"key {key.fingerprint} is the one this connection uses; connect with another of "
            "your keys to remove it"
        )
    info = _info(key)
    session.delete(key)
    session.flush()
    return info


def user_for_key_blob(session: Session, blob: bytes) -> User | None:
    """The active user owning the key with this wire-format blob (SSH authentication)."""
    fingerprint = sha256_fingerprint(blob)
    key = session.scalar(select(SshKey).where(SshKey.fingerprint == fingerprint))
    if key is None or not key.user.is_active:
        return None
    return key.user
