"""The egress audit: storing what a provider's proxy did for an attempt, and reading it back.

A provider sends its records with its own credential (``POST attempts/<id>/egress``); the
attempt must be one it claimed, and the attempt credential in the body must be that attempt's.
Host names and reasons are job-controlled text, so they are masked like the job's log before
anything is stored. Each denied request, and each connection the proxy closed at a limit, is
also one ``system`` line in the job's log. A replayed sequence is stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import hashes_match
from forge_ci.coordinator.errors import BadCredential
from forge_ci.coordinator.logs import attempt_masker, find_attempt_in
from forge_ci.coordinator.providers import authenticate_provider
from forge_ci.coordinator.records import notice
from forge_ci.db import begin_write
from forge_ci.errors import NotFound
from forge_ci.models import Attempt, EgressConnection
from forge_ci.protocol import EgressRecord, EgressRequest
from forge_ci.repos import RepositoryAccess, repository_access

#: How many targets the job page names before "and N more".
SUMMARY_TARGETS = 5


def denial_line(record: EgressConnection) -> str:
    """The job log's line for a denied request or a connection closed at a limit."""
    target = f"{record.host}:{record.port}" if record.host else "a malformed request"
    if record.allowed:
        return f"egress: connection to {target} closed: {record.closed}"
    return f"egress denied: {record.method} {target}: {record.reason}"


def record_egress(
    session: Session, token: str | None, attempt_id: int, request: EgressRequest
) -> int:
    """Store the provider's records for one attempt; returns how many were new."""
    begin_write(session)
    provider = authenticate_provider(session, token)
    attempt = session.scalar(
        select(Attempt)
        .where(Attempt.id == attempt_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if attempt is None or attempt.provider_id != provider.id:
        raise NotFound(f"attempt {attempt_id} is not one this provider claimed")
    if not hashes_match(attempt.token_hash, request.attempt_token):
        raise BadCredential(f"that is not the credential of attempt {attempt_id}")
    masker = attempt_masker(session, attempt, request.attempt_token)
    sequences = [record.sequence for record in request.connections]
    known = set(
        session.scalars(
            select(EgressConnection.sequence).where(
                EgressConnection.attempt_id == attempt.id,
                EgressConnection.sequence.in_(sequences),
            )
        )
    )
    stored = 0
    for record in sorted(request.connections, key=lambda r: r.sequence):
        if record.sequence in known:
            continue
        known.add(record.sequence)
        row = _row(attempt, record, masker.mask_text)
        session.add(row)
        if not row.allowed or row.closed:
            notice(session, attempt, masker.mask_text(denial_line(row)))
        stored += 1
    session.flush()
    return stored


def _row(attempt: Attempt, record: EgressRecord, mask: Callable[[str], str]) -> EgressConnection:
    return EgressConnection(
        attempt_id=attempt.id,
        sequence=record.sequence,
        requested_at=datetime.fromtimestamp(record.at_ms / 1000, UTC),
        method=mask(record.method)[:16],
        host=mask(record.host)[:255],
        port=record.port,
        address=record.address[:200],
        allowed=record.allowed,
        explicit=record.explicit,
        reason=mask(record.reason)[:500],
        closed=mask(record.closed)[:200],
        bytes_out=record.bytes_out,
        bytes_in=record.bytes_in,
        milliseconds=record.milliseconds,
    )


@dataclass(frozen=True)
class EgressTarget:
    host: str
    port: int
    allowed: bool
    connections: int
    bytes_in: int
    bytes_out: int
    #: The first reason seen (denied targets: why; allowed: by what).
    reason: str
    address: str


@dataclass(frozen=True)
class EgressSummary:
    """An attempt's network use, by target, for the job page."""

    targets: list[EgressTarget]

    @property
    def connections(self) -> int:
        return sum(t.connections for t in self.targets if t.allowed)

    @property
    def denied(self) -> int:
        return sum(t.connections for t in self.targets if not t.allowed)

    def text(self) -> str:
        """``Network: 3 connections to pypi.org:443, 1 denied to 10.0.0.5:6379``."""
        if not self.targets:
            return "Network: no connections"
        parts = []
        for allowed, word in ((True, "connection"), (False, "denied")):
            group = [t for t in self.targets if t.allowed == allowed]
            if not group:
                continue
            count = sum(t.connections for t in group)
            names = ", ".join(f"{t.host}:{t.port}" for t in group[:SUMMARY_TARGETS])
            more = len(group) - SUMMARY_TARGETS
            if more > 0:
                names += f" and {more} more"
            noun = f"{count} {word}{'s' if count != 1 and allowed else ''}"
            parts.append(f"{noun} to {names}")
        return "Network: " + ", ".join(parts)


def summarize(rows: list[EgressConnection]) -> EgressSummary:
    """Rows grouped by (host, port, allowed), in the order each target was first asked for."""
    targets: dict[tuple[str, int, bool], EgressTarget] = {}
    for row in rows:
        key = (row.host or "?", row.port, row.allowed)
        seen = targets.get(key)
        targets[key] = EgressTarget(
            host=key[0],
            port=row.port,
            allowed=row.allowed,
            connections=(seen.connections if seen else 0) + 1,
            bytes_in=(seen.bytes_in if seen else 0) + row.bytes_in,
            bytes_out=(seen.bytes_out if seen else 0) + row.bytes_out,
            reason=seen.reason if seen else row.reason,
            address=seen.address if seen else row.address,
        )
    return EgressSummary(list(targets.values()))


def attempt_egress(
    session: Session, actor: Actor, full_name: str, run_number: int, attempt_id: int
) -> EgressSummary:
    """What attempt ``attempt_id`` of a run reached and was refused (repository-scoped)."""
    access = repository_access(session, actor, full_name)
    return attempt_egress_in(session, access, run_number, attempt_id)


def attempt_egress_in(
    session: Session, access: RepositoryAccess, run_number: int, attempt_id: int
) -> EgressSummary:
    """:func:`attempt_egress` in a repository already looked up for this request."""
    attempt = find_attempt_in(session, access, run_number, attempt_id)
    rows = session.scalars(
        select(EgressConnection)
        .where(EgressConnection.attempt_id == attempt.id)
        .order_by(EgressConnection.sequence)
    ).all()
    return summarize(list(rows))
