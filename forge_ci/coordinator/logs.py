"""Job logs: ingestion with masking and the per-attempt cap, and reading pages of records.

Upload rules (sequences are per attempt, from 1, across every step and stream)::

    sequence == acknowledged + 1   new chunk: masked, stored, acknowledged
    sequence <= acknowledged       replay: acknowledged if identical, else 409 log_conflict
    sequence >  acknowledged + 1   409 log_out_of_order (nothing stored)

Before anything is stored, the attempt credential and every value issued to the attempt are
masked (:mod:`forge_ci.masking`), with the withheld tail of each (step, stream) sealed in
``log_carries`` until the next chunk of that stream or the end of the attempt, beside what the
stream ends with if none comes (``Masker.finish``: the mask for a tail that counts as secret,
else the tail itself, masked like any text).

The cap (``settings.log_cap_bytes``) counts received text. A chunk that would pass it is not
stored: the server writes "log limit of N bytes reached; job stopped", requests cancellation of
the job and answers 413 ``log_limit_reached``, now and for every later chunk. Nothing is ever
truncated silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.coordinator import secrets
from forge_ci.coordinator.attempts import cancel_attempt, reconcile, require_execution
from forge_ci.coordinator.credentials import job_token, keyed_digest
from forge_ci.coordinator.errors import LogConflict, LogOutOfOrder, UnknownStep
from forge_ci.coordinator.records import append_record, notice
from forge_ci.errors import NotFound
from forge_ci.masking import EMPTY, Masker, MaskerCache, open_carry, seal_carry
from forge_ci.models import Attempt, AttemptStep, Job, LogCarry, LogRecord
from forge_ci.protocol import LogRequest, decimal
from forge_ci.repos import RepositoryAccess, find_repository, repository_access
from forge_ci.runs.queries import find_run

PAGE_SIZE = 100
#: ``::add-mask::`` values one attempt may add (each is a pattern of its masker).
MAX_ATTEMPT_MASKS = 1000

#: Built maskers shared by the requests of one process.
MASKERS = MaskerCache()


def limit_message(cap: int) -> str:
    return f"log limit of {cap} bytes reached; job stopped"


def attempt_masker(session: Session, attempt: Attempt, token: str) -> Masker:
    """The masker for ``attempt``: its credential, its job token and every value issued to it.

    Secret values are only added while the attempt lives (one delivery per step), and
    ``::add-mask::`` values arriving with log chunks are kept beside them; all are deleted when it
    ends, so the masker is cached per attempt, credential and number of masked values: a chunk
    after the first neither reads nor decrypts them (for 64 secrets that was a sixth of a
    chunk's time on SQLite), it only counts them.
    """
    count = secrets.issued_count(session, attempt)
    return MASKERS.get_for(
        f"attempt/{attempt.id}/{attempt.token_hash}/{count}",
        lambda: [token, job_token(token), *secrets.issued_values(session, attempt, token)],
    )


def _carry_context(attempt: Attempt, step_id: str, stream: str) -> str:
    return f"carry/{attempt.id}/{step_id}/{stream}"


@dataclass(frozen=True)
class LogAck:
    """The outcome of one upload (the caller commits either way)."""

    #: False when the cap refused the chunk (answer 413 log_limit_reached).
    accepted: bool
    message: str = ""


def append_log(
    session: Session,
    attempt: Attempt,
    token: str,
    request: LogRequest,
    now: datetime,
    cap: int,
) -> LogAck:
    """Store one chunk of a running attempt's output (the caller holds the attempt lock)."""
    reconcile(session, attempt, now)
    require_execution(attempt, request.execution_id)
    digest = keyed_digest(
        token,
        decimal(request.sequence),
        request.step_id,
        request.stream,
        request.text,
        *(["masks", *request.masks] if request.masks else []),
    )
    if request.sequence <= attempt.acknowledged_sequence:
        stored = session.scalar(
            select(LogRecord.digest).where(
                LogRecord.attempt_id == attempt.id, LogRecord.sequence == request.sequence
            )
        )
        if stored == digest:
            return LogAck(True)
        raise LogConflict(
            f"log sequence {request.sequence} was already stored with different content"
        )
    expected = attempt.acknowledged_sequence + 1
    if request.sequence != expected:
        raise LogOutOfOrder(f"expected log sequence {expected}, got {request.sequence}")
    if request.step_id:
        known = session.scalar(
            select(AttemptStep.id).where(
                AttemptStep.attempt_id == attempt.id, AttemptStep.step_id == request.step_id
            )
        )
        if known is None:
            raise UnknownStep(f"step {request.step_id!r} is not a step of this job")
    size = len(request.text.encode("utf-8"))
    if attempt.log_limit_reached or attempt.log_bytes + size > cap:
        message = limit_message(cap)
        if not attempt.log_limit_reached:
            attempt.log_limit_reached = True
            notice(session, attempt, message)
            cancel_attempt(session, attempt, message, now)
        return LogAck(False, message)
    if request.masks:
        _add_masks(session, attempt, token, request)
    masker = attempt_masker(session, attempt, token)
    key = (attempt.id, request.step_id, request.stream)
    row = session.get(LogCarry, key)
    context = _carry_context(attempt, request.step_id, request.stream)
    carry = open_carry(token, context, row.sealed) if row is not None else EMPTY
    emitted, carry = masker.feed(carry, request.text)
    if carry.pending:
        sealed = seal_carry(token, context, carry)
        # What the stream ends with if the server ends it without the credential.
        ending = masker.finish(carry)
        if row is None:
            session.add(
                LogCarry(
                    attempt_id=attempt.id,
                    step_id=request.step_id,
                    stream=request.stream,
                    sealed=sealed,
                    ending=ending,
                )
            )
        else:
            row.sealed = sealed
            row.ending = ending
    elif row is not None:
        session.execute(
            delete(LogCarry).where(
                LogCarry.attempt_id == attempt.id,
                LogCarry.step_id == request.step_id,
                LogCarry.stream == request.stream,
            )
        )
    append_record(
        session,
        attempt,
        request.step_id,
        request.stream,
        emitted,
        sequence=request.sequence,
        digest=digest,
    )
    attempt.acknowledged_sequence = request.sequence
    attempt.log_bytes += size
    return LogAck(True)


def _add_masks(session: Session, attempt: Attempt, token: str, request: LogRequest) -> None:
    """Keep the chunk's ``::add-mask::`` values: this chunk and every later text is masked."""
    room = MAX_ATTEMPT_MASKS - attempt.mask_count
    added = secrets.remember_masks(session, attempt, token, request.masks[: max(room, 0)])
    if len(request.masks) > room:
        notice(
            session,
            attempt,
            f"more than {MAX_ATTEMPT_MASKS} ::add-mask:: values; later ones are not added",
            request.step_id,
        )
    attempt.mask_count += added


# --- Reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    """One stored record as readers see it."""

    cursor: int
    step_id: str
    stream: str
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "cursor": decimal(self.cursor),
            "step_id": self.step_id,
            "stream": self.stream,
            "text": self.text,
        }


@dataclass(frozen=True)
class LogPage:
    """At most 100 records after a cursor, read in one snapshot with the attempt's state."""

    records: list[LogLine]
    next_cursor: int
    has_more: bool
    #: True only when the attempt has ended and this page reaches the end of its log.
    complete: bool
    attempt_state: str
    conclusion: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": [record.as_dict() for record in self.records],
            "next_cursor": decimal(self.next_cursor),
            "has_more": self.has_more,
            "complete": self.complete,
            "attempt_state": self.attempt_state,
            "conclusion": self.conclusion,
        }


def find_attempt(
    session: Session, actor: Actor, full_name: str, run_number: int, attempt_id: int
) -> Attempt:
    """An attempt of run ``run_number`` in a repository the actor can read (else NotFound)."""
    return find_attempt_in(
        session, repository_access(session, actor, full_name), run_number, attempt_id
    )


def find_attempt_in(
    session: Session, access: RepositoryAccess, run_number: int, attempt_id: int
) -> Attempt:
    """:func:`find_attempt` in a repository already looked up for this request."""
    repository = access.require(Role.READ)
    run = find_run(session, repository, run_number)
    attempt = session.scalar(
        select(Attempt)
        .join(Job, Job.id == Attempt.job_id)
        .where(Attempt.id == attempt_id, Job.run_id == run.id)
        .execution_options(populate_existing=True)
    )
    if attempt is None:
        raise NotFound(f"attempt {attempt_id} of run #{run_number} not found")
    return attempt


def read_log_page(
    session: Session,
    actor: Actor,
    full_name: str,
    run_number: int,
    attempt_id: int,
    after_cursor: int = 0,
    limit: int = PAGE_SIZE,
) -> LogPage:
    """Records after ``after_cursor`` (0: from the start), at most ``limit`` (<= 100)."""
    access = repository_access(session, actor, full_name)
    return read_log_page_in(session, access, run_number, attempt_id, after_cursor, limit)


def read_log_page_in(
    session: Session,
    access: RepositoryAccess,
    run_number: int,
    attempt_id: int,
    after_cursor: int = 0,
    limit: int = PAGE_SIZE,
) -> LogPage:
    """:func:`read_log_page` in a repository already looked up for this request.

    The attempt's state is read *before* its records. Termination writes its last records in
    the same transaction that completes the attempt, so whoever sees ``completed`` first also
    sees every record (PostgreSQL read committed shows later commits to the second statement;
    a SQLite read transaction is one snapshot).
    """
    limit = max(1, min(limit, PAGE_SIZE))
    attempt = find_attempt_in(session, access, run_number, attempt_id)
    state = attempt.state
    conclusion = attempt.conclusion or ""
    rows = session.scalars(
        select(LogRecord)
        .where(LogRecord.attempt_id == attempt.id, LogRecord.position > after_cursor)
        .order_by(LogRecord.position)
        .limit(limit + 1)
    ).all()
    has_more = len(rows) > limit
    page = rows[:limit]
    next_cursor = page[-1].position if page else after_cursor
    return LogPage(
        records=[
            LogLine(row.position, row.step_id, row.stream, row.text) for row in page if row.text
        ],
        next_cursor=next_cursor,
        has_more=has_more,
        complete=state == states.COMPLETED and not has_more,
        attempt_state=state,
        conclusion=conclusion,
    )


@dataclass(frozen=True)
class AttemptView:
    """One attempt of a run, as log readers list them."""

    attempt_id: int
    job_key: str
    number: int
    state: str
    conclusion: str
    steps: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt_id": decimal(self.attempt_id),
            "job_key": self.job_key,
            "number": self.number,
            "state": self.state,
            "conclusion": self.conclusion,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class RunAttempts:
    """A run's state and its attempts in claim order (read in one transaction)."""

    run_state: str
    run_conclusion: str
    attempts: list[AttemptView]


def run_attempts(session: Session, actor: Actor, full_name: str, run_number: int) -> RunAttempts:
    """Every attempt of run ``run_number`` with its steps; repository-scoped like the logs."""
    repository = find_repository(session, actor, full_name, Role.READ)
    run = find_run(session, repository, run_number)
    rows = session.execute(
        select(Attempt, Job.key)
        .join(Job, Job.id == Attempt.job_id)
        .where(Job.run_id == run.id)
        .order_by(Attempt.id)
        .execution_options(populate_existing=True)
    ).all()
    views = [
        AttemptView(
            attempt_id=attempt.id,
            job_key=key,
            number=attempt.number,
            state=attempt.state,
            conclusion=attempt.conclusion or "",
            steps=[
                {
                    "step_id": step.step_id,
                    "name": step.name,
                    "state": step.state,
                    "conclusion": step.conclusion or "",
                    "exit_code": step.exit_code,
                }
                for step in attempt.steps
            ],
        )
        for attempt, key in rows
    ]
    return RunAttempts(run.state, run.conclusion or "", views)
