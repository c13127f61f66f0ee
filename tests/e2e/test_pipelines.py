"""A push runs jobs in containers, end to end: OpenSSH push -> forge-ci ssh -> worker -> run ->
provider (a subprocess, two slots) -> job containers -> logs -> the run's result.

Each test has its own repository on the shared forge (forge_ci_testing/forge.py).
"""

from __future__ import annotations

import pytest

from forge_ci.models import Attempt
from forge_ci_testing.forge import LINUX, Forge, docker_names, wait_for, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DAG = workflow(
    f"""\
  lint:
    runs-on: {LINUX}
    outputs:
      verdict: ${{{{ steps.check.outputs.verdict }}}}
    steps:
      - id: check
        run: |
          test -f README.md
          echo "verdict=tidy-$(cat README.md)" >> "$GITHUB_OUTPUT"
  test:
    needs: lint
    runs-on: {LINUX}
    strategy:
      matrix:
        shard: [a, b]
    steps:
      - run: |
          echo "shard ${{{{ matrix.shard }}}} sees ${{{{ needs.lint.outputs.verdict }}}}"
          sleep 2
  report:
    needs: [lint, test]
    runs-on: {LINUX}
    steps:
      - run: echo "report got ${{{{ needs.lint.outputs.verdict }}}}"
"""
)


def _overlap(first: Attempt, second: Attempt) -> bool:
    assert first.started_at and first.completed_at and second.started_at and second.completed_at
    return first.started_at < second.completed_at and second.started_at < first.completed_at


def test_a_push_runs_a_dag_with_a_matrix_on_two_slots(live: Forge) -> None:
    repository = live.repository("dag")
    sha = live.push(repository, {".github/workflows/ci.yml": DAG, "README.md": "v1\n"})

    view = live.wait_run(repository)

    assert view.conclusion == "success", live.diagnose(repository, 1)
    assert live.conclusions(view) == {
        "lint": "success",
        "test (a)": "success",
        "test (b)": "success",
        "report": "success",
    }
    logs = live.logs(repository)
    assert f"Checked out {sha}" in logs["lint"]
    # The output of lint reached every job that needs it, matrix legs included.
    assert "shard a sees tidy-v1" in logs["test (a)"]
    assert "shard b sees tidy-v1" in logs["test (b)"]
    assert "report got tidy-v1" in logs["report"]
    attempts = live.attempts(repository)
    assert sorted(attempts) == ["lint", "report", "test (a)", "test (b)"]
    assert all(a.conclusion == "success" for a in attempts.values())
    # Two slots: the matrix legs ran at the same time, in two containers.
    assert _overlap(attempts["test (a)"], attempts["test (b)"])


def test_a_failing_step_fails_the_job_with_its_exit_code(live: Forge) -> None:
    repository = live.repository("failing")
    live.push(
        repository,
        {
            ".github/workflows/ci.yml": workflow(
                f"""\
  build:
    runs-on: {LINUX}
    steps:
      - id: flaky
        continue-on-error: true
        run: echo "flaky step"; exit 3
      - id: broken
        run: echo "broken step"; exit 7
      - id: never
        run: echo "must not run"
      - id: cleanup
        if: always()
        run: echo "cleanup after ${{{{ steps.broken.outcome }}}}"
  after:
    needs: build
    runs-on: {LINUX}
    steps:
      - run: echo "must not run either"
"""
            )
        },
    )

    view = live.wait_run(repository)

    assert view.conclusion == "failure"
    assert live.conclusions(view) == {"build": "failure", "after": "skipped"}
    attempt = live.attempts(repository)["build"]
    steps = {s.step_id: (s.conclusion, s.exit_code) for s in attempt.steps}
    assert steps["flaky"] == ("failure", 3)  # forgiven by continue-on-error: the job went on
    assert steps["broken"] == ("failure", 7)
    assert steps["never"][0] == "skipped"
    assert steps["cleanup"] == ("success", 0)
    log = live.logs(repository)["build"]
    assert "broken step" in log and "cleanup after failure" in log
    assert "must not run" not in log


def test_cancelling_mid_step_stops_the_whole_process_group(live: Forge) -> None:
    repository = live.repository("cancel")
    live.push(
        repository,
        {
            ".github/workflows/ci.yml": workflow(
                f"""\
  long:
    runs-on: {LINUX}
    steps:
      - id: wait
        run: |
          (trap 'echo "background child stopped by TERM"; exit 0' TERM
           while :; do sleep 0.1; done) &
          echo "waiting for cancellation"
          sleep 300
      - id: later
        if: always()
        run: echo "clean-up runs after a cancellation"
      - id: plain
        run: echo "must not run after a cancellation"
"""
            )
        },
    )
    wait_for(
        "the step to be running",
        lambda: "waiting for cancellation" in live.logs(repository).get("long", ""),
        90,
        0.2,
    )
    from forge_ci.authz import Actor
    from forge_ci.runs.cancel import cancel_run

    assert live.database is not None
    with live.database.session() as session:
        cancel_run(session, Actor.operator(), repository, 1)
        session.commit()

    view = live.wait_run(repository, timeout=30)

    assert live.conclusions(view) == {"long": "cancelled"}
    log = live.logs(repository)["long"]
    # SIGTERM went to the step's whole process group: the background child got it too.
    assert "background child stopped by TERM" in log
    # As on GitHub, if: always() still runs (in the clean-up window); the default success()
    # does not.
    assert "clean-up runs after a cancellation" in log and "must not run" not in log
    attempt = live.attempts(repository)["long"]
    assert attempt.conclusion == "cancelled"
    assert {s.step_id: s.conclusion for s in attempt.steps} == {
        "wait": "cancelled",
        "later": "success",
        "plain": "skipped",
    }
    wait_for(
        "the container and volume to be removed",
        lambda: docker_names(live.provider_id) == ([], []),
        30,
    )


def test_a_job_over_its_time_limit_is_timed_out(live: Forge) -> None:
    repository = live.repository("timeout")
    live.push(
        repository,
        {
            ".github/workflows/ci.yml": workflow(
                f"""\
  slow:
    runs-on: {LINUX}
    timeout-minutes: 1
    steps:
      - run: echo "started"; sleep 120
"""
            )
        },
    )

    view = live.wait_run(repository, timeout=60)

    assert live.conclusions(view) == {"slow": "timed_out"}
    assert "started" in live.logs(repository)["slow"]
