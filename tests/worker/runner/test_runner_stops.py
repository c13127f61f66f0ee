"""Stopping work: cancellation, job and step timeouts, a lost lease. The whole process group
goes, background children included, and the result is what the server recorded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from forge_ci.coordinator.service import Coordinator
from forge_ci.runs.cancel import cancel_run
from tests.worker.runner.conftest import REPOSITORY, Forge, pid_alive, wait_for, workflow
from web.runner_api import register_runner_api

#: A step that starts a background child, records both pids, then waits "forever".
SLEEPER = """\
      - id: sleeper
        run: |
          sleep 1000 &
          echo $! > "$GITHUB_WORKSPACE/child.pid"
          echo $$ > "$GITHUB_WORKSPACE/shell.pid"
          echo started
          sleep 1000
      - id: after
        if: always()
        run: echo after | tee "$GITHUB_WORKSPACE/after.txt"
      - id: plain
        run: echo never
      - id: told
        if: cancelled()
        run: echo "told ${{ steps.sleeper.outcome }} ${{ job.status }}"
      - id: failed
        if: failure()
        run: echo never
"""
#: After a cancellation or the time limit: what still runs (as on GitHub), what is skipped.
AFTER_THE_STOP = {
    "after": ("completed", "success", 0),
    "plain": ("completed", "skipped", None),
    "told": ("completed", "success", 0),
    "failed": ("completed", "skipped", None),
}


def _pids(workspace: Path) -> tuple[int, int]:
    def read() -> tuple[int, int] | None:
        try:
            child = (workspace / "child.pid").read_text().strip()
            shell = (workspace / "shell.pid").read_text().strip()
        except FileNotFoundError:
            return None
        return (int(child), int(shell)) if child and shell else None

    found: tuple[int, int] = wait_for(read, what="the step to start")
    return found


def test_cancel_mid_step_kills_the_whole_process_group(forge: Forge) -> None:
    forge.dispatch(workflow(SLEEPER))
    claimed = forge.claim()
    workspace = forge.workspace()
    process = forge.start_runner(forge.envelope(claimed, workspace))
    child, shell = _pids(workspace)
    assert pid_alive(child) and pid_alive(shell)

    with forge.database.session() as session:
        cancel_run(session, forge.alice, REPOSITORY, 1)
        session.commit()
    finished = forge.finish(process, timeout=20)

    assert finished.returncode == 1, finished
    assert finished.report["result"] == "cancelled"
    assert finished.report["reported"] and finished.report["conclusion"] == "cancelled"
    assert wait_for(lambda: not pid_alive(child), 5, "the background child to die")
    assert not pid_alive(shell)
    attempt = forge.attempt(claimed.attempt_id)
    assert (attempt.conclusion, attempt.reported_conclusion) == ("cancelled", None)
    assert forge.steps(claimed.attempt_id) == {
        "sleeper": ("completed", "cancelled", None),
        **AFTER_THE_STOP,
    }
    assert "cancelled: cancelled by alice" in forge.log(claimed.attempt_id, "sleeper", "stderr")
    assert forge.log(claimed.attempt_id, "after") == "after\n"
    assert forge.log(claimed.attempt_id, "told") == "told cancelled cancelled\n"


def test_the_job_deadline_stops_the_job_as_timed_out(forge: Forge) -> None:
    forge.dispatch(workflow(SLEEPER, timeout_minutes=1))
    claimed = forge.claim()
    workspace = forge.workspace()
    process = forge.start_runner(forge.envelope(claimed, workspace))
    child, _ = _pids(workspace)
    # 52 of the 60 minutes' seconds pass at once for the server: the next heartbeat tells the
    # runner that 8 s are left, and it stops 2 s before the deadline to report in time.
    forge.clock.advance(52)
    finished = forge.finish(process, timeout=20)

    assert finished.returncode == 1, finished
    assert finished.report["result"] == "timed_out"
    assert finished.report["reported"] and finished.report["conclusion"] == "timed_out"
    assert not pid_alive(child)
    assert forge.attempt(claimed.attempt_id).conclusion == "timed_out"
    assert forge.steps(claimed.attempt_id) == {
        "sleeper": ("completed", "timed_out", None),
        **AFTER_THE_STOP,
    }
    assert "time limit (timeout-minutes: 1)" in forge.log(claimed.attempt_id, "sleeper")
    assert forge.log(claimed.attempt_id, "told") == "told timed_out cancelled\n"


def test_a_step_timeout_ends_that_step_only(forge: Forge) -> None:
    steps = """\
      - id: slow_but_allowed
        timeout-minutes: 1
        continue-on-error: true
        run: |
          sleep 1000 &
          echo $! > "$GITHUB_WORKSPACE/child.pid"
          sleep 1000
      - id: next
        run: |
          echo next ran
          if kill -0 "$(cat "$GITHUB_WORKSPACE/child.pid")" 2>/dev/null; then
            echo "the timed-out step's background child is alive"
          else
            echo "the timed-out step's background child is gone"
          fi
      - id: slow
        timeout-minutes: 1
        run: sleep 1000
      - id: skipped
        run: echo not after a failure
      - id: cleanup
        if: always()
        run: echo cleanup ran
"""
    # A step minute lasts 1 s here, so "timeout-minutes: 1" is one second.
    claimed, finished = forge.run_job(workflow(steps), step_minute_seconds=1)

    assert finished.returncode == 1, finished
    assert finished.report["result"] == "failure"
    assert forge.steps(claimed.attempt_id) == {
        "slow_but_allowed": ("completed", "timed_out", None),
        "next": ("completed", "success", 0),
        "slow": ("completed", "timed_out", None),
        "skipped": ("completed", "skipped", None),
        "cleanup": ("completed", "success", 0),
    }
    assert forge.log(claimed.attempt_id, "next") == (
        "next ran\nthe timed-out step's background child is gone\n"
    )
    assert "time limit (timeout-minutes: 1)" in forge.log(claimed.attempt_id, "slow")
    assert finished.seconds < 10


@pytest.fixture
def short_lease(forge: Forge) -> None:
    """A 4 s lease instead of 60 s (the ``lease_seconds`` setting), so that losing it takes
    seconds in a test."""
    settings = dataclasses.replace(forge.settings, lease_seconds=4.0)
    register_runner_api(forge.app, Coordinator(forge.database.session, settings, clock=forge.clock))


@pytest.mark.usefixtures("short_lease")
def test_a_lost_lease_stops_the_step(forge: Forge) -> None:
    forge.dispatch(workflow(SLEEPER))
    claimed = forge.claim()
    workspace = forge.workspace()
    process = forge.start_runner(forge.envelope(claimed, workspace))
    child, shell = _pids(workspace)
    forge.stop_server()
    finished = forge.finish(process, timeout=20)

    # Nobody can confirm anything: exit 2, and the step was stopped without waiting for
    # a reconnect.
    assert finished.returncode == 2, finished
    assert finished.report["result"] == "lost"
    assert not finished.report["reported"] and not finished.report["confirmed"]
    assert not pid_alive(child) and not pid_alive(shell)
    assert finished.seconds < 8
    # The server takes nothing more: no clean-up window, so even always() does not run.
    assert not (workspace / "after.txt").exists()


@pytest.mark.usefixtures("short_lease")
def test_heartbeats_keep_a_short_lease_alive(forge: Forge) -> None:
    steps = """\
      - run: sleep 5 && echo still here
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    assert forge.log(claimed.attempt_id, "step_1") == "still here\n"


def test_background_processes_live_until_the_job_ends_even_detached(forge: Forge) -> None:
    steps = """\
      - id: start
        run: |
          sleep 1000 > /dev/null 2>&1 &
          echo $! > "$GITHUB_WORKSPACE/background.pid"
          setsid sh -c 'echo $$ > "$GITHUB_WORKSPACE/detached.pid"; exec sleep 1000' \\
            > /dev/null 2>&1 < /dev/null &
          while [ ! -s "$GITHUB_WORKSPACE/detached.pid" ]; do sleep 0.05; done
      - id: check
        run: |
          kill -0 "$(cat "$GITHUB_WORKSPACE/background.pid")" && echo background alive
          kill -0 "$(cat "$GITHUB_WORKSPACE/detached.pid")" && echo detached alive
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    assert forge.log(claimed.attempt_id, "check") == "background alive\ndetached alive\n"
    for name in ("background.pid", "detached.pid"):
        pid = int((forge.workspace() / name).read_text())
        assert not pid_alive(pid), name
