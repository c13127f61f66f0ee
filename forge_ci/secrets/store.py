"""Use cases of the secret and variable stores: set, delete, list (every front door calls these).

Only repository owners and administrators (and site administrators) manage them. Every change
takes the repository row's lock (PostgreSQL ``FOR UPDATE``; SQLite writers are serialized), so
the count limit and the version check cannot race. Versions::

    set NAME --version 0      create: no live NAME (a deleted one's version continues)
    set NAME --version V      update: the live NAME is at V; no value given keeps the value
    delete NAME --version V   the live NAME is at V; the row stays as a tombstone, version V+1

A stale version (the entry changed, was deleted, or deleted and re-created since it was
listed) is a Conflict naming the current version. Each change writes one audit row without
the value. Secret values are sealed with the key file before they reach the session; no
function here returns a secret value.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.db import is_sqlite
from forge_ci.errors import Conflict, InvalidInput, NotFound
from forge_ci.gitstore import open_repository, read_ref, repository_path
from forge_ci.models import (
    Repository,
    RepositorySecret,
    RepositoryVariable,
    SettingsAudit,
    utcnow,
)
from forge_ci.repos import find_repository
from forge_ci.secrets.rules import (
    SECRET,
    VARIABLE,
    Kind,
    check_branch,
    check_value,
    check_workflow_path,
    normalize_name,
    parse_version,
    scope_text,
)
from forge_ci.secrets.sealing import Keyring, secret_context
from forge_ci.settings import Settings

Row = RepositorySecret | RepositoryVariable


@dataclass(frozen=True)
class Entry:
    """What may be shown of a secret or variable (a secret's value never is)."""

    kind: str
    name: str
    branch: str | None
    workflow_path: str | None
    version: int
    updated_at: datetime
    updated_by: str
    #: Variables only; always None for secrets.
    value: str | None = None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "branch": self.branch,
            "workflow": self.workflow_path,
            "version": str(self.version),
            "updated_at": self.updated_at.isoformat(timespec="seconds"),
            "updated_by": self.updated_by,
        }
        if self.kind == VARIABLE.word:
            body["value"] = self.value
        return body


@dataclass(frozen=True)
class Scope:
    """Where an entry may be used: one branch and one workflow file (None, None: anywhere)."""

    branch: str | None
    workflow_path: str | None


def _entry(kind: Kind, row: Row) -> Entry:
    value = row.value if isinstance(row, RepositoryVariable) else None
    return Entry(
        kind.word,
        row.name,
        row.branch,
        row.workflow_path,
        row.version,
        row.updated_at,
        row.updated_by_name,
        value,
    )


def _model(kind: Kind) -> type[Row]:
    return RepositorySecret if kind is SECRET else RepositoryVariable


def _manageable(session: Session, actor: Actor, full_name: str) -> Repository:
    """The repository, locked, if the actor may manage its secrets and variables."""
    repository = find_repository(session, actor, full_name, Role.ADMIN)
    if not is_sqlite(session):
        session.execute(
            select(Repository.id).where(Repository.id == repository.id).with_for_update()
        )
    return repository


def _check_scope(settings: Settings, repository: Repository, kind: Kind, scope: Scope) -> Scope:
    if scope.branch is None and scope.workflow_path is None:
        if kind is SECRET:
            raise InvalidInput("a secret needs the one branch and the one workflow that may use it")
        return scope
    if scope.branch is None or scope.workflow_path is None:
        raise InvalidInput(f"a {kind.word} scope names both a branch and a workflow, or neither")
    branch = check_branch(scope.branch)
    path = check_workflow_path(scope.workflow_path)
    git = open_repository(
        repository_path(settings.repositories_dir, repository.owner.name, repository.name)
    )
    if read_ref(git, f"refs/heads/{branch}") is None:
        raise InvalidInput(f"branch {branch} does not exist in {repository.full_name}")
    return Scope(branch, path)


def _find(session: Session, kind: Kind, repository_id: int, name: str) -> Row | None:
    model = _model(kind)
    row = session.scalar(
        select(model).where(model.repository_id == repository_id, model.name == name)
    )
    return row if isinstance(row, Row) else None


def _live_count(session: Session, kind: Kind, repository_id: int) -> int:
    model = _model(kind)
    return int(
        session.scalar(
            select(func.count())
            .select_from(model)
            .where(model.repository_id == repository_id, model.deleted_at.is_(None))
        )
        or 0
    )


def _audit(
    session: Session,
    kind: Kind,
    repository: Repository,
    row: Row,
    action: str,
    actor: Actor,
    value_changed: bool,
    now: datetime,
) -> None:
    session.add(
        SettingsAudit(
            repository_id=repository.id,
            kind=kind.word,
            name=row.name,
            action=action,
            version=row.version,
            scope="" if action == "delete" else scope_text(row.branch, row.workflow_path),
            value_changed=value_changed,
            actor_name=actor.name[:40],
            at=now,
        )
    )


def _store_value(
    settings: Settings, kind: Kind, repository: Repository, row: Row, value: str
) -> None:
    if isinstance(row, RepositorySecret):
        keyring = Keyring.load(settings.sealing_key_path)
        row.sealed = keyring.seal(secret_context(repository.id, row.name), value)
    else:
        row.value = value


def set_entry(
    session: Session,
    settings: Settings,
    actor: Actor,
    kind: Kind,
    full_name: str,
    name: str,
    scope: Scope,
    value: str | None,
    version: str,
) -> Entry:
    """Create (version ``0``) or update a secret or variable; see the module docstring."""
    repository = _manageable(session, actor, full_name)
    stored_name = normalize_name(kind, name)
    expected = parse_version(version)
    if value is not None:
        check_value(kind, value)
    scope = _check_scope(settings, repository, kind, scope)
    row = _find(session, kind, repository.id, stored_name)
    live = row is not None and row.deleted_at is None
    now = utcnow()
    if expected == 0:
        if live:
            assert row is not None
            raise Conflict(
                f"{kind.word} {stored_name} already exists (version {row.version}); to change "
                f"it, give --version {row.version}"
            )
        if value is None:
            raise InvalidInput(f"a new {kind.word} needs a value (from a file or standard input)")
        if _live_count(session, kind, repository.id) >= kind.max_entries:
            raise InvalidInput(
                f"{repository.full_name} already has {kind.max_entries} {kind.word}s, the limit"
            )
        if row is None:
            row = _model(kind)(
                repository_id=repository.id, name=stored_name, version=0, created_at=now
            )
            session.add(row)
        row.version += 1
        row.deleted_at = None
        row.created_at = now
        action = "create"
    else:
        if row is None or not live:
            raise Conflict(
                f"{kind.word} {stored_name} does not exist"
                + (f" (it was deleted at version {row.version})" if row is not None else "")
                + "; create it with --version 0"
            )
        if row.version != expected:
            raise Conflict(
                f"{kind.word} {stored_name} is at version {row.version}, not {expected}: it "
                "changed since it was listed; list it again"
            )
        row.version += 1
        action = "update"
    row.branch = scope.branch
    row.workflow_path = scope.workflow_path
    row.updated_at = now
    row.updated_by_name = actor.name[:40]
    if value is not None:
        _store_value(settings, kind, repository, row, value)
    session.flush()
    _audit(session, kind, repository, row, action, actor, value is not None, now)
    session.flush()
    return _entry(kind, row)


def delete_entry(
    session: Session, actor: Actor, kind: Kind, full_name: str, name: str, version: str
) -> Entry:
    """Delete a secret or variable at the listed version (its row stays, without a value)."""
    repository = _manageable(session, actor, full_name)
    stored_name = normalize_name(kind, name)
    expected = parse_version(version)
    row = _find(session, kind, repository.id, stored_name)
    if row is None or row.deleted_at is not None:
        raise NotFound(f"{kind.word} {stored_name} does not exist in {repository.full_name}")
    if row.version != expected:
        raise Conflict(
            f"{kind.word} {stored_name} is at version {row.version}, not {expected}: it "
            "changed since it was listed; list it again"
        )
    now = utcnow()
    row.version += 1
    row.deleted_at = now
    row.updated_at = now
    row.updated_by_name = actor.name[:40]
    if isinstance(row, RepositorySecret):
        row.sealed = None
    else:
        row.value = None
    session.flush()
    _audit(session, kind, repository, row, "delete", actor, True, now)
    session.flush()
    return _entry(kind, row)


def list_entries(session: Session, actor: Actor, kind: Kind, full_name: str) -> list[Entry]:
    """The live secrets or variables of a repository, by name (no secret values)."""
    repository = find_repository(session, actor, full_name, Role.ADMIN)
    model = _model(kind)
    rows = session.scalars(
        select(model)
        .where(model.repository_id == repository.id, model.deleted_at.is_(None))
        .order_by(model.name)
    )
    return [_entry(kind, row) for row in rows if isinstance(row, Row)]


@dataclass(frozen=True)
class AuditEntry:
    kind: str
    name: str
    action: str
    version: int
    scope: str
    value_changed: bool
    actor: str
    at: datetime


def audit_log(session: Session, actor: Actor, full_name: str, limit: int = 100) -> list[AuditEntry]:
    """The latest changes of a repository's secrets and variables, newest first."""
    repository = find_repository(session, actor, full_name, Role.ADMIN)
    rows = session.scalars(
        select(SettingsAudit)
        .where(SettingsAudit.repository_id == repository.id)
        .order_by(SettingsAudit.id.desc())
        .limit(limit)
    )
    return [
        AuditEntry(
            row.kind,
            row.name,
            row.action,
            row.version,
            row.scope,
            row.value_changed,
            row.actor_name,
            row.at,
        )
        for row in rows
    ]


# --- Named front-door verbs -----------------------------------------------------------------


def set_secret(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    name: str,
    *,
    branch: str,
    workflow_path: str,
    value: str | None,
    version: str,
) -> Entry:
    return set_entry(
        session,
        settings,
        actor,
        SECRET,
        full_name,
        name,
        Scope(branch, workflow_path),
        value,
        version,
    )


def set_variable(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    name: str,
    *,
    branch: str | None,
    workflow_path: str | None,
    value: str | None,
    version: str,
) -> Entry:
    return set_entry(
        session,
        settings,
        actor,
        VARIABLE,
        full_name,
        name,
        Scope(branch, workflow_path),
        value,
        version,
    )
