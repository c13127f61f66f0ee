"""Use cases for repositories and memberships."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import cache

from sqlalchemy import Select, and_, bindparam, or_, select
from sqlalchemy.orm import Session, aliased

from forge_ci.accounts import get_user
from forge_ci.authz import (
    Actor,
    Role,
    checked_role,
    effective_role,
    role_in,
)
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.gitstore import init_bare, repository_path
from forge_ci.models import Membership, Repository, User, utcnow
from forge_ci.names import split_full_name
from forge_ci.settings import Settings


def find_repository(session: Session, actor: Actor, full_name: str, needed: Role) -> Repository:
    """The repository ``owner/name`` if the actor has ``needed``.

    Unknown and unreadable repositories both raise the same NotFound.
    """
    return repository_access(session, actor, full_name, needed).repository


@dataclass(frozen=True)
class RepositoryAccess:
    """A repository and the actor's role in it, established by one lookup.

    Made by :func:`repository_access`, which checked the role asked for. A page that calls several
    use cases of one repository looks it up once and hands this to the ``..._in`` variants,
    which check the role they need against :attr:`role` instead of querying again.
    """

    actor: Actor
    repository: Repository
    #: The actor's effective role when the lookup was made (at least the one checked).
    role: Role

    def require(self, needed: Role) -> Repository:
        """The repository, or PermissionDenied (as :func:`require_role`) below ``needed``."""
        if self.role < needed:
            raise PermissionDenied(
                f"{needed.label} access to {self.repository.full_name} is required; "
                f"you have {self.role.label}"
            )
        return self.repository


def repository_access(
    session: Session, actor: Actor, full_name: str, needed: Role = Role.READ
) -> RepositoryAccess:
    """Look ``owner/name`` up and check ``needed`` (NotFound when the actor cannot read it)."""
    try:
        owner, name = split_full_name(full_name)
    except InvalidInput:
        raise NotFound(f"repository {full_name} not found") from None
    # One statement for the repository, the actor's membership in it and the actor's user row
    # as it is now (deactivated users have no rights, demoted administrators lose them, as
    # :func:`forge_ci.authz.current_actor` says): every page view and every poll of a run page
    # comes through here.
    user_id = None if actor.is_operator else actor.user_id
    row = session.execute(
        _access_statement(), {"owner": owner, "name": name, "user_id": user_id}
    ).first()
    if row is None:
        raise NotFound(f"repository {full_name} not found")
    repo, membership, user_name, active, admin = row
    current = actor
    if user_id is not None:
        current = (
            Actor(user_id=user_id, name=user_name, is_admin=bool(admin))
            if active
            else Actor.anonymous()
        )
    role = checked_role(effective_role(current, repo, membership), repo, needed)
    return RepositoryAccess(actor, repo, role)


@cache
def _access_statement() -> Select[Repository, str, str, bool, bool]:
    """Built once: building it costs more than running it, and it runs on every request."""
    _actor = aliased(User)  # the acting user, re-read with the repository (``User`` is the owner)
    return (
        select(Repository, Membership.role, _actor.name, _actor.is_active, _actor.is_admin)
        .join(Repository.owner)
        .outerjoin(
            Membership,
            and_(
                Membership.repository_id == Repository.id,
                Membership.user_id == bindparam("user_id"),
            ),
        )
        .outerjoin(_actor, _actor.id == bindparam("user_id"))
        .where(User.name == bindparam("owner"), Repository.name == bindparam("name"))
    )


def create_repository(
    session: Session, settings: Settings, actor: Actor, full_name: str, default_branch: str = "main"
) -> Repository:
    """Create ``owner/name`` in the database and as a bare repository on disk.

    The bare repository is created before the row is flushed; if the database refuses the row,
    the directory is removed again, so no half-created repository remains.
    """
    owner_name, name = split_full_name(full_name)
    owner = get_user(session, owner_name)
    if not (actor.is_site_admin or actor.user_id == owner.id):
        raise PermissionDenied("you may only create repositories under your own name")
    exists = session.scalar(
        select(Repository.id).where(Repository.owner_id == owner.id, Repository.name == name)
    )
    if exists is not None:
        raise Conflict(f"repository {full_name} already exists")
    path = repository_path(settings.repositories_dir, owner_name, name)
    if path.exists():
        raise Conflict(f"repository {full_name} already exists on disk; remove it or choose a name")
    init_bare(path, settings.hooks_dir, default_branch)
    try:
        repo = Repository(owner=owner, name=name, default_branch=default_branch)
        session.add(repo)
        session.flush()
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return repo


@dataclass(frozen=True)
class RepositoryInfo:
    full_name: str
    default_branch: str
    push_workflows: bool
    role: str
    scheduled_workflows: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.full_name,
            "default_branch": self.default_branch,
            "push_workflows": self.push_workflows,
            "scheduled_workflows": self.scheduled_workflows,
            "role": self.role,
        }

    def text_lines(self) -> list[str]:
        """``repo show``'s text, for the operator CLI and the SSH-side commands alike."""
        return [
            f"repository:          {self.full_name}",
            f"default branch:      {self.default_branch}",
            f"role:                {self.role}",
            f"push workflows:      {'on' if self.push_workflows else 'off'}",
            f"scheduled workflows: {'on' if self.scheduled_workflows else 'off'}",
        ]


def list_repositories(session: Session, actor: Actor) -> list[RepositoryInfo]:
    """Repositories the actor can read, by name."""
    query = select(Repository).join(Repository.owner).order_by(User.name, Repository.name)
    if not actor.is_site_admin:
        if actor.user_id is None:
            return []
        member_of = select(Membership.repository_id).where(Membership.user_id == actor.user_id)
        query = query.where(or_(Repository.owner_id == actor.user_id, Repository.id.in_(member_of)))
    result = []
    for repo in session.scalars(query):
        role = role_in(session, actor, repo)
        if role is not None:
            result.append(_repository_info(repo, role))
    return result


def show_repository(session: Session, actor: Actor, full_name: str) -> RepositoryInfo:
    """One repository as :func:`list_repositories` lists it (readers; others: NotFound)."""
    access = repository_access(session, actor, full_name, Role.READ)
    return _repository_info(access.repository, access.role)


def _repository_info(repo: Repository, role: Role) -> RepositoryInfo:
    return RepositoryInfo(
        repo.full_name,
        repo.default_branch,
        repo.push_workflows_enabled,
        role.label,
        repo.scheduled_workflows_enabled,
    )


def grant(session: Session, actor: Actor, full_name: str, user_name: str, role: Role) -> Membership:
    """Give ``user_name`` ``role`` in the repository (replacing any earlier role)."""
    repo = find_repository(session, actor, full_name, Role.ADMIN)
    user = get_user(session, user_name)
    if role == Role.OWNER:
        raise InvalidInput("the owner role belongs to the repository's owner; grant admin instead")
    if user.id == repo.owner_id:
        raise Conflict(f"{user_name} owns {full_name}; the owner's role cannot change")
    membership = session.scalar(
        select(Membership).where(Membership.repository_id == repo.id, Membership.user_id == user.id)
    )
    if membership is None:
        membership = Membership(repository=repo, user=user, role=role.label)
        session.add(membership)
    else:
        membership.role = role.label
    session.flush()
    return membership


def revoke(session: Session, actor: Actor, full_name: str, user_name: str) -> None:
    repo = find_repository(session, actor, full_name, Role.ADMIN)
    user = get_user(session, user_name)
    membership = session.scalar(
        select(Membership).where(Membership.repository_id == repo.id, Membership.user_id == user.id)
    )
    if membership is None:
        raise NotFound(f"{user_name} has no role in {full_name}")
    session.delete(membership)
    session.flush()


def set_push_workflows(session: Session, actor: Actor, full_name: str, enabled: bool) -> Repository:
    """Switch automatic push workflows on or off (owners/admins; off by default).

    Enabling does not replay pushes recorded before it; disabling cancels no run already
    created, it only stops events not yet processed from creating runs.
    """
    repo = find_repository(session, actor, full_name, Role.ADMIN)
    if enabled and not repo.push_workflows_enabled:
        repo.push_workflows_enabled_at = utcnow()
    elif not enabled:
        repo.push_workflows_enabled_at = None
    repo.push_workflows_enabled = enabled
    session.flush()
    return repo


def set_scheduled_workflows(
    session: Session,
    actor: Actor,
    full_name: str,
    enabled: bool,
    *,
    requester: str | None = None,
) -> Repository:
    """Switch ``on: schedule`` workflows of the default branch on or off (off by default).

    Owners/admins only. Scheduled runs are requested by the person who switched them on:
    ``actor`` itself, or for the operator (and other site administrators, who may name
    someone) ``requester``, by default the repository's owner. That person must be an owner or
    admin now, and is rechecked at every scheduled run. Switching on replays no minute that
    went by; switching off cancels no run already created.
    """
    repo = find_repository(session, actor, full_name, Role.ADMIN)
    if not enabled:
        repo.scheduled_workflows_enabled = False
        repo.scheduled_workflows_enabled_at = None
        repo.scheduled_workflows_requester_id = None
        session.flush()
        return repo
    if requester is not None and requester != actor.name and not actor.is_site_admin:
        raise PermissionDenied(
            "only site administrators may switch scheduled workflows on in someone else's name"
        )
    if requester is not None:
        user = get_user(session, requester)
    elif actor.user_id is not None:
        user = get_user(session, actor.name)
    else:
        user = repo.owner
    role = role_in(session, Actor.for_user(user), repo)
    if role is None or role < Role.ADMIN:
        access = f"{role.label} access" if role is not None else "no access"
        raise PermissionDenied(
            f"{user.name} has {access} to {full_name}; scheduled runs must be requested by an "
            "owner or admin"
        )
    if not repo.scheduled_workflows_enabled or repo.scheduled_workflows_requester_id != user.id:
        repo.scheduled_workflows_enabled_at = utcnow()
    repo.scheduled_workflows_enabled = True
    repo.scheduled_workflows_requester_id = user.id
    session.flush()
    return repo
