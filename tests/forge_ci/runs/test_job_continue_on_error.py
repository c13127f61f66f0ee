"""A job's ``continue-on-error``: a failed job counts as a success, as on GitHub.

GitHub reports such a job's ``needs.<id>.result`` as success and lets the run pass; the job's
reason here says what really happened. The value may be true, a matrix expression decided in the
plan, or an expression of github/needs decided when the job ends. Both databases.
"""

from __future__ import annotations

import pytest

from forge_ci.errors import Conflict
from forge_ci.runs.scheduling import complete_job
from tests.forge_ci.runs.conftest import Forge, job, workflow
from tests.forge_ci.runs.test_scheduling import _run


def test_a_forgiven_failure_lets_dependents_run_and_the_run_pass(forge: Forge) -> None:
    number = _run(
        forge,
        workflow(
            job("flaky", body="    continue-on-error: true")
            + job("after", needs="flaky", condition="needs.flaky.result == 'success'")
        ),
    )
    forge.finish(number, "flaky", "failure")
    flaky = forge.job(number, "flaky")
    assert flaky.conclusion == "success"
    assert flaky.status_reason == "ended with failure; continue-on-error counts it as a success"
    assert forge.states(number)["after"] == "queued"
    # A replay of the failure report is the same completion, not a conflict.
    complete_job(forge.session, forge.job(number, "flaky"), "failure")
    forge.session.commit()
    forge.finish(number, "after")
    run = forge.run(number)
    assert (run.state, run.conclusion) == ("completed", "success")


def test_without_continue_on_error_the_failure_stands(forge: Forge) -> None:
    number = _run(forge, workflow(job("strict", body="    continue-on-error: false") + job("b")))
    forge.finish(number, "strict", "failure")
    assert forge.job(number, "strict").conclusion == "failure"
    with pytest.raises(Conflict):
        complete_job(forge.session, forge.job(number, "strict"), "success")
    forge.session.rollback()
    forge.finish(number, "b")
    assert forge.run(number).conclusion == "failure"


def test_cancellation_is_never_forgiven(forge: Forge) -> None:
    number = _run(forge, workflow(job("a", body="    continue-on-error: true")))
    forge.finish(number, "a", "cancelled")
    assert forge.job(number, "a").conclusion == "cancelled"


def test_a_matrix_expression_forgives_only_its_legs(forge: Forge) -> None:
    body = (
        "    strategy:\n      fail-fast: false\n      matrix:\n        exp: [true, false]\n"
        "    continue-on-error: ${{ matrix.exp }}"
    )
    number = _run(forge, workflow(job("t", body=body)))
    forge.finish(number, "t (true)", "failure")
    forge.finish(number, "t (false)", "timed_out")
    assert forge.states(number) == {
        "t (true)": "completed/success",
        "t (false)": "completed/timed_out",
    }
    assert forge.run(number).conclusion == "timed_out"


def test_an_expression_of_github_is_decided_when_the_job_ends(forge: Forge) -> None:
    body = "    continue-on-error: ${{ github.event_name == 'workflow_dispatch' }}"
    other = "    continue-on-error: ${{ github.event_name == 'push' }}"
    number = _run(forge, workflow(job("yes", body=body) + job("no", body=other)))
    plan = forge.run(number).plan["jobs"]
    assert plan[0]["continue_on_error"] == {"expr": "github.event_name == 'workflow_dispatch'"}
    forge.finish(number, "yes", "failure")
    forge.finish(number, "no", "failure")
    assert forge.states(number) == {"yes": "completed/success", "no": "completed/failure"}
