"""The watchdog's clean-up window after a stop (post steps after a cancellation or the job's
time limit), driven by hand on the runner's clock: no thread, no process."""

from __future__ import annotations

import math

import pytest

from forge_ci.protocol import AttemptStatus
from worker.runner import watchdog as module
from worker.runner.clock import now
from worker.runner.watchdog import JOB_DEADLINE_MARGIN, POST_GRACE, Watchdog


def _status(left: float, *, cancel: bool = False, state: str = "running") -> AttemptStatus:
    """An answer saying the job deadline is ``left`` seconds away (and the lease with it)."""
    server = 1_000_000
    deadline = server + int(left * 1000)
    return AttemptStatus(
        7, state, "e" * 32, 0, deadline, deadline, server, cancel, "by alice" if cancel else "", ""
    )


@pytest.mark.parametrize(
    ("kind", "left", "window"),
    [
        ("cancelled", 600.0, POST_GRACE),  # the whole window
        ("timed_out", 600.0, POST_GRACE),
        ("cancelled", 7.0, 7.0 - JOB_DEADLINE_MARGIN),  # never past the job deadline
        ("lost", 600.0, None),  # the server takes nothing more: no clean-up
        ("ended", 600.0, None),
        ("refused", 600.0, None),
        ("interrupted", 600.0, None),  # the runner itself is being stopped
    ],
)
def test_the_window_opens_for_cancellations_and_time_limits_only(
    kind: str, left: float, window: float | None
) -> None:
    dog = Watchdog(1)
    dog.observe(_status(left), now())
    dog.request_stop(kind, kind)
    assert dog.halted()
    began = now()
    until = dog.begin_cleanup(POST_GRACE)
    if window is None:
        assert until == -math.inf and dog.halted() and not dog.cleaning()
        return
    assert until - began == pytest.approx(window, abs=0.1)
    assert dog.cleaning() and not dog.halted() and not dog.step_expired()
    assert dog.halted() is False and dog.cleaning(until + 0.01) is False


def test_a_later_stop_the_server_no_longer_takes_ends_the_window_at_once() -> None:
    dog = Watchdog(1)
    dog.observe(_status(600, cancel=True), now())
    assert dog.stop is not None and dog.stop.kind == "cancelled"
    dog.begin_cleanup(POST_GRACE)
    assert dog.cleaning() and not dog.lost()
    dog.observe(_status(600, state="completed"), now())  # the cancel grace ran out
    assert dog.stop.kind == "cancelled"  # the first reason is kept ...
    assert dog.lost() and dog.halted() and not dog.cleaning()  # ... but nothing more runs


def test_the_reserve_brings_the_time_limit_forward() -> None:
    dog = Watchdog(1)
    sent = now()
    dog.observe(_status(20), sent)
    dog.check(sent + 20 - JOB_DEADLINE_MARGIN - POST_GRACE - 0.5)
    assert dog.stop is None
    dog.reserve(POST_GRACE)  # an action with a post script ran its main
    dog.check(sent + 20 - JOB_DEADLINE_MARGIN - POST_GRACE - 0.5)
    assert dog.stop is None
    dog.check(sent + 20 - JOB_DEADLINE_MARGIN - POST_GRACE + 0.1)
    assert dog.stop is not None and dog.stop.kind == "timed_out"
    assert module.CLEANUP_KINDS == {"cancelled", "timed_out"}
