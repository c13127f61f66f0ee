"""Statements on the bare cursor (forge_ci/coordinator/driver_sql.py) store and read what the
ORM does, and fail as SQLAlchemy's execution would (a lost claim race stays recognisable)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from forge_ci.coordinator import direct_claim_sql
from forge_ci.coordinator.claim_rows import CLAIMED_COLUMNS
from forge_ci.coordinator.claims import _lost_race
from forge_ci.coordinator.credentials import job_token, new_request_id, new_token, token_hash
from forge_ci.coordinator.driver_sql import Prepared, cursor_of, execute_together
from forge_ci.masking import MaskerCache
from forge_ci.models import Attempt, AttemptStep, Provider
from tests.forge_ci.coordinator.world import World, plan_job


def test_a_direct_claim_stores_what_the_models_read(world: World) -> None:
    world.queue_run(plan_job("build", steps=("one", "two")))
    claimed = world.claim()
    assert claimed is not None
    attempt = world.attempt(claimed.id)
    assert attempt.claimed_at == world.clock()  # a datetime as SQLite stores them, in UTC
    assert attempt.lease_expires_at > attempt.claimed_at
    assert attempt.log_mask == MaskerCache().get([claimed.token, job_token(claimed.token)]).mask
    assert attempt.job_token_hash == token_hash(job_token(claimed.token))
    with world.session(read_only=True) as session:
        steps = session.scalars(
            select(AttemptStep.step_id)
            .where(AttemptStep.attempt_id == claimed.id)
            .order_by(AttemptStep.position)
        ).all()
        assert steps == ["one", "two"]
        connection = session.connection()
        read = Prepared(
            select(Provider.id, Provider.last_contact_at).where(Provider.id == attempt.provider_id),
            connection.dialect,
        )
        row = read.first(cursor_of(connection), {})
        assert row.last_contact_at == world.clock()  # read back as the models do: aware, UTC


def test_a_duplicate_claim_fails_as_a_lost_race_not_a_driver_error(world: World) -> None:
    """Two identical retries racing on PostgreSQL both pass the look; the loser's insert must
    raise SQLAlchemy's IntegrityError so that its next round replays the winner's attempt."""
    world.queue_run(plan_job("build"))
    claimed = world.claim()
    assert claimed is not None
    with world.session() as session:
        attempt = session.get(Attempt, claimed.id)
        assert attempt is not None
        values = {name: getattr(attempt, name) for name in CLAIMED_COLUMNS}
        connection = session.connection()
        insert = Prepared(direct_claim_sql.insert_attempt(), connection.dialect)
        with pytest.raises(IntegrityError) as raised:
            insert.execute(cursor_of(connection), {**values, "number": attempt.number + 1})
        assert _lost_race(raised.value)
        session.rollback()
        # Refused: a conflict that is no claim's identity is a bug, raised as such.
        fresh = new_token()
        other = {
            **values,
            "request_id": new_request_id(),
            "token_hash": token_hash(fresh),
            "job_token_hash": token_hash(job_token(fresh)),
        }
        connection = session.connection()
        with pytest.raises(IntegrityError) as raised:
            insert.execute(cursor_of(connection), other)  # the same job and number
        assert not _lost_race(raised.value)
        session.rollback()


@pytest.mark.parametrize("db_kind", ["postgres"])
def test_statements_and_their_commit_together_are_one_round_trip(
    world: World, tmp_path: Path
) -> None:
    """One Sync for the statements and the COMMIT (libpq's trace of the wire), the rows still
    readable afterwards, and the transaction ended: SQLAlchemy's own commit is a no-op."""
    with world.database.engine.connect() as connection:
        connection.begin()
        read = Prepared(select(Provider.id), connection.dialect)
        read.rows(cursor_of(connection), {})  # the transaction has begun, as a claim's has
        driver = connection.connection.driver_connection
        trace = tmp_path / "wire.txt"
        with trace.open("w") as sink:
            driver.pgconn.trace(sink.fileno())
            driver.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            first, second = execute_together(connection, [(read, {}), (read, {})], commit=True)
            driver.pgconn.untrace()
        sent = [line.split("\t") for line in trace.read_text().splitlines()]
        assert [fields[2] for fields in sent if fields[0] == "F"].count("Sync") == 1
        assert first.fetchall() == second.fetchall() != []
        assert driver.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        connection.commit()


def test_a_pipelined_commit_is_postgresql_s_only(world: World) -> None:
    with world.database.engine.connect() as connection:
        read = Prepared(select(Provider.id), connection.dialect)
        if connection.dialect.name == "postgresql":
            return  # the case above
        with pytest.raises(ValueError, match="PostgreSQL"):
            execute_together(connection, [(read, {})], commit=True)
