"""Step states: in order, idempotent, and no job success the steps do not support."""

from __future__ import annotations

import pytest

from forge_ci.coordinator.service import AttemptRefused
from forge_ci.models import AttemptStep
from tests.forge_ci.coordinator.world import World, plan_job, step


def refused(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    with pytest.raises(AttemptRefused) as info:
        fn(*args, **kwargs)
    return info.value


def steps_of(world: World, attempt_id: int) -> list[tuple[str, str, str | None]]:
    with world.session() as session:
        rows = session.query(AttemptStep).filter(AttemptStep.attempt_id == attempt_id)
        return [(r.step_id, r.state, r.conclusion) for r in rows.order_by(AttemptStep.position)]


@pytest.fixture
def running(world: World):  # type: ignore[no-untyped-def]
    world.queue_run(plan_job("build", steps=("a", "b", "c")))
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    return claimed


def test_steps_run_in_order_and_repeats_are_acknowledged(world: World, running) -> None:  # type: ignore[no-untyped-def]
    assert refused(world.step, running, "b", "running").error.code == "step_conflict"
    world.step(running, "a", "running")
    world.step(running, "a", "running")  # repeat
    assert refused(world.step, running, "b", "running").error.code == "step_conflict"
    world.step(running, "a", "completed", "success", 0)
    world.step(running, "a", "completed", "success", 0)  # repeat
    conflict = refused(world.step, running, "a", "completed", "failure", 1)
    assert conflict.error.code == "step_conflict"
    assert refused(world.step, running, "a", "running").error.code == "step_conflict"
    assert refused(world.step, running, "nope", "running").error.code == "unknown_step"
    world.step(running, "b", "completed", "skipped")  # its condition was false
    assert refused(world.step, running, "c", "completed", "success", 0).error.code == (
        "step_conflict"
    )  # never started
    world.step(running, "c", "running")
    world.step(running, "c", "completed", "success", 0)
    world.complete(running, "success")
    assert steps_of(world, running.id) == [
        ("a", "completed", "success"),
        ("b", "completed", "skipped"),
        ("c", "completed", "success"),
    ]
    assert world.attempt(running.id).conclusion == "success"


def test_steps_need_the_bound_runner(world: World, running) -> None:  # type: ignore[no-untyped-def]
    running.execution_id = "f" * 32
    assert refused(world.step, running, "a", "running").error.code == "execution_mismatch"


def test_a_claimed_success_with_a_failed_step_is_recorded_as_failure(world: World, running) -> None:  # type: ignore[no-untyped-def]
    world.step(running, "a", "running")
    world.step(running, "a", "completed", "failure", 2)
    world.step(running, "b", "completed", "skipped")
    world.step(running, "c", "completed", "skipped")
    status = world.complete(running, "success")
    assert status.conclusion == "failure"
    attempt = world.attempt(running.id)
    assert attempt.reported_conclusion == "success"
    assert "step a ended with failure" in (attempt.status_reason or "")
    assert world.job(attempt.job_id).conclusion == "failure"


def test_a_success_with_unfinished_steps_is_a_failure_and_steps_are_finalized(
    world: World,
    running,  # type: ignore[no-untyped-def]
) -> None:
    world.step(running, "a", "running")
    assert world.complete(running, "success").conclusion == "failure"
    assert steps_of(world, running.id) == [
        ("a", "completed", "cancelled"),
        ("b", "completed", "skipped"),
        ("c", "completed", "skipped"),
    ]


def test_continue_on_error_forgives_a_failed_step(world: World) -> None:
    world.queue_run(
        plan_job("lint", step_specs=[step("flaky", continue_on_error=True), step("after")])
    )
    claimed = world.claim()
    assert claimed is not None
    assert claimed.assignment.steps[0].continue_on_error is True
    world.start(claimed)
    world.step(claimed, "flaky", "running")
    world.step(claimed, "flaky", "completed", "failure", 1, continue_on_error=True)
    world.step(claimed, "after", "running")
    world.step(claimed, "after", "completed", "success", 0)
    assert world.complete(claimed, "success").conclusion == "success"


def test_a_timed_out_attempt_records_the_running_step_as_timed_out(world: World) -> None:
    world.queue_run(plan_job("build", steps=("a", "b"), timeout_minutes=1))
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.step(claimed, "a", "running")
    world.clock.advance(45)
    world.heartbeat(claimed)
    world.clock.advance(20)
    assert refused(world.heartbeat, claimed).status.conclusion == "timed_out"
    assert steps_of(world, claimed.id) == [
        ("a", "completed", "timed_out"),
        ("b", "completed", "skipped"),
    ]
