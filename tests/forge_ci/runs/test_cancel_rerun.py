"""Cancelling and rerunning runs, with their authorization and refusals."""

from __future__ import annotations

import pytest

from forge_ci.coordinator.contexts import github_context
from forge_ci.errors import Conflict, NotFound, PermissionDenied
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.queries import list_runs, show_run
from forge_ci.runs.rerun import rerun_run
from tests.forge_ci.runs.conftest import CI, Forge, job, workflow

PIPELINE = workflow(
    job(
        "build",
        body="    outputs:\n      artifact: ${{ steps.b.outputs.artifact }}",
    ).replace("- run: echo build", "- id: b\n        run: echo build")
    + job("test", needs="build", condition="needs.build.outputs.artifact == 'app-1'")
    + job("lint")
    + job("deploy", needs="[test, lint]")
    + job("notify", needs="deploy", condition="always()")
)


def _dispatch(forge: Forge) -> int:
    run = forge.dispatch()
    forge.session.commit()
    return run.number


def test_cancel_cancels_waiting_and_queued_jobs_and_requests_running_ones(forge: Forge) -> None:
    forge.commit({CI: PIPELINE})
    number = _dispatch(forge)
    forge.start(number, "build")
    for actor in ("bob", "dave"):
        with pytest.raises(PermissionDenied, match="admin access to alice/demo is required"):
            cancel_run(forge.session, forge.people[actor], "alice/demo", number)
        forge.session.rollback()
    with pytest.raises(NotFound, match="repository alice/demo not found"):
        cancel_run(forge.session, forge.people["erin"], "alice/demo", number)
    forge.session.rollback()
    with pytest.raises(NotFound, match="run #9 not found in alice/demo"):
        cancel_run(forge.session, forge.alice, "alice/demo", 9)
    forge.session.rollback()

    run = cancel_run(forge.session, forge.people["carol"], "alice/demo", number)
    forge.session.commit()
    assert run.cancel_reason == "cancelled by carol"
    assert forge.states(number) == {
        "build": "running",
        "test": "completed/cancelled",
        "lint": "completed/cancelled",
        "deploy": "completed/cancelled",
        "notify": "queued",  # if: always() -- its need ended, so it runs
    }
    build = forge.job(number, "build")
    requested = build.cancel_requested_at
    assert requested is not None and build.status_reason == "cancelled by carol"
    assert forge.run(number).state == "running"
    # Cancelling again neither fails nor extends the running job's window; it stops cleanup.
    cancel_run(forge.session, forge.alice, "alice/demo", number)
    forge.session.commit()
    assert forge.states(number)["notify"] == "completed/cancelled"
    assert forge.job(number, "build").cancel_requested_at == requested
    assert forge.run(number).cancel_reason == "cancelled by carol"
    # The runner reports the job stopped; the run completes as cancelled.
    forge.finish(number, "build", "failure")
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "cancelled")
    assert forge.job(number, "build").conclusion == "cancelled"
    with pytest.raises(Conflict, match="already completed \\(cancelled\\); there is nothing"):
        cancel_run(forge.session, forge.alice, "alice/demo", number)


def test_cleanup_and_notification_jobs_still_run_in_a_cancelled_run(forge: Forge) -> None:
    forge.commit(
        {
            CI: workflow(
                job("build")
                + job("cleanup", needs="build", condition="always()")
                + job("notify", needs="build", condition="cancelled()")
                + job("on-failure", needs="build", condition="failure()")
                + job("after", needs="build")
                + job("not-cancelled", needs="build", condition="${{ !cancelled() }}")
            )
        }
    )
    number = _dispatch(forge)
    forge.start(number, "build")
    cancel_run(forge.session, forge.alice, "alice/demo", number)
    forge.session.commit()
    # Jobs whose condition may still hold wait for build; the others are cancelled at once.
    assert forge.states(number) == {
        "build": "running",
        "cleanup": "waiting",
        "notify": "waiting",
        "on-failure": "waiting",
        "after": "completed/cancelled",
        "not-cancelled": "waiting",
    }
    forge.finish(number, "build", "success")  # after the request: recorded as cancelled
    assert forge.states(number) == {
        "build": "completed/cancelled",
        "cleanup": "queued",
        "notify": "queued",
        "on-failure": "completed/cancelled",  # nothing failed
        "after": "completed/cancelled",
        "not-cancelled": "completed/cancelled",
    }
    assert forge.job(number, "on-failure").status_reason == "cancelled by alice"
    assert forge.run(number).state == "running"
    forge.start(number, "cleanup")
    forge.finish(number, "cleanup")
    forge.start(number, "notify")
    forge.finish(number, "notify")
    assert forge.states(number)["cleanup"] == "completed/success"
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "cancelled")


def test_active_runs_cannot_be_rerun(forge: Forge) -> None:
    forge.commit({CI: PIPELINE})
    number = _dispatch(forge)
    with pytest.raises(Conflict, match="run #1 is still queued; only a completed run can be"):
        rerun_run(forge.session, forge.settings, forge.alice, "alice/demo", number)
    forge.start(number, "build")
    with pytest.raises(Conflict, match="run #1 is still running"):
        rerun_run(forge.session, forge.settings, forge.alice, "alice/demo", number)


def test_rerun_needs_an_owner_or_admin(forge: Forge) -> None:
    forge.commit({CI: workflow(job("a"))})
    number = _dispatch(forge)
    forge.finish(number, "a")
    with pytest.raises(PermissionDenied):
        rerun_run(forge.session, forge.settings, forge.people["bob"], "alice/demo", number)
    with pytest.raises(NotFound):
        rerun_run(forge.session, forge.settings, forge.people["erin"], "alice/demo", number)
    rerun = rerun_run(forge.session, forge.settings, forge.people["carol"], "alice/demo", number)
    assert rerun.requested_by_name == "carol"
    with pytest.raises(Conflict, match="has no failed, cancelled, timed-out or lost job"):
        rerun_run(
            forge.session, forge.settings, forge.alice, "alice/demo", number, failed_only=True
        )


def test_rerun_failed_reuses_succeeded_jobs_and_their_outputs(forge: Forge) -> None:
    forge.commit({CI: PIPELINE})
    number = _dispatch(forge)
    forge.finish(number, "build", outputs={"artifact": "app-1"})
    forge.finish(number, "lint")
    forge.finish(number, "test", "timed_out")
    forge.finish(number, "notify")
    assert forge.states(number) == {
        "build": "completed/success",
        "test": "completed/timed_out",
        "lint": "completed/success",
        "deploy": "completed/skipped",
        "notify": "completed/success",
    }
    assert forge.run(number).conclusion == "timed_out"

    again = rerun_run(
        forge.session, forge.settings, forge.alice, "alice/demo", number, failed_only=True
    )
    forge.session.commit()
    assert again.number == 2
    # build and lint are reused with their results; test and everything after it run again.
    # test's condition reads build's reused outputs, so it is queued.
    assert forge.states(2) == {
        "build": "completed/success",
        "test": "queued",
        "lint": "completed/success",
        "deploy": "waiting",
        "notify": "waiting",
    }
    build = forge.job(2, "build")
    assert build.reused_from_id == forge.job(1, "build").id
    assert build.status_reason == "reused from run #1"
    assert {o.name: o.value for o in build.outputs} == {"artifact": "app-1"}
    assert forge.run(2).state == "queued"  # nothing has run in this run yet
    forge.finish(2, "test")
    forge.finish(2, "deploy")
    forge.finish(2, "notify")
    assert forge.run(2).conclusion == "success"

    # A full rerun starts every job afresh.
    full = rerun_run(forge.session, forge.settings, forge.alice, "alice/demo", 2)
    forge.session.commit()
    # As on GitHub, every rerun keeps the first run's number and counts in run_attempt.
    github = {n: github_context(forge.run(n), forge.job(n, "build")) for n in (1, 2, 3)}
    assert [(g["run_number"], g["run_attempt"]) for g in github.values()] == [
        ("1", "1"),
        ("1", "2"),
        ("1", "3"),
    ]
    assert len({g["run_id"] for g in github.values()}) == 3  # each run is a run of its own
    assert forge.states(full.number) == {
        "build": "queued",
        "test": "waiting",
        "lint": "queued",
        "deploy": "waiting",
        "notify": "waiting",
    }


def test_reads_are_scoped_by_repository_and_readable_by_readers(forge: Forge) -> None:
    forge.commit({CI: workflow(job("a") + job("b", needs="a"))})
    _dispatch(forge)
    _dispatch(forge)
    views = list_runs(forge.session, forge.people["dave"], "alice/demo")
    assert [v.number for v in views] == [2, 1]
    detail = show_run(forge.session, forge.people["dave"], "alice/demo", 1).as_dict()
    assert {k: detail[k] for k in ("number", "state", "conclusion", "event_name")} == {
        "number": 1,
        "state": "queued",
        "conclusion": None,
        "event_name": "workflow_dispatch",
    }
    assert [(j["key"], j["state"], j["needs"]) for j in detail["jobs"]] == [
        ("a", "queued", []),
        ("b", "waiting", ["a"]),
    ]
    with pytest.raises(NotFound, match="repository alice/demo not found"):
        list_runs(forge.session, forge.people["erin"], "alice/demo")
    with pytest.raises(NotFound, match="repository alice/demo not found"):
        show_run(forge.session, forge.people["erin"], "alice/demo", 1)
