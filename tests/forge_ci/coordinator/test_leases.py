"""Leases, deadlines, cancellation and recovery: the server decides, never the runner."""

from __future__ import annotations

import pytest

from forge_ci.coordinator.attempts import MAX_UNSTARTED
from forge_ci.coordinator.errors import AttemptEnded, BadCredential, ExecutionMismatch
from forge_ci.coordinator.providers import (
    revoke_provider,
    set_provider_access,
    set_provider_labels,
)
from forge_ci.coordinator.service import AttemptRefused
from forge_ci.coordinator.sweeper import Sweeper, sweep
from forge_ci.models import LogRecord
from forge_ci.protocol import HeartbeatRequest, StartRequest
from forge_ci.repos import revoke as revoke_membership
from forge_ci.runs.cancel import cancel_run
from tests.forge_ci.coordinator.world import LINUX, OPERATOR, World, plan_job


def refusal(call: object) -> AttemptRefused:
    assert isinstance(call, AttemptRefused)
    return call


def refused(fn, *args):  # type: ignore[no-untyped-def]
    with pytest.raises(AttemptRefused) as info:
        fn(*args)
    return info.value


def sweep_now(world: World) -> int:
    return Sweeper(world.database.session, clock=world.clock).run_once()


def notices(world: World, attempt_id: int) -> list[str]:
    with world.session() as session:
        return [
            r.text
            for r in session.query(LogRecord)
            .filter(LogRecord.attempt_id == attempt_id, LogRecord.stream == "system")
            .order_by(LogRecord.position)
        ]


def test_start_binds_one_runner_and_fixes_the_deadline(world: World) -> None:
    world.queue_run(plan_job(timeout_minutes=5))
    claimed = world.claim()
    assert claimed is not None
    world.clock.advance(10)
    status = world.start(claimed)
    assert status.state == "running" and status.execution_id == claimed.execution_id
    assert status.job_deadline_ms - status.server_time_ms == 5 * 60_000
    assert status.lease_deadline_ms - status.server_time_ms == 60_000
    # Repeating start is fine; another runner instance is refused.
    assert world.start(claimed).job_deadline_ms == status.job_deadline_ms
    other = world.coordinator
    error = refused(other.start, claimed.token, claimed.id, StartRequest("0" * 32))
    assert error.error.code == "execution_mismatch"


def test_heartbeats_renew_the_lease_up_to_the_deadline_then_time_out(world: World) -> None:
    world.queue_run(plan_job(timeout_minutes=2))
    claimed = world.claim()
    assert claimed is not None
    started = world.start(claimed)
    for _ in range(2):
        world.clock.advance(40)
        status = world.heartbeat(claimed)
        assert status.lease_deadline_ms == min(
            status.server_time_ms + 60_000, started.job_deadline_ms
        )
    assert status.lease_deadline_ms == started.job_deadline_ms  # capped at the deadline
    world.clock.advance(40)  # 120 s: the deadline is reached while the lease is valid
    error = refused(world.heartbeat, claimed)
    assert error.error.code == "attempt_ended"
    assert error.status.conclusion == "timed_out"
    attempt = world.attempt(claimed.id)
    assert attempt.conclusion == "timed_out"
    assert world.job(attempt.job_id).conclusion == "timed_out"
    assert any("time limit of 2 minutes" in text for text in notices(world, claimed.id))


def test_a_lost_lease_is_lost_never_success(world: World) -> None:
    run_id = world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.run_steps(claimed)
    world.clock.advance(61)
    assert sweep_now(world) == 1
    attempt = world.attempt(claimed.id)
    assert (attempt.state, attempt.conclusion) == ("completed", "lost")
    assert "heartbeats" in (attempt.status_reason or "")
    assert world.run(run_id).conclusion == "lost"
    # The runner comes back with a success: refused, nothing moves backwards.
    error = refused(world.complete, claimed)
    assert error.error.code == "attempt_ended"
    assert world.attempt(claimed.id).conclusion == "lost"


def test_leased_work_does_not_hold_a_lease_before_start(world: World) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    for _ in range(2):
        world.clock.advance(29)
        status = world.coordinator.heartbeat(claimed.token, claimed.id, HeartbeatRequest(""))
        assert status.state == "leased"
    assert status.lease_deadline_ms == claimed.assignment.lease_deadline_ms  # not renewed
    world.clock.advance(3)
    assert sweep_now(world) == 1
    assert "no runner started" in (world.attempt(claimed.id).status_reason or "")
    # A heartbeat naming an execution before start is refused.
    world.queue_run()
    second = world.claim()
    assert second is not None
    assert refused(world.heartbeat, second).error.code == "execution_mismatch"


def test_a_job_no_runner_started_is_queued_again_a_bounded_number_of_times(world: World) -> None:
    """Its provider vanished after the claim (nothing of the job ran): the attempt is lost but
    the job goes back to the queue, ahead of younger work, for a new attempt; the old
    credential is refused. After MAX_UNSTARTED such attempts in a row the job is lost; an
    attempt that started and was lost never gives its job back."""
    run_id = world.queue_run(plan_job("build"), plan_job("test"))
    for number in range(1, MAX_UNSTARTED + 1):
        claimed = world.claim()
        assert claimed is not None and claimed.assignment.job_key == "build"
        assert claimed.assignment.attempt_number == number
        # As on GitHub, only a rerun counts in run_attempt, not a requeue of one job.
        assert claimed.assignment.contexts["github"]["run_attempt"] == "1"
        world.clock.advance(61)
        assert sweep_now(world) == 1
        attempt = world.attempt(claimed.id)
        assert (attempt.state, attempt.conclusion) == ("completed", "lost")
        assert refused(world.start, claimed).error.code == "attempt_ended"
        build = world.jobs_of(run_id)[0]
        if number < MAX_UNSTARTED:
            assert "no runner started" in (attempt.status_reason or "")
            assert "queued again" in (attempt.status_reason or "")
            assert build.state == "queued" and build.started_at is None
    assert (build.state, build.conclusion) == ("completed", "lost")
    assert "queued again" not in (world.attempt(claimed.id).status_reason or "")
    started = world.claim()
    assert started is not None and started.assignment.job_key == "test"
    world.start(started)
    world.clock.advance(61)
    assert sweep_now(world) == 1
    assert [job.conclusion for job in world.jobs_of(run_id)] == ["lost", "lost"]
    assert world.run(run_id).conclusion == "lost"
    assert world.claim() is None


def test_cancel_acknowledged_within_grace_is_cancelled_with_the_outcome_kept(
    world: World,
) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.in_session(lambda s: cancel_run(s, OPERATOR, "alice/app", 1))
    world.clock.advance(5)
    status = world.heartbeat(claimed)
    assert status.cancel_requested and "cancelled by operator" in status.cancel_reason
    world.clock.advance(9)
    world.run_steps(claimed)
    status = world.complete(claimed, "success")
    assert status.conclusion == "cancelled"
    attempt = world.attempt(claimed.id)
    assert (attempt.conclusion, attempt.reported_conclusion) == ("cancelled", "success")
    assert world.job(attempt.job_id).conclusion == "cancelled"
    assert world.run(world.job(attempt.job_id).run_id).conclusion == "cancelled"


def test_cancel_not_confirmed_within_grace_is_lost_and_repeats_do_not_extend_it(
    world: World,
) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.in_session(lambda s: cancel_run(s, OPERATOR, "alice/app", 1))
    world.clock.advance(25)
    world.heartbeat(claimed)  # a heartbeat is no confirmation
    world.in_session(lambda s: cancel_run(s, OPERATOR, "alice/app", 1))  # repeated
    world.heartbeat(claimed)
    world.clock.advance(5)
    assert sweep_now(world) == 1
    attempt = world.attempt(claimed.id)
    assert attempt.conclusion == "lost"
    assert "not confirmed within 30 s" in (attempt.status_reason or "")


def test_repeated_job_cancel_requests_keep_the_first_deadline(world: World) -> None:
    from forge_ci.models import Job
    from forge_ci.runs.scheduling import request_job_cancel

    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    job_id = claimed.assignment.job_id

    def cancel(session):  # type: ignore[no-untyped-def]
        request_job_cancel(session, session.get(Job, job_id), "stop", world.clock())

    world.in_session(cancel)
    world.heartbeat(claimed)
    first = world.attempt(claimed.id).cancel_deadline_at
    world.clock.advance(10)
    world.in_session(cancel)
    world.heartbeat(claimed)
    assert world.attempt(claimed.id).cancel_deadline_at == first
    world.clock.advance(21)
    assert refused(world.heartbeat, claimed).status.conclusion == "lost"


def test_cancelling_leased_work_ends_it_at_once(world: World) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.in_session(lambda s: cancel_run(s, OPERATOR, "alice/app", 1))
    assert sweep_now(world) == 1
    attempt = world.attempt(claimed.id)
    assert attempt.conclusion == "cancelled"
    assert refused(world.start, claimed).error.code == "attempt_ended"


def test_revoking_a_provider_cancels_its_work_and_blocks_it(world: World) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    info, cancelled = world.in_session(lambda s: revoke_provider(s, OPERATOR, "p1", world.clock()))
    assert (info.state, cancelled) == ("revoked", 1)
    status = world.heartbeat(claimed)
    assert status.cancel_requested and "revoked" in status.cancel_reason
    assert "p1" not in status.cancel_reason  # readers of the run never learn provider names
    assert world.complete(claimed, "cancelled").conclusion == "cancelled"
    with pytest.raises(BadCredential):
        world.claim()


def test_a_label_change_cancels_only_work_that_no_longer_matches(world: World) -> None:
    world.queue_run(plan_job("plain"), plan_job("gpu", runs_on=(*LINUX, "gpu")))
    gpu = world.add_provider("gpu-box", "self-hosted,linux,gpu", scope="all")
    first = world.claim(provider_token=gpu)
    second = world.claim(provider_token=gpu)
    assert first is not None and second is not None
    keys = {first.assignment.job_key: first, second.assignment.job_key: second}
    for claimed in keys.values():
        world.start(claimed)
    info, cancelled = world.in_session(
        lambda s: set_provider_labels(s, OPERATOR, "gpu-box", " Linux,self-hosted ", world.clock())
    )
    assert (info.labels, cancelled) == (("linux", "self-hosted"), 1)
    status = world.heartbeat(keys["gpu"])
    assert status.cancel_requested and "no longer has label gpu" in status.cancel_reason
    assert "gpu-box" not in status.cancel_reason
    assert not world.heartbeat(keys["plain"]).cancel_requested
    # Until the cancelled attempt has ended, the provider claims nothing new.
    world.queue_run(plan_job("later"))
    assert world.claim(provider_token=gpu) is None
    world.complete(keys["gpu"], "cancelled")
    later = world.claim(provider_token=gpu)
    assert later is not None and later.assignment.job_key == "later"


def test_removing_repository_access_cancels_work_there(world: World) -> None:
    lib = world.add_provider("lib", scope="selected", repositories=("bob/lib", "alice/app"))
    world.queue_run(repository="bob/lib")
    claimed = world.claim(provider_token=lib)
    assert claimed is not None
    world.start(claimed)
    _, cancelled = world.in_session(
        lambda s: set_provider_access(s, OPERATOR, "lib", "selected", ["alice/app"], world.clock())
    )
    assert cancelled == 1
    reason = world.heartbeat(claimed).cancel_reason
    assert "no longer has access to this repository" in reason and "lib" not in reason


def test_a_requester_losing_permission_stops_running_work(world: World) -> None:
    world.queue_run(repository="bob/lib", requester="alice")
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.in_session(lambda s: revoke_membership(s, OPERATOR, "bob/lib", "alice"))
    status = world.heartbeat(claimed)
    assert status.cancel_requested and "may no longer run workflows" in status.cancel_reason


def test_stale_and_foreign_credentials_touch_nothing(world: World) -> None:
    world.queue_run(plan_job("a"), plan_job("b"))
    first = world.claim()
    second = world.claim()
    assert first is not None and second is not None
    world.start(first)
    world.start(second)
    # The first attempt's credential cannot act on the second attempt.
    with pytest.raises(BadCredential):
        world.coordinator.heartbeat(first.token, second.id, HeartbeatRequest(second.execution_id))
    with pytest.raises(BadCredential):
        world.coordinator.heartbeat(None, second.id, HeartbeatRequest(second.execution_id))
    with pytest.raises(BadCredential):
        world.coordinator.heartbeat(first.token, 999, HeartbeatRequest(first.execution_id))
    # After its attempt ended, a credential is stale: every mutation is refused.
    world.run_steps(first)
    world.complete(first)
    assert refused(world.heartbeat, first).error.code == "attempt_ended"
    assert refused(world.log, first, 1, "late\n").error.code == "attempt_ended"
    assert world.heartbeat(second).state == "running"


def test_completion_replay_is_identical_or_refused(world: World) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.run_steps(claimed)
    first = world.complete(claimed, "success")
    world.clock.advance(1)
    assert world.complete(claimed, "success").conclusion == first.conclusion
    error = refused(world.complete, claimed, "failure")
    assert error.error.code == "completion_conflict"


def test_the_sweeper_works_in_bounded_batches(world: World) -> None:
    world.queue_run(*[plan_job(f"j{i}") for i in range(5)])
    for _ in range(5):
        assert world.claim() is not None
    world.clock.advance(61)
    with world.session() as session:
        assert sweep(session, world.clock(), limit=2) == 2
        session.commit()
    assert sweep_now(world) == 3
    assert sweep_now(world) == 0


def test_a_refused_start_does_not_roll_back_the_verdict(world: World) -> None:
    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    world.clock.advance(61)
    error = refused(world.start, claimed)
    assert isinstance(error.error, AttemptEnded)
    assert world.attempt(claimed.id).conclusion == "lost"
    assert not isinstance(error.error, ExecutionMismatch)


def test_a_provider_may_fail_an_attempt_it_could_not_start(world: World) -> None:
    from forge_ci.protocol import CompleteRequest

    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    status = world.coordinator.complete(
        claimed.token, claimed.id, CompleteRequest("", "success", 0, {})
    )
    assert status.conclusion == "failure"  # nothing ran, so nothing can have succeeded
    assert "did not finish" in (world.attempt(claimed.id).status_reason or "")
    named = refused(
        world.coordinator.complete,
        claimed.token,
        claimed.id,
        CompleteRequest(claimed.execution_id, "failure", 0, {}),
    )
    assert named.error.code in ("completion_conflict", "attempt_ended")


def test_heartbeats_count_as_provider_contact(world: World) -> None:
    from forge_ci.coordinator.providers import show_provider

    world.queue_run()
    claimed = world.claim()
    assert claimed is not None
    claimed_at = world.clock()
    world.start(claimed)
    with world.session() as session:
        assert show_provider(session, OPERATOR, "p1").last_contact_at == claimed_at
    world.clock.advance(30)
    world.heartbeat(claimed)
    with world.session() as session:
        info = show_provider(session, OPERATOR, "p1")
    assert info.last_contact_at == world.clock()
    assert info.active_attempts == 1
