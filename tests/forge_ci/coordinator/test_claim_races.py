"""Interleavings driven step by step: another transaction commits between a claim's or a
reconciliation's first read and its lock, and the outcome is the one of the sequential order.

PostgreSQL only: on SQLite both transactions hold the database's write lock from their first
statement, so nothing can commit in between: these interleavings cannot be produced there, and
the module runs on PostgreSQL alone (``db_kind`` narrowed below, not skipped).
"""

from __future__ import annotations

from typing import Any

import pytest

from forge_ci.coordinator import attempts, direct_claims
from forge_ci.db import begin_write
from forge_ci.models import Attempt, Job
from forge_ci.runs.scheduling import request_job_cancel
from tests.forge_ci.coordinator.world import World, plan_job

BARE = ("self-hosted",)


pytestmark = pytest.mark.parametrize("db_kind", ["postgres"])


def test_a_claim_takes_the_oldest_job_of_its_label_sets_as_of_its_lock(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = world.add_provider("p2", scope="all")
    # alice/app: label set X's head is the oldest, then Y's, then X's second job.
    x1 = world.queue_run(plan_job("x1"))
    world.clock.advance(1)
    y1 = world.queue_run(plan_job("y1", runs_on=BARE))
    world.clock.advance(1)
    world.queue_run(plan_job("x2"))
    real_look = direct_claims.look
    raced: list[Any] = []

    def look_then_race(*args: Any) -> Any:
        seen = real_look(*args)
        if not raced:  # between our first read and our repository lock, p2 takes X's head
            raced.append(True)
            raced.append(world.claim(other))
        return seen

    monkeypatch.setattr(direct_claims, "look", look_then_race)
    claimed = world.claim()
    assert raced[1] is not None and raced[1].assignment.job_id == world.jobs_of(x1)[0].id
    # Y's head is now older than X's: passing over it for x2 would break the queue's order.
    assert claimed is not None and claimed.assignment.job_id == world.jobs_of(y1)[0].id


def _lost_before_start_with_a_cancel(
    world: World, monkeypatch: pytest.MonkeyPatch, *, between: bool
) -> Attempt:
    """A claimed attempt whose start window runs out, its job cancelled either before the
    reconciliation (``between=False``) or by another transaction that commits after the
    reconciliation read the job and its verdict, before it locks the run."""
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.clock.advance(61)
    job_id = claimed.assignment.job_id

    def cancel(session: Any) -> None:
        request_job_cancel(session, session.get(Job, job_id), "cancelled by alice", world.clock())

    if between:
        real_verdict = attempts.due_verdict
        raced: list[bool] = []

        def verdict_then_race(*args: Any) -> Any:
            verdict = real_verdict(*args)
            if not raced:
                raced.append(True)
                world.in_session(cancel)
            return verdict

        monkeypatch.setattr(attempts, "due_verdict", verdict_then_race)
    else:
        world.in_session(cancel)
    with world.session() as session:
        begin_write(session)
        attempt = session.get(Attempt, claimed.id)
        assert attempt is not None
        attempts.reconcile(session, attempt, world.clock())
        session.commit()
    return world.attempt(claimed.id)


def test_a_cancel_committed_during_an_unstarted_requeue_decides_instead_of_failing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    raced = _lost_before_start_with_a_cancel(world, monkeypatch, between=True)
    job = world.job(raced.job_id)
    assert (raced.state, raced.conclusion) == ("completed", "cancelled")
    assert (job.state, job.conclusion) == ("completed", "cancelled")  # not queued again
    assert world.claim() is None


def test_the_sequential_order_gives_the_same_outcome(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _lost_before_start_with_a_cancel(world, monkeypatch, between=False)
    job = world.job(first.job_id)
    assert (first.state, first.conclusion) == ("completed", "cancelled")
    assert (job.state, job.conclusion) == ("completed", "cancelled")
    assert world.claim() is None
