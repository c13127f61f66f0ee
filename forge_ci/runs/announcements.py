"""What ``git push`` tells the pusher about the runs its push started.

After git has finished (the refs are updated and the events confirmed, pinned, committed and
enqueued) the SSH front door waits a short, bounded time for the worker to decide this push's
events, then prints one line per run created, or why none was::

    remote: forge-ci: run #3 of ci.yml: http://forge.example/alice/demo/pipelines/3
    remote: forge-ci: broken.yml is invalid (2 problems): http://forge.example/alice/demo/pipelines
    remote: forge-ci: no workflow matched the push to main
    remote: forge-ci: the push to main is being processed; its runs will appear at http://...

The worker usually decides within tens of milliseconds; when it is slow or not running, the
push ends after the ``push_report_wait`` setting's seconds anyway, saying where to look. Waiting
only reads (read-only sessions, no lock), so it delays no other push and no run creation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy import select

from forge_ci.authz import Actor
from forge_ci.db import SessionScope
from forge_ci.models import PushEventResult
from forge_ci.models.push_runs import DISABLED, FAILED, INVALID, PROCESSED, RUN_CREATED
from forge_ci.runs.queries import PushEventView, show_push_event

#: Polls start fast (the worker usually answers within tens of ms) and slow down to this.
_FIRST_POLL = 0.01
_MAX_POLL = 0.1


def await_decisions(
    session_scope: SessionScope,
    event_ids: Sequence[int],
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> set[int]:
    """Wait up to ``timeout`` s until every event has a recorded result; return those decided.

    Each poll is one indexed read in its own read-only session (never a writer transaction,
    which would block the worker that is about to record the result).
    """
    wanted = set(event_ids)
    deadline = clock() + timeout
    delay = _FIRST_POLL
    while True:
        with session_scope(read_only=True) as session:
            decided = set(
                session.scalars(
                    select(PushEventResult.push_event_id).where(
                        PushEventResult.push_event_id.in_(wanted)
                    )
                )
            )
        if decided == wanted:
            return decided
        left = deadline - clock()
        if left <= 0:
            return decided
        sleep(min(delay, left))
        delay = min(delay * 2, _MAX_POLL)


def announcement_lines(
    session_scope: SessionScope,
    actor: Actor,
    full_name: str,
    public_url: str,
    event_ids: Sequence[int],
    decided: set[int],
) -> list[str]:
    """The lines for the pusher (without ``remote:``), events in order; ``actor`` may read."""
    pipelines = f"{public_url.rstrip('/')}/{full_name}/pipelines"
    lines: list[str] = []
    with session_scope(read_only=True) as session:
        views = {
            event_id: show_push_event(session, actor, full_name, event_id) for event_id in event_ids
        }
    for event_id in event_ids:
        view = views[event_id]
        branch = view.ref.removeprefix("refs/heads/")
        if branch.startswith("refs/tags/"):
            branch = "tag " + branch.removeprefix("refs/tags/")
        if event_id not in decided:
            lines.append(
                f"forge-ci: the push to {branch} is being processed; its runs will appear at "
                f"{pipelines}"
            )
        else:
            lines += decided_lines(view, branch, pipelines)
    return lines


def decided_lines(view: PushEventView, branch: str, pipelines: str) -> list[str]:
    """What a decided push event started, one line each (none when push workflows are off)."""
    if view.result == DISABLED:
        return []  # push workflows are off: nothing was expected to run
    if view.result != PROCESSED:
        return [f"forge-ci: no workflow runs for the push to {branch}: {view.detail}"]
    lines = []
    for outcome in view.workflows:
        file = outcome.workflow_path.rsplit("/", 1)[-1]
        if outcome.outcome == RUN_CREATED and outcome.run_number is not None:
            number = outcome.run_number
            lines.append(f"forge-ci: run #{number} of {file}: {pipelines}/{number}")
        elif outcome.outcome == INVALID:
            count = len(outcome.diagnostics or ()) or 1
            problems = "problem" if count == 1 else "problems"
            lines.append(f"forge-ci: {file} is invalid ({count} {problems}): {pipelines}")
        elif outcome.outcome == FAILED:
            lines.append(f"forge-ci: {file} could not start a run: {outcome.detail}")
        elif outcome.detail.startswith("inert: "):
            lines.append(f"forge-ci: {file} is {outcome.detail}")
    if not lines:
        lines.append(f"forge-ci: no workflow matched the push to {branch}")
    return lines
