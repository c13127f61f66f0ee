"""Each job's own entry of its run's plan (``jobs.plan``, migration 0011): copied when the job
is made, read by the direct claim instead of the run's whole plan, and a job without its copy
still claimed, from the run's plan, by the ORM path."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from forge_ci.coordinator import claims
from forge_ci.models import Job, Run
from tests.forge_ci.coordinator.world import World, plan_job, step


def _copies(world: World, run_id: int) -> list[Any]:
    with world.session(read_only=True) as session:
        return [job.plan for job in session.get_one(Run, run_id).jobs]


def test_each_job_is_made_with_its_own_entry_of_the_plan(world: World) -> None:
    entries = [plan_job("build"), plan_job("test", needs=("build",), steps=("unit", "lint"))]
    run_id = world.queue_run(*entries)
    assert _copies(world, run_id) == entries == world.run(run_id).plan["jobs"]


def _set_copy(world: World, job_id: int, entry: dict[str, Any] | None) -> None:
    with world.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(plan=entry))
        session.commit()


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
    """White-box: a copy that differed (it never does) is what the claim runs, so the run's
    whole plan is not what it read."""
    run_id = world.queue_run(plan_job("build", steps=("compile", "test")))
    (job,) = world.jobs_of(run_id)
    _set_copy(world, job.id, plan_job("build", step_specs=[step("from-the-copy")]))
    orm = _orm_claims(monkeypatch)
    claimed = world.claim()
    assert claimed is not None and not orm
    assert [s.id for s in claimed.assignment.steps] == ["from-the-copy"]


def test_a_job_without_its_copy_is_claimed_from_the_runs_plan(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose row holds JSON null (a run whose plan had no entry for it when migration
    0011 ran): the direct path leaves it to the ORM path, which reads the run's plan."""
    run_id = world.queue_run(plan_job("build", steps=("compile", "test"), timeout_minutes=7))
    (job,) = world.jobs_of(run_id)
    _set_copy(world, job.id, None)
    orm = _orm_claims(monkeypatch)
    claimed = world.claim()
    assert claimed is not None and orm == [1]
    assert [s.id for s in claimed.assignment.steps] == ["compile", "test"]
    assert claimed.assignment.timeout_minutes == 7
    assert world.jobs_of(run_id)[0].state == "running"
