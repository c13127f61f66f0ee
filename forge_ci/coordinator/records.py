"""Appending stored log records, and ending the maskers' withheld tails when an attempt ends.

Callers hold the attempt's row lock, so positions are handed out in commit order and a reader
that saw position N has seen everything before it.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from forge_ci.models import Attempt, LogCarry, LogRecord


def append_record(
    session: Session,
    attempt: Attempt,
    step_id: str,
    stream: str,
    text: str,
    *,
    sequence: int | None = None,
    digest: str | None = None,
) -> LogRecord:
    """Store one record at the attempt's next position (text must already be masked)."""
    attempt.log_records += 1
    record = LogRecord(
        attempt_id=attempt.id,
        position=attempt.log_records,
        sequence=sequence,
        step_id=step_id,
        stream=stream,
        text=text,
        digest=digest,
    )
    session.add(record)
    return record


def notice(session: Session, attempt: Attempt, text: str, step_id: str = "") -> LogRecord:
    """A line from the server itself (stream ``system``)."""
    return append_record(
        session, attempt, step_id, "system", text if text.endswith("\n") else text + "\n"
    )


def flush_carries(session: Session, attempt: Attempt) -> int:
    """End every stream with the ending computed when its tail was withheld.

    That is :meth:`forge_ci.masking.Masker.finish` of the carry: one mask for an unresolved
    tail that counts as secret, else the (masked) tail itself, nothing when all of it is
    inside a mask already. Needs no credential, so the server can end an attempt on its own
    (a lost lease, a timeout) by the same rule as a completion. A carry stored before that
    column existed ends as one mask.
    """
    carries = session.scalars(
        select(LogCarry)
        .where(LogCarry.attempt_id == attempt.id)
        .order_by(LogCarry.step_id, LogCarry.stream)
    ).all()
    for carry in carries:
        ending = attempt.log_mask if carry.ending is None else carry.ending
        if ending:
            append_record(session, attempt, carry.step_id, carry.stream, ending)
    session.execute(delete(LogCarry).where(LogCarry.attempt_id == attempt.id))
    return len(carries)
