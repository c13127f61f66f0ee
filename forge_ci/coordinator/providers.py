"""Provider administration: create, ensure, list, pause, resume, revoke, labels, access.

Only site administrators (and the operator CLI) manage providers. A provider's credential is
read from a file by the front door and never appears in argv or output; only its SHA-256 is
stored. What each change does to work in flight:

    pause            no new claims; running work continues
    resume           claims again
    revoke           final: no claims, no heartbeats; active attempts are cancelled
    labels           replaced atomically; leased/running attempts whose job needs a label the
                     provider no longer has are cancelled, matching ones are untouched
    access           scope and repository list replaced atomically; attempts in repositories
                     outside the new scope are cancelled

Lock order (PostgreSQL): the provider row first (``FOR UPDATE``; claims hold ``FOR KEY SHARE``
on it), then attempt rows, then the runs scheduler's locks. So a claim that read the old labels
finishes before an edit looks for attempts to cancel, and the next claim sees the new labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.coordinator import attempts as attempt_cases
from forge_ci.coordinator.credentials import check_token, hashes_match, token_hash
from forge_ci.coordinator.errors import BadCredential
from forge_ci.coordinator.leases import LEASE
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.models import Attempt, Job, Provider, ProviderGrant, Repository, utcnow
from forge_ci.models.queue import job_labels
from forge_ci.repos import find_repository
from forge_ci.runs.transactions import begin_serialized

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Dots are allowed because workflows name images such as ``ubuntu-24.04`` (issue #12 item 8);
#: ``forge_ci.workflow.labels`` refuses in ``runs-on`` every label this cannot carry.
LABEL_RE = re.compile(r"[a-z0-9_.-]{1,64}")
MAX_LABELS = 8
OPERATING_SYSTEMS = ("linux", "windows")
SCOPES = ("selected", "all")


# --- Validation ----------------------------------------------------------------------------------


def check_provider_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid provider name {name!r}: use 1-64 letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def normalize_labels(labels: str | Iterable[str]) -> tuple[str, ...]:
    """Lowercase, trimmed, unique and sorted; ``self-hosted`` and exactly one OS required."""
    items = labels.split(",") if isinstance(labels, str) else list(labels)
    normalized: set[str] = set()
    for raw in items:
        label = raw.strip().lower()
        if not label:
            raise InvalidInput("labels: an empty label (check for a stray comma)")
        if not LABEL_RE.fullmatch(label):
            raise InvalidInput(
                f"invalid label {raw.strip()!r}: use 1-64 ASCII letters, digits, '.', '_' or '-'"
            )
        normalized.add(label)
    if len(normalized) > MAX_LABELS:
        raise InvalidInput(f"a provider has at most {MAX_LABELS} labels, got {len(normalized)}")
    if "self-hosted" not in normalized:
        raise InvalidInput("labels must include self-hosted")
    systems = [os for os in OPERATING_SYSTEMS if os in normalized]
    if len(systems) != 1:
        raise InvalidInput("labels must include exactly one of linux or windows")
    return tuple(sorted(normalized))


#: A job's ``runs-on`` labels compared the way provider labels are stored.
normalize_job_labels = job_labels


def check_scope(scope: str) -> str:
    if scope not in SCOPES:
        raise InvalidInput(f"invalid scope {scope!r}: use selected or all")
    return scope


def _require_admin(actor: Actor) -> None:
    if not actor.is_site_admin:
        raise PermissionDenied("only site administrators manage providers")


def _repositories(session: Session, actor: Actor, names: Sequence[str]) -> list[Repository]:
    found: dict[int, Repository] = {}
    for name in names:
        name = name.strip()
        if not name:
            raise InvalidInput("repositories: an empty name (check for a stray comma)")
        repository = find_repository(session, actor, name, Role.READ)
        found[repository.id] = repository
    return list(found.values())


# --- Views ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderInfo:
    """What administrators see of a provider (never its credential or hash)."""

    name: str
    state: str
    scope: str
    labels: tuple[str, ...]
    repositories: tuple[str, ...]
    active_attempts: int
    last_contact_at: datetime | None
    created_at: datetime
    #: The egress policy the provider last reported ("" before its first claim).
    egress_policy: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "state": self.state,
            "scope": self.scope,
            "labels": ",".join(self.labels),
            "repositories": ",".join(self.repositories) if self.scope == "selected" else "*",
            "active_attempts": self.active_attempts,
            "last_contact_at": self.last_contact_at.isoformat() if self.last_contact_at else None,
            "created_at": self.created_at.isoformat(),
            "egress_policy": self.egress_policy,
        }


def _info(session: Session, provider: Provider) -> ProviderInfo:
    session.flush()
    repositories = session.scalars(
        select(Repository)
        .join(ProviderGrant, ProviderGrant.repository_id == Repository.id)
        .where(ProviderGrant.provider_id == provider.id)
    ).all()
    active = session.scalars(
        select(Attempt.id).where(
            Attempt.provider_id == provider.id, Attempt.state != states.COMPLETED
        )
    ).all()
    # Contact is a claim (recorded on the provider) or a lease renewal by one of its runners
    # (a running attempt's lease was last renewed one lease length before it ends).
    contact = provider.last_contact_at
    renewed = session.scalar(
        select(func.max(Attempt.lease_expires_at)).where(
            Attempt.provider_id == provider.id, Attempt.state == states.RUNNING
        )
    )
    if renewed is not None and (contact is None or renewed - LEASE > contact):
        contact = renewed - LEASE
    return ProviderInfo(
        name=provider.name,
        state=provider.state,
        scope=provider.scope,
        labels=tuple(sorted(provider.label_set)),
        repositories=tuple(sorted(r.full_name for r in repositories)),
        active_attempts=len(active),
        last_contact_at=contact,
        created_at=provider.created_at,
        egress_policy=provider.egress_policy or "",
    )


def _get(session: Session, name: str, *, lock: bool = False) -> Provider:
    query = select(Provider).where(Provider.name == name)
    if lock:
        query = query.with_for_update().execution_options(populate_existing=True)
    provider = session.scalar(query)
    if provider is None:
        raise NotFound(f"provider {name!r} not found")
    return provider


def _check_token_unused(session: Session, token: str, provider: Provider | None) -> str:
    digest = token_hash(check_token(token, "the provider token"))
    other = session.scalar(select(Provider).where(Provider.token_hash == digest))
    if other is not None and other is not provider:
        raise Conflict("this token already belongs to another provider; generate a new one")
    if session.scalar(select(Attempt.id).where(Attempt.token_hash == digest)) is not None:
        raise Conflict("this token was used as an attempt credential; generate a new one")
    return digest


def _set_grants(provider: Provider, repositories: list[Repository], *, replace: bool) -> None:
    wanted = {r.id for r in repositories}
    if replace:
        provider.grants[:] = [g for g in provider.grants if g.repository_id in wanted]
    have = {g.repository_id for g in provider.grants}
    for repository in repositories:
        if repository.id not in have:
            provider.grants.append(ProviderGrant(repository_id=repository.id))


# --- Use cases -----------------------------------------------------------------------------------


def create_provider(
    session: Session,
    actor: Actor,
    name: str,
    token: str,
    labels: str | Iterable[str],
    scope: str = "selected",
    repositories: Sequence[str] = (),
) -> ProviderInfo:
    """Register a provider. ``scope`` all takes no repository list."""
    _require_admin(actor)
    _serialized(session)
    check_provider_name(name)
    normalized = normalize_labels(labels)
    check_scope(scope)
    if scope == "all" and repositories:
        raise InvalidInput("scope all applies to every repository; do not list repositories")
    if session.scalar(select(Provider.id).where(Provider.name == name)) is not None:
        raise Conflict(f"provider {name!r} already exists; use `forge-ci provider ensure`")
    digest = _check_token_unused(session, token, None)
    provider = Provider(name=name, token_hash=digest, labels=",".join(normalized), scope=scope)
    session.add(provider)
    _set_grants(provider, _repositories(session, actor, repositories), replace=True)
    return _info(session, provider)


def ensure_provider(
    session: Session,
    actor: Actor,
    name: str,
    token: str,
    labels: str | Iterable[str],
    scope: str | None = None,
    repositories: Sequence[str] = (),
) -> tuple[ProviderInfo, bool]:
    """Create the provider, or bring an existing one up to this configuration; idempotent.

    For deployment scripts (``forge-ci up``): the token file is authoritative (the stored hash
    follows it), labels and selected repositories are added to what an administrator already
    configured, and the scope is kept unless given (``all`` clears selected grants). Paused
    state is kept. A revoked provider stays revoked. Returns (info, created).
    """
    _require_admin(actor)
    check_provider_name(name)
    if scope is not None:
        check_scope(scope)
    _serialized(session)
    existing = session.scalar(select(Provider.id).where(Provider.name == name))
    if existing is None:
        return (
            create_provider(session, actor, name, token, labels, scope or "selected", repositories),
            True,
        )
    provider = _get(session, name, lock=True)
    if provider.state == "revoked":
        raise Conflict(f"provider {name!r} is revoked; create a provider with another name")
    requested = normalize_labels(labels)
    merged = normalize_labels(sorted(provider.label_set | set(requested)))
    digest = _check_token_unused(session, token, provider)
    new_scope = scope or provider.scope
    if new_scope == "all" and repositories:
        raise InvalidInput("scope all applies to every repository; do not list repositories")
    provider.token_hash = digest
    provider.labels = ",".join(merged)
    provider.scope = new_scope
    if new_scope == "all":
        provider.grants[:] = []
    else:
        _set_grants(provider, _repositories(session, actor, repositories), replace=False)
    provider.updated_at = utcnow()
    return _info(session, provider), False


def list_providers(session: Session, actor: Actor) -> list[ProviderInfo]:
    _require_admin(actor)
    return [
        _info(session, provider)
        for provider in session.scalars(select(Provider).order_by(Provider.name))
    ]


def show_provider(session: Session, actor: Actor, name: str) -> ProviderInfo:
    _require_admin(actor)
    return _info(session, _get(session, name))


def _serialized(session: Session) -> None:
    """Start a serialized writer unless the caller already did (SQLite: ``BEGIN IMMEDIATE``)."""
    if not session.in_transaction():
        begin_serialized(session)


def _editable(session: Session, actor: Actor, name: str) -> Provider:
    _require_admin(actor)
    _serialized(session)
    provider = _get(session, name, lock=True)
    if provider.state == "revoked":
        raise Conflict(f"provider {name!r} is revoked; it can no longer be changed")
    return provider


def pause_provider(session: Session, actor: Actor, name: str) -> ProviderInfo:
    """Stop new claims; work in flight continues."""
    provider = _editable(session, actor, name)
    provider.state = "paused"
    provider.updated_at = utcnow()
    return _info(session, provider)


def resume_provider(session: Session, actor: Actor, name: str) -> ProviderInfo:
    provider = _editable(session, actor, name)
    provider.state = "active"
    provider.updated_at = utcnow()
    return _info(session, provider)


def _active_attempts(session: Session, provider: Provider) -> list[Attempt]:
    return list(
        session.scalars(
            select(Attempt)
            .where(Attempt.provider_id == provider.id, Attempt.state != states.COMPLETED)
            .order_by(Attempt.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    )


def revoke_provider(
    session: Session, actor: Actor, name: str, now: datetime | None = None
) -> tuple[ProviderInfo, int]:
    """Revoke for good: its credential stops working and its active work is cancelled."""
    now = now or utcnow()
    provider = _editable(session, actor, name)
    provider.state = "revoked"
    provider.updated_at = now
    cancelled = 0
    for attempt in _active_attempts(session, provider):
        attempt_cases.cancel_attempt(
            session,
            attempt,
            "an administrator revoked the provider running this job",
            now,
            provider_change=True,
        )
        cancelled += 1
    return _info(session, provider), cancelled


def set_provider_labels(
    session: Session,
    actor: Actor,
    name: str,
    labels: str | Iterable[str],
    now: datetime | None = None,
) -> tuple[ProviderInfo, int]:
    """Replace the labels; cancel leased or running work that no longer matches."""
    now = now or utcnow()
    normalized = normalize_labels(labels)
    provider = _editable(session, actor, name)
    provider.labels = ",".join(normalized)
    provider.updated_at = now
    have = frozenset(normalized)
    cancelled = 0
    for attempt in _active_attempts(session, provider):
        job = session.get(Job, attempt.job_id)
        assert job is not None
        missing = sorted(normalize_job_labels(job.runs_on) - have)
        if missing:
            attempt_cases.cancel_attempt(
                session,
                attempt,
                f"the provider running this job no longer has label {', '.join(missing)}",
                now,
                provider_change=True,
            )
            cancelled += 1
    return _info(session, provider), cancelled


def set_provider_access(
    session: Session,
    actor: Actor,
    name: str,
    scope: str,
    repositories: Sequence[str] = (),
    now: datetime | None = None,
) -> tuple[ProviderInfo, int]:
    """Replace scope and repository list; cancel work in repositories no longer allowed."""
    now = now or utcnow()
    check_scope(scope)
    if scope == "all" and repositories:
        raise InvalidInput("scope all applies to every repository; do not list repositories")
    provider = _editable(session, actor, name)
    chosen = _repositories(session, actor, repositories)
    provider.scope = scope
    _set_grants(provider, chosen if scope == "selected" else [], replace=True)
    provider.updated_at = now
    allowed = {r.id for r in chosen}
    cancelled = 0
    if scope == "selected":
        for attempt in _active_attempts(session, provider):
            if attempt.repository_id not in allowed:
                attempt_cases.cancel_attempt(
                    session,
                    attempt,
                    "the provider running this job no longer has access to this repository",
                    now,
                    provider_change=True,
                )
                cancelled += 1
    return _info(session, provider), cancelled


def authenticate_provider(session: Session, token: str | None) -> Provider:
    """The provider whose credential this is; revoked and unknown ones are refused alike."""
    if token is None:
        raise BadCredential("a provider credential is required (Authorization: Bearer ...)")
    provider = session.scalar(select(Provider).where(Provider.token_hash == token_hash(token)))
    if provider is None or not hashes_match(provider.token_hash, token):
        raise BadCredential("the provider credential is not valid")
    if provider.state == "revoked":
        raise BadCredential("the provider credential is not valid")
    return provider
