"""Workflow concurrency groups: at most one active run per group and repository.

A run whose workflow names a ``concurrency`` group is *admitted* when it is created:

    cancel-in-progress: true    every earlier active run of the group is cancelled, with the
                                reason "superseded by run #N", and the new run starts at once
    cancel-in-progress: false   if an earlier run of the group is still active, the new run is
                                ``concurrency_blocked``: it stays queued with no job queued, and
                                is released (oldest first) when the group has no active,
                                unblocked run left

These are queries only; :mod:`forge_ci.runs.scheduling` acts on them while it holds the
repository's scheduling lock (:func:`forge_ci.runs.numbering.lock_repository_runs`).
"""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.models import Run


def _group_query(run: Run) -> Select[Run]:
    return (
        select(Run)
        .where(
            Run.repository_id == run.repository_id,
            Run.concurrency_key == run.concurrency_key,
            Run.state != states.COMPLETED,
            Run.id != run.id,
        )
        .order_by(Run.number)
    )


def other_active_runs(session: Session, run: Run) -> list[Run]:
    """The other runs of ``run``'s group that have not completed, oldest first."""
    if run.concurrency_key is None:
        return []
    return list(
        session.scalars(
            _group_query(run).with_for_update().execution_options(populate_existing=True)
        )
    )


def next_to_release(session: Session, finished: Run) -> Run | None:
    """The blocked run to start now that ``finished`` completed, if the group is free."""
    if finished.concurrency_key is None:
        return None
    others = other_active_runs(session, finished)
    if any(not other.concurrency_blocked for other in others):
        return None
    return next((other for other in others if other.concurrency_blocked), None)
