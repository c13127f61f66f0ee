"""Each job's own entry of its run's plan (``jobs.plan``, migration 0011): copied when the job
is made, never changed nor missing (the model and the database refuse both), and what the
direct claim reads instead of the run's whole plan."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import insert, update
from sqlalchemy.exc import DBAPIError

from forge_ci.coordinator import claims, direct_claim_sql
from forge_ci.db import DriverConnection
from forge_ci.models import Job, Run
from tests.forge_ci.coordinator.world import World, plan_job


def _copies(world: World, run_id: int) -> list[Any]:
    with world.session(read_only=True) as session:
        return [job.plan for job in session.get_one(Run, run_id).jobs]


def test_each_job_is_made_with_its_own_entry_of_the_plan(world: World) -> None:
    entries = [plan_job("build"), plan_job("test", needs=("build",), steps=("unit", "lint"))]
    run_id = world.queue_run(*entries)
    assert _copies(world, run_id) == entries == world.run(run_id).plan["jobs"]


def test_a_jobs_copy_never_changes(world: World) -> None:
    run_id = world.queue_run(plan_job("build"))
    (job,) = world.jobs_of(run_id)
    with world.session() as session:
        loaded = session.get_one(Job, job.id)
        with pytest.raises(ValueError, match="snapshot"):
            loaded.plan = plan_job("other")
    with world.session() as session:  # past the model: the database refuses
        with pytest.raises(DBAPIError, match="never changes"):
            session.execute(update(Job).where(Job.id == job.id).values(plan=plan_job("other")))
    with world.session() as session:  # an update that leaves it as it was is no change
        session.execute(update(Job).where(Job.id == job.id).values(name="renamed"))
        session.commit()
    assert _copies(world, run_id) == [plan_job("build")]


@pytest.mark.parametrize("plan", ["omitted", None])
def test_a_job_is_never_made_without_its_copy(world: World, plan: str | None) -> None:
    run_id = world.queue_run(plan_job("build"))
    row: dict[str, Any] = {
        "run_id": run_id,
        "position": 1,
        "key": "late",
        "job_id": "late",
        "name": "late",
        "needs": [],
        "runs_on": [],
        "state": "waiting",
    }
    if plan != "omitted":
        row["plan"] = plan  # JSON null
    with world.session() as session:
        with pytest.raises(DBAPIError, match="jobs.plan|plan"):
            session.execute(insert(Job), [row])


def _orm_claims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the claims the ORM path makes."""
    made: list[int] = []
    real = claims.claim_once

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(claims, "claim_once", counted)
    return made


def test_the_direct_claim_reads_the_jobs_copy_not_the_runs_plan(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DriverConnection(world.database.engine) as connection:
        dialect = connection.dialect.name
        takes = [direct_claim_sql.prepared(connection, direct_claim_sql.take_statement, dialect, 1)]
        if dialect == "postgresql":
            takes.append(
                direct_claim_sql.prepared(connection, direct_claim_sql.first_free_take_statement)
            )
    for take in takes:
        assert re.search(r'jobs\.(plan|"plan") AS plan_job', take.sql)  # SQLite quotes it
        assert "runs.plan" not in take.sql and "json_extract" not in take.sql
    run_id = world.queue_run(plan_job("build", steps=("compile", "test"), timeout_minutes=7))
    orm = _orm_claims(monkeypatch)
    claimed = world.claim()
    assert claimed is not None and not orm  # the direct path made it
    assert [s.id for s in claimed.assignment.steps] == ["compile", "test"]
    assert claimed.assignment.timeout_minutes == 7
    assert world.jobs_of(run_id)[0].state == "running"
