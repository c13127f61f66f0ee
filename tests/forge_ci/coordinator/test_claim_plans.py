"""The direct claim path's statements as the databases run them: the look's index, a missing
bind, and on PostgreSQL the pipelined start (its writes only when the job moved, and a retry
that races its twin replays the winner), the generic plans a claim runs on, and the prepared
statements a reader's end leaves in place."""

from __future__ import annotations

from datetime import timedelta
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
from forge_ci.models import Attempt, AttemptStep, Job, QueueCount, QueuedJob, Run, RunSequence
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
            connection.execute(select(RunSequence.repository_id, RunSequence.served_at)).all(),
        )

    with engine.connect() as connection:
        before = counts(connection)
        start = sql.prepared(connection, sql.start_statement, False)
        repository = connection.execute(
            select(Run.repository_id).where(Run.id == run_id)
        ).scalar_one()
        moves = {
            "job_pk": other.id,
            "run_pk": run_id,
            "repository_pk": repository,
            "moved_at": world.clock() + timedelta(seconds=1),  # later than the stamp there
        }
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


@pytest.mark.parametrize("db_kind", ["postgres"])
def test_claims_run_on_generic_plans_and_leave_the_plan_mode_to_their_transaction(
    world: World,
) -> None:
    """Planning the take cost about ten times running it, and the server's ``auto`` mode
    chose custom plans (planned for each claim) in some minutes and not in others. The claim
    transaction sets generic plans for itself: once psycopg has prepared a claim statement,
    every execution of it reuses its plan (no custom plan ever), and the setting ends with the
    transaction (the connection is back on ``auto`` for everything else)."""
    world.queue_run(*(plan_job(f"j{i}") for i in range(12)))
    for _ in range(12):
        assert world.claim() is not None
    pool = world.database.engine.pool
    connections = [world.database.engine.connect() for _ in range(pool.checkedin())]
    try:
        prepared = _prepared_statements(connections)
        # The look's own text, run outside a claim on each connection: there the server
        # chooses, and its first runs of a prepared statement are custom plans.
        look = Prepared(sql.look_statement(), connections[0].dialect)
        for connection in connections:
            for _ in range(6):
                connection.exec_driver_sql(look.sql, look.parameters(LOOK_VALUES)).all()
            connection.commit()  # it wrote nothing (psycopg's rollback deallocates all)
        outside = _prepared_statements(connections)
        modes = {c.exec_driver_sql("SHOW plan_cache_mode").scalar() for c in connections}
    finally:
        for connection in connections:
            connection.close()
    claim_statements = _claim_statements(prepared)
    assert len(claim_statements) == len(CLAIM_STATEMENTS), [row.statement[:40] for row in prepared]
    assert all(
        row.custom_plans == 0 and row.generic_plans > 0
        for rows in claim_statements.values()
        for row in rows
    ), claim_statements
    looks_outside = _claim_statements(outside).get("look", [])
    assert looks_outside and all(row.custom_plans > 0 for row in looks_outside), outside
    assert modes == {"auto"}


#: The look, the take (with its lock) and the start, by how each statement begins.
CLAIM_STATEMENTS = {"look": "SELECT providers.id", "take": "WITH free AS", "start": "WITH moved AS"}


def _claim_statements(prepared: list[Any]) -> dict[str, list[Any]]:
    """The claim's statements among ``prepared`` rows, by kind (kinds not found are absent)."""
    found: dict[str, list[Any]] = {}
    for row in prepared:
        for kind, start in CLAIM_STATEMENTS.items():
            if row.statement.startswith(start):
                found.setdefault(kind, []).append(row)
    return found


def _prepared_statements(connections: list[Any]) -> list[Any]:
    return [
        row
        for connection in connections
        for row in connection.exec_driver_sql(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).all()
    ]


@pytest.mark.parametrize("db_kind", ["postgres"])
def test_a_readers_end_leaves_the_claims_prepared_statements(world: World) -> None:
    """psycopg's rollback deallocates every prepared statement of the connection, and every
    reader's transaction ends in one: a page view between two claims made the next claims plan
    the take anew (5 ms a time). A reader's end keeps them; a writer's rollback is psycopg's."""
    world.queue_run(*(plan_job(f"j{i}") for i in range(8)))
    engine = world.database.engine

    def claim_statements() -> set[str]:
        with engine.connect() as connection:
            kept = set(_claim_statements(_prepared_statements([connection])))
            connection.commit()
        return kept

    for _ in range(7):
        assert world.claim() is not None
    assert engine.pool.checkedin() == 1  # one connection: the readers below use it too
    assert len(claim_statements()) == 3
    with world.session(read_only=True) as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 1
    with world.database.reading() as connection:
        assert connection.execute(select(func.count()).select_from(Job)).scalar() == 8
    assert len(claim_statements()) == 3
    with world.session() as session:  # a writer that rolls back: psycopg deallocates
        session.scalar(select(func.count()).select_from(Run))
        session.rollback()
    assert claim_statements() == set()
