"""The direct claim path's statements as the databases run them: the look's index, a missing
bind, and on PostgreSQL the pipelined start (its writes only when the job moved, and a retry
that races its twin replays the winner)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError

from forge_ci.coordinator import claims, direct_claims
from forge_ci.coordinator import direct_claim_sql as sql
from forge_ci.coordinator.claim_rows import CLAIMED_COLUMNS
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.driver_sql import Prepared, cursor_of
from forge_ci.models import Attempt, AttemptStep, Job, QueueCount, QueuedJob, Run
from forge_ci.models.base import table_of
from tests.forge_ci.coordinator.world import World, plan_job

LOOK_VALUES = {"provider_hash": "x", "request_id": "r", "digest": "d"}


@pytest.mark.parametrize("db_kind", ["sqlite"])
def test_the_look_finds_waiting_attempts_by_their_partial_index(world: World) -> None:
    """Without the index the look reads every attempt of the provider's history; SQLite takes
    a partial index unasked here, and no hint is needed (nor rendered: SQLite's compiler drops
    table hints)."""
    with world.database.engine.connect() as connection:
        look = Prepared(sql.look_statement(), connection.dialect)
        plan = connection.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + look.sql, look.parameters(LOOK_VALUES)
        ).all()
    details = [row[-1] for row in plan]
    assert any("ix_attempts_waiting" in detail for detail in details), details


def test_a_bind_without_a_value_is_an_error_not_a_null() -> None:
    touch = Prepared(sql.touch_statement(("last_contact_at",)), sqlite.dialect())
    with pytest.raises(KeyError, match="provider_pk"):
        touch.parameters({"last_contact_at": None})
    assert touch.parameters({"last_contact_at": None, "provider_pk": 3})  # given: accepted


@pytest.mark.parametrize("db_kind", ["postgres"])
def test_the_start_writes_nothing_when_the_job_is_no_longer_queued(world: World) -> None:
    run_id = world.queue_run(plan_job("a"), plan_job("b"))
    claimed = world.claim()  # a real attempt's values, for a second start of another job
    assert claimed is not None
    attempt = world.attempt(claimed.id)
    values = {name: getattr(attempt, name) for name in CLAIMED_COLUMNS}
    other = next(job for job in world.jobs_of(run_id) if job.id != attempt.job_id)
    engine = world.database.engine
    jobs = table_of(Job)
    with engine.begin() as connection:  # it left the queue by another way meanwhile
        connection.execute(update(jobs).where(jobs.c.id == other.id).values(state="running"))

    def counts(connection: Any) -> tuple[Any, ...]:
        return (
            connection.execute(select(Run.state, Run.revision).where(Run.id == run_id)).one(),
            connection.execute(select(func.count()).select_from(QueuedJob)).scalar(),
            connection.execute(select(func.sum(QueueCount.queued))).scalar(),
            connection.execute(select(func.count()).select_from(Attempt)).scalar(),
            connection.execute(select(func.count()).select_from(AttemptStep)).scalar(),
        )

    with engine.connect() as connection:
        before = counts(connection)
        start = sql.prepared(connection, sql.start_statement, False)
        moves = {"job_pk": other.id, "run_pk": run_id, "moved_at": world.clock()}
        fresh = {**values, "request_id": new_request_id(), "job_id": other.id, **moves}
        if world.database.engine.dialect.name == "postgresql":  # the steps ride on the start
            fresh.update(id=attempt.id + 1000, step_positions=[0], step_ids=["s"], step_names=["S"])
        assert start.execute(cursor_of(connection), fresh).fetchone() is None
        assert counts(connection) == before
        connection.rollback()


@pytest.mark.parametrize("db_kind", ["postgres"])
def test_a_retry_racing_its_twin_inside_the_look_replays_the_winners_attempt(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both pass the look; the loser's pipelined start raises the unique violation, which
    must be recognised as a lost race so that its next round replays the winner's attempt."""
    world.queue_run(plan_job("a"))
    world.queue_run(plan_job("b"))
    request_id, token = new_request_id(), new_token()
    real_look, twin, raced = direct_claims.look, [], []

    def look_then_twin(*args: Any, **kwargs: Any) -> Any:
        seen = real_look(*args, **kwargs)
        if not raced:
            raced.append(True)  # the twin's own look must not race again
            twin.append(world.claim(request_id=request_id, attempt_token=token))
        return seen

    real_lost, lost = claims._lost_race, []

    def recording(error: DBAPIError) -> bool:
        lost.append("WITH" in str(error.statement))
        return real_lost(error)

    monkeypatch.setattr(direct_claims, "look", look_then_twin)
    monkeypatch.setattr(claims, "_lost_race", recording)
    claimed = world.claim(request_id=request_id, attempt_token=token)
    assert lost and lost[0]  # raised by the pipelined start statement
    assert twin[0] is not None and claimed is not None
    assert claimed.assignment.attempt_id == twin[0].assignment.attempt_id
