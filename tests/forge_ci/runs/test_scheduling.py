"""DAG scheduling on the server: fan-out/in, skips, status functions, outputs, matrix, groups."""

from __future__ import annotations

import pytest

from forge_ci.errors import Conflict, InvalidInput
from forge_ci.runs.scheduling import complete_job, request_job_cancel, start_job
from tests.forge_ci.runs.conftest import CI, Forge, job, workflow

MATRIX = "    strategy:\n      matrix:\n        n: [1, 2, 3]\n"


def _run(forge: Forge, text: str) -> int:
    forge.commit({CI: text})
    run = forge.dispatch()
    forge.session.commit()
    return run.number


def test_fan_out_and_fan_in(forge: Forge) -> None:
    number = _run(
        forge,
        workflow(
            job("build")
            + job("unit", needs="build")
            + job("lint", needs="build")
            + job("deploy", needs="[unit, lint]")
        ),
    )
    assert forge.states(number) == {
        "build": "queued",
        "unit": "waiting",
        "lint": "waiting",
        "deploy": "waiting",
    }
    assert forge.run(number).state == "queued"
    forge.start(number, "build")
    assert forge.run(number).state == "running"
    forge.finish(number, "build")
    assert forge.states(number)["unit"] == "queued" and forge.states(number)["lint"] == "queued"
    forge.finish(number, "unit")
    assert forge.states(number)["deploy"] == "waiting"  # fan-in waits for every dependency
    forge.finish(number, "lint")
    assert forge.states(number)["deploy"] == "queued"
    forge.finish(number, "deploy")
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "success")
    assert run.started_at is not None and run.completed_at is not None


def test_a_failed_dependency_skips_its_dependents_through_deeper_branches(forge: Forge) -> None:
    number = _run(
        forge,
        workflow(
            job("build")
            + job("test", needs="build")
            + job("package", needs="test")
            + job("publish", needs="package")
            + job("docs")
        ),
    )
    forge.finish(number, "build", "failure")
    # One completion, one transaction: the whole branch is skipped, with the reason.
    assert forge.states(number) == {
        "build": "completed/failure",
        "test": "completed/skipped",
        "package": "completed/skipped",
        "publish": "completed/skipped",
        "docs": "queued",
    }
    assert forge.job(number, "test").status_reason == "skipped: needs build (failure)"
    assert forge.job(number, "publish").status_reason == "skipped: needs package (skipped)"
    assert forge.run(number).state == "running"  # docs is still to run
    forge.finish(number, "docs")
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "failure")


@pytest.mark.parametrize(
    "outcome,expected",
    [
        (
            "failure",
            {
                "cleanup": "queued",
                "on-failure": "queued",
                "on-success": "completed/skipped",
                "default": "completed/skipped",
                "was-cancelled": "completed/skipped",
            },
        ),
        (
            "success",
            {
                "cleanup": "queued",
                "on-failure": "completed/skipped",
                "on-success": "queued",
                "default": "queued",
                "was-cancelled": "completed/skipped",
            },
        ),
        (
            "timed_out",  # reads as failure to the status functions
            {
                "cleanup": "queued",
                "on-failure": "queued",
                "on-success": "completed/skipped",
                "default": "completed/skipped",
                "was-cancelled": "completed/skipped",
            },
        ),
    ],
)
def test_status_functions_on_the_server(
    forge: Forge, outcome: str, expected: dict[str, str]
) -> None:
    number = _run(
        forge,
        workflow(
            job("build")
            + job("cleanup", needs="build", condition="always()")
            + job("on-failure", needs="build", condition="${{ failure() }}")
            + job("on-success", needs="build", condition="success()")
            + job("default", needs="build")
            + job("was-cancelled", needs="build", condition="cancelled()")
        ),
    )
    forge.finish(number, "build", outcome)
    states = forge.states(number)
    del states["build"]
    assert states == expected
    if outcome == "success":
        assert forge.job(number, "on-failure").status_reason == (
            "skipped: the condition `failure()` is false"
        )


def test_failure_looks_through_the_whole_chain(forge: Forge) -> None:
    """A job after a failure() handler still sees the original failure among its ancestors."""
    number = _run(
        forge,
        workflow(
            job("build")
            + job("report", needs="build", condition="failure()")
            + job("after-report", needs="report")
            + job("always-last", needs="after-report", condition="always()")
        ),
    )
    forge.finish(number, "build", "failure")
    assert forge.states(number)["report"] == "queued"
    forge.finish(number, "report")
    states = forge.states(number)
    assert states["after-report"] == "completed/skipped"
    assert forge.job(number, "after-report").status_reason == (
        "skipped: an earlier job did not succeed"
    )
    assert states["always-last"] == "queued"
    forge.finish(number, "always-last")
    assert forge.run(number).conclusion == "failure"


def test_needs_results_and_outputs_feed_conditions(forge: Forge) -> None:
    build = job(
        "build",
        body="    outputs:\n      deploy: ${{ steps.decide.outputs.deploy }}\n"
        "      channel: ${{ steps.decide.outputs.channel }}",
    ).replace("- run: echo build", "- id: decide\n        run: echo build")
    number = _run(
        forge,
        workflow(
            build
            + job("deploy", needs="build", condition="needs.build.outputs.deploy == 'yes'")
            + job("beta", needs="build", condition="needs.build.outputs.channel == 'beta'")
            + job("result", needs="build", condition="needs.build.result == 'success'")
            + job("sha", needs="build", condition="startsWith(github.sha, '0000')")
        ),
    )
    with pytest.raises(InvalidInput, match="declares no output named 'secret'"):
        forge.finish(number, "build", outputs={"deploy": "yes", "secret": "x"})
    forge.session.rollback()
    forge.finish(number, "build", outputs={"deploy": "yes", "channel": "stable"})
    states = forge.states(number)
    assert states["deploy"] == "queued"
    assert states["beta"] == "completed/skipped"
    assert states["result"] == "queued"
    assert states["sha"] == "completed/skipped"
    assert forge.job(number, "beta").status_reason == (
        "skipped: the condition `success() && (needs.build.outputs.channel == 'beta')` is false"
    )
    assert {o.name: o.value for o in forge.job(number, "build").outputs} == {
        "channel": "stable",
        "deploy": "yes",
    }


def test_root_conditions_are_evaluated_at_creation(forge: Forge) -> None:
    number = _run(
        forge,
        workflow(
            job("never", condition="false")
            + job("dispatch-only", condition="github.event_name == 'workflow_dispatch'")
            + job("after-never", needs="never", condition="always()")
        ),
    )
    assert forge.states(number) == {
        "never": "completed/skipped",
        "dispatch-only": "queued",
        "after-never": "queued",
    }


def test_a_run_whose_jobs_are_all_skipped_is_skipped_not_successful(forge: Forge) -> None:
    number = _run(forge, workflow(job("a", condition="false") + job("b", needs="a")))
    run = forge.run(number)
    assert (run.state, run.conclusion, run.started_at) == ("completed", "skipped", None)


def test_a_condition_that_fails_to_evaluate_fails_the_job(forge: Forge) -> None:
    number = _run(forge, workflow(job("a") + job("b", needs="a", condition="fromJSON('{')")))
    forge.finish(number, "a")
    job_b = forge.job(number, "b")
    assert (job_b.state, job_b.conclusion) == ("completed", "failure")
    assert job_b.status_reason is not None
    assert job_b.status_reason.startswith("the job's if condition could not be evaluated")
    assert forge.run(number).conclusion == "failure"


def test_a_needs_on_a_matrix_waits_for_every_leg(forge: Forge) -> None:
    number = _run(forge, workflow(job("m", body=MATRIX) + job("after", needs="m")))
    assert forge.states(number) == {
        "m (1)": "queued",
        "m (2)": "queued",
        "m (3)": "queued",
        "after": "waiting",
    }
    forge.finish(number, "m (1)")
    forge.finish(number, "m (3)")
    assert forge.states(number)["after"] == "waiting"
    forge.finish(number, "m (2)")
    assert forge.states(number)["after"] == "queued"


def test_fail_fast_cancels_queued_legs_and_requests_cancel_of_running_ones(forge: Forge) -> None:
    number = _run(
        forge,
        workflow(job("m", body=MATRIX) + job("after", needs="m", condition="always()")),
    )
    forge.start(number, "m (1)")
    forge.start(number, "m (2)")
    forge.finish(number, "m (1)", "failure")
    states = forge.states(number)
    assert states["m (3)"] == "completed/cancelled"
    assert states["m (2)"] == "running"
    running = forge.job(number, "m (2)")
    assert running.cancel_requested_at is not None
    assert running.status_reason == "cancelled by fail-fast: m (1) ended with failure"
    assert states["after"] == "waiting"  # m (2) has not stopped yet
    # The running leg reports success after the request: it is recorded as cancelled.
    forge.finish(number, "m (2)", "success")
    assert forge.states(number)["m (2)"] == "completed/cancelled"
    assert forge.states(number)["after"] == "queued"
    forge.finish(number, "after")
    assert forge.run(number).conclusion == "failure"


def test_without_fail_fast_the_other_legs_go_on(forge: Forge) -> None:
    body = "    strategy:\n      fail-fast: false\n      matrix:\n        n: [1, 2]\n"
    number = _run(forge, workflow(job("m", body=body)))
    forge.finish(number, "m (1)", "failure")
    assert forge.states(number)["m (2)"] == "queued"
    assert forge.job(number, "m (2)").cancel_requested_at is None


def test_max_parallel_limits_queued_legs(forge: Forge) -> None:
    body = "    strategy:\n      max-parallel: 1\n      matrix:\n        n: [1, 2, 3]\n"
    number = _run(forge, workflow(job("m", body=body)))
    assert list(forge.states(number).values()) == ["queued", "waiting", "waiting"]
    forge.finish(number, "m (1)")
    assert list(forge.states(number).values()) == ["completed/success", "queued", "waiting"]


GROUP = "concurrency:\n  group: deploy-${{ github.repository }}\n  cancel-in-progress: {}\n"


def test_cancel_in_progress_supersedes_the_earlier_run(forge: Forge) -> None:
    text = workflow(job("a") + job("b", needs="a"), extra=GROUP.replace("{}", "true"))
    first = _run(forge, text)
    forge.start(first, "a")
    second = forge.dispatch()
    forge.session.commit()
    old = forge.run(first)
    assert old.cancel_reason == (
        f"superseded by run #{second.number} in concurrency group deploy-alice/demo"
    )
    assert forge.states(first) == {"a": "running", "b": "completed/cancelled"}
    assert forge.job(first, "a").cancel_requested_at is not None
    assert forge.states(second.number) == {"a": "queued", "b": "waiting"}
    assert old.state == "running"
    forge.finish(first, "a", "success")  # finished after the request: cancelled
    old = forge.run(first)
    assert (old.state, old.conclusion) == ("completed", "cancelled")
    assert forge.job(first, "a").conclusion == "cancelled"


def test_without_cancel_in_progress_a_new_run_waits_for_the_group(forge: Forge) -> None:
    text = workflow(job("a"), extra=GROUP.replace("{}", "false"))
    first = _run(forge, text)
    second = forge.dispatch().number
    third = forge.dispatch().number
    forge.session.commit()
    assert forge.states(second) == {"a": "waiting"}
    assert forge.run(second).concurrency_blocked and forge.run(third).concurrency_blocked
    forge.finish(first, "a")
    assert forge.states(second) == {"a": "queued"}
    assert not forge.run(second).concurrency_blocked
    assert forge.states(third) == {"a": "waiting"}  # still one at a time
    forge.finish(second, "a", "failure")
    assert forge.states(third) == {"a": "queued"}


def test_terminal_states_never_move_backwards(forge: Forge) -> None:
    number = _run(forge, workflow(job("a") + job("b", needs="a")))
    forge.finish(number, "a", "failure")
    job_a = forge.job(number, "a")
    complete_job(forge.session, job_a, "failure")  # an identical replay changes nothing
    with pytest.raises(Conflict, match="already completed \\(failure\\); it cannot become success"):
        complete_job(forge.session, job_a, "success")
    with pytest.raises(Conflict, match="a completed job cannot become running"):
        start_job(forge.session, job_a)
    other = _run(forge, workflow(job("x") + job("y", needs="x")))
    with pytest.raises(Conflict, match="was never queued"):
        complete_job(forge.session, forge.job(other, "y"), "success")
    forge.session.rollback()
    request_job_cancel(forge.session, forge.job(number, "b"), "late")  # completed: no change
    assert forge.job(number, "b").conclusion == "skipped"
    with pytest.raises(InvalidInput, match="not a conclusion a job can report"):
        complete_job(forge.session, forge.job(number, "a"), "skipped")
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "failure")


def test_waiting_and_queued_jobs_cancel_at_once(forge: Forge) -> None:
    number = _run(forge, workflow(job("a") + job("b", needs="a")))
    request_job_cancel(forge.session, forge.job(number, "a"), "no longer needed")
    forge.session.commit()
    assert forge.states(number) == {"a": "completed/cancelled", "b": "completed/skipped"}
    assert forge.run(number).conclusion == "cancelled"


def test_a_waiting_run_can_be_cancelled_and_the_group_moves_on(forge: Forge) -> None:
    from forge_ci.runs.cancel import cancel_run

    text = workflow(job("a"), extra=GROUP.replace("{}", "false"))
    first = _run(forge, text)
    second = forge.dispatch().number
    third = forge.dispatch().number
    forge.session.commit()
    cancel_run(forge.session, forge.alice, "alice/demo", second)
    forge.session.commit()
    run = forge.run(second)
    assert (run.state, run.conclusion) == ("completed", "cancelled")
    assert forge.states(third) == {"a": "waiting"}  # the first run still holds the group
    forge.finish(first, "a")
    assert forge.states(third) == {"a": "queued"}
