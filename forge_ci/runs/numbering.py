"""Run numbers and the per-repository scheduling lock.

Numbers are per repository, start at 1 and have no gaps, even under concurrency: they come from
one counter row per repository (``run_sequences``), incremented in the same transaction that
inserts the run, so a rolled-back creation gives its number back. Three things serialize that:
the repository's cross-process write lock around run creation, the row lock taken here
(``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite the caller's ``BEGIN IMMEDIATE``), and the
unique constraint on ``(repository_id, number)`` as the last line of defence.

The same row lock serializes every scheduling decision of the repository's runs (job
completion, cancellation, concurrency groups), so two transactions never decide on stale views
of the same group. Lock order, everywhere: run_sequences row -> runs row -> jobs rows.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.models import RunSequence


def lock_repository_runs(session: Session, repository_id: int) -> RunSequence:
    """Lock (creating it if needed) the repository's run counter row for this transaction."""
    row = session.scalar(
        select(RunSequence)
        .where(RunSequence.repository_id == repository_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None:
        # Only run creation gets here (the row exists once a run does), and run creation holds
        # the repository lock, so no one else inserts this row concurrently.
        row = RunSequence(repository_id=repository_id, last_number=0)
        session.add(row)
        session.flush()
    return row


def next_run_number(session: Session, repository_id: int) -> int:
    """The next run number of the repository, reserved by this transaction."""
    row = lock_repository_runs(session, repository_id)
    row.last_number += 1
    session.flush()
    return row.last_number
