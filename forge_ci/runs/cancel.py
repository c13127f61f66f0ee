"""Cancelling a run on request of a repository owner/admin.

Waiting and queued jobs are cancelled at once; running jobs get a durable cancellation request
(``cancel_requested_at``) that the runner protocol delivers and enforces (a job that does not
stop in time becomes ``lost``). The run completes as ``cancelled`` once no job is running.
Repeating a cancellation changes nothing (the first request's time and reason stay).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.errors import Conflict
from forge_ci.models import Run
from forge_ci.repos import find_repository
from forge_ci.runs.queries import find_run
from forge_ci.runs.scheduling import cancel_run_jobs, lock_run
from forge_ci.runs.transactions import begin_serialized


def cancel_run(session: Session, actor: Actor, full_name: str, number: int) -> Run:
    """Cancel run ``number``; Conflict when it has already completed. The caller commits."""
    repository = find_repository(session, actor, full_name, Role.ADMIN)
    run = find_run(session, repository, number)
    run_id = run.id
    begin_serialized(session)
    # Rechecked inside the write transaction: role and run state as they are now.
    repository = find_repository(session, actor, full_name, Role.ADMIN)
    run = lock_run(session, run_id)
    if run.state == states.COMPLETED:
        raise Conflict(
            f"run #{number} already completed ({run.conclusion}); there is nothing to cancel"
        )
    cancel_run_jobs(session, run, f"cancelled by {actor.name}")
    session.flush()
    return run
