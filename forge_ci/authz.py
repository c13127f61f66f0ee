"""Who may do what: actors, repository roles and the checks use cases call.

Roles are ordered ``read < write < admin < owner``. A repository the actor cannot read does not
exist for them: lookups raise NotFound, never PermissionDenied, so names do not leak.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.errors import InvalidInput, NotFound, PermissionDenied
from forge_ci.models import Membership, Repository, User


class Role(enum.IntEnum):
    """A repository role; comparisons follow the privilege order."""

    READ = 1
    WRITE = 2
    ADMIN = 3
    OWNER = 4

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.upper()]
        except KeyError:
            raise InvalidInput(
                f"invalid role {text!r}: use one of read, write, admin, owner"
            ) from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Actor:
    """Who is asking. ``user_id`` None with ``is_operator`` is the local operator CLI."""

    user_id: int | None
    name: str
    is_admin: bool = False
    is_operator: bool = False

    @classmethod
    def operator(cls) -> Actor:
        """The person at the server's console: trusted like a site administrator."""
        return cls(user_id=None, name="operator", is_admin=True, is_operator=True)

    @classmethod
    def anonymous(cls) -> Actor:
        return cls(user_id=None, name="anonymous")

    @classmethod
    def for_user(cls, user: UserFacts) -> Actor:
        return cls(user_id=user.id, name=user.name, is_admin=user.is_admin)

    @property
    def is_site_admin(self) -> bool:
        return self.is_admin or self.is_operator


class UserFacts(Protocol):
    """What :func:`actor_as_now` reads of a user row (a :class:`User`, or a lighter row)."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def is_admin(self) -> bool: ...
    @property
    def is_active(self) -> bool: ...


class Owned(Protocol):
    """What :func:`effective_role` reads of a repository (a :class:`Repository`, or a row)."""

    @property
    def owner_id(self) -> int: ...


def actor_as_now(user: UserFacts | None) -> Actor:
    """The actor of a user row as read now: a missing or deactivated user has no rights."""
    if user is None or not user.is_active:
        return Actor.anonymous()
    return Actor(user_id=user.id, name=user.name, is_admin=user.is_admin)


def current_actor(session: Session, actor: Actor) -> Actor:
    """Re-read the actor's user row: deactivated users have no rights, demoted admins lose them."""
    if actor.is_operator or actor.user_id is None:
        return actor
    return actor_as_now(session.get(User, actor.user_id))


def role_in(session: Session, actor: Actor, repository: Repository) -> Role | None:
    """The actor's effective role in ``repository`` right now (None: no access)."""
    actor = current_actor(session, actor)
    membership = None
    if actor.user_id is not None and not actor.is_site_admin:
        membership = session.scalar(
            select(Membership.role).where(
                Membership.repository_id == repository.id, Membership.user_id == actor.user_id
            )
        )
    return effective_role(actor, repository, membership)


def effective_role(actor: Actor, repository: Owned, membership: str | None) -> Role | None:
    """The role of a current actor (:func:`current_actor`) with ``membership`` (its role
    column in ``repository``, if any); for callers that read the membership themselves."""
    if actor.is_site_admin:
        return Role.OWNER
    if actor.user_id is None:
        return None
    if repository.owner_id == actor.user_id:
        return Role.OWNER
    return Role.parse(membership) if membership else None


def require_role(session: Session, actor: Actor, repository: Repository, needed: Role) -> Role:
    """Raise unless the actor has at least ``needed``; NotFound when they cannot even read."""
    return checked_role(role_in(session, actor, repository), repository, needed)


def checked_role(role: Role | None, repository: Repository, needed: Role) -> Role:
    """``role`` if it is at least ``needed``; NotFound for no role, else PermissionDenied."""
    if role is None:
        raise NotFound(f"repository {repository.full_name} not found")
    if role < needed:
        raise PermissionDenied(
            f"{needed.label} access to {repository.full_name} is required; you have {role.label}"
        )
    return role
