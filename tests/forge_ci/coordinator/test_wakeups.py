"""Long-polling claims: an idle provider gets new work within ~100 ms, with or without Redis."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from forge_ci.coordinator import service, wakeups
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.service import Coordinator
from forge_ci.coordinator.wakeups import Publisher, WakeupListener, install_publisher
from forge_ci.models import utcnow
from forge_ci.protocol import ClaimRequest
from tests.forge_ci.coordinator.world import World


def waiting_claim(coordinator: Coordinator, token: str, wait: float) -> dict[str, Any]:
    """Start a claim that waits in a thread; the dict fills in when it returns.

    ``tries`` records when each claim transaction began, so tests can tell how fast the wait
    noticed new work apart from how fast the (loaded) database then answered.
    """
    result: dict[str, Any] = {"tries": []}
    original = coordinator._claim

    def recording(*args: Any) -> Any:
        result["tries"].append(time.monotonic())
        return original(*args)

    coordinator._claim = recording  # type: ignore[method-assign]

    def run() -> None:
        outcome = coordinator.claim(token, ClaimRequest(new_request_id(), new_token(), wait))
        result["assignment"] = outcome.assignment
        result["returned"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    result["thread"] = thread
    return result


@pytest.fixture
def live(world: World) -> World:
    world.clock = utcnow  # type: ignore[assignment]
    world.coordinator = Coordinator(world.database.session, world.settings)
    return world


def test_a_waiting_claim_gets_work_queued_meanwhile_without_redis(live: World) -> None:
    pending = waiting_claim(live.coordinator, live.provider_token, 30)
    time.sleep(0.5)
    assert "returned" not in pending
    # Stamped before queueing: on a loaded machine the poll can notice the commit before
    # queue_run has even returned.
    queued = time.monotonic()
    live.queue_run()
    pending["thread"].join(30)
    # Noticed by the database poll, not by the end of the wait (which would answer null).
    # How fast it notices is measured by bench/claim_wakeup.py, not asserted here.
    assert pending["assignment"] is not None
    assert any(t >= queued for t in pending["tries"])


def test_a_waiting_claim_returns_null_when_its_wait_ends(live: World) -> None:
    began = time.monotonic()
    pending = waiting_claim(live.coordinator, live.provider_token, 0.4)
    pending["thread"].join(10)
    assert pending["assignment"] is None
    assert 0.35 <= pending["returned"] - began < 5


def test_the_wait_is_bounded_by_the_server(live: World) -> None:
    import dataclasses

    settings = dataclasses.replace(live.settings, claim_wait_seconds=0.3)
    coordinator = Coordinator(live.database.session, settings)
    began = time.monotonic()
    pending = waiting_claim(coordinator, live.provider_token, 30)
    pending["thread"].join(10)
    assert pending["returned"] - began < 5


def test_waiting_claims_are_limited_so_they_never_take_every_thread(live: World) -> None:
    coordinator = Coordinator(live.database.session, live.settings, max_waiting=1)
    first = waiting_claim(coordinator, live.provider_token, 3)
    time.sleep(0.2)
    began = time.monotonic()
    second = waiting_claim(coordinator, live.provider_token, 3)
    second["thread"].join(10)
    assert second["returned"] - began < 2  # answered at once instead of waiting 3 s
    assert "returned" not in first
    first["thread"].join(10)


def test_draining_answers_waiting_claims_and_stops_new_ones_waiting(live: World) -> None:
    """A stopping web process lets its long polls go instead of waiting them out."""
    pending = waiting_claim(live.coordinator, live.provider_token, 60)
    time.sleep(0.5)
    assert "returned" not in pending  # the refusal side: without draining, it waits
    live.coordinator.drain()
    pending["thread"].join(10)
    assert "returned" in pending and pending["assignment"] is None
    began = time.monotonic()
    again = waiting_claim(live.coordinator, live.provider_token, 60)
    again["thread"].join(10)
    assert again["assignment"] is None and again["returned"] - began < 10
    # Work that is there is still handed out while draining: a claim just does not wait.
    live.queue_run()
    assert waiting_claim_now(live.coordinator, live.provider_token) is not None


def waiting_claim_now(coordinator: Coordinator, token: str) -> Any:
    request = ClaimRequest(new_request_id(), new_token(), 60)
    return coordinator.claim(token, request).assignment


@pytest.mark.parametrize("another_first", [False, True], ids=["alone", "after-another"])
def test_redis_wakes_waiting_claims_at_once(
    live: World, redis_url: str, monkeypatch: pytest.MonkeyPatch, another_first: bool
) -> None:
    if another_first:
        # A publisher of another Redis installed earlier in the process (another test's
        # server, or a web app of another configuration) must not swallow this one's wake-up.
        install_publisher("redis://127.0.0.1:9/0")
    install_publisher(redis_url)
    listener = WakeupListener(redis_url)
    coordinator = Coordinator(live.database.session, live.settings, wakeups=listener)
    try:
        listener.start()
        deadline = time.monotonic() + 10
        while not listener.connected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert listener.connected
        assert listener.poll_interval == 0.25  # the database is only the safety net now
        woken: list[float] = []
        notify = listener.notify

        def recording_notify() -> None:
            woken.append(time.monotonic())
            notify()

        listener.notify = recording_notify  # type: ignore[method-assign]
        # Only a message can end this wait early: the safety poll and the full retry come
        # later than the wait's end, when an unwoken claim answers null.
        monkeypatch.setattr(wakeups, "POLL_WITH_REDIS", 60.0)
        monkeypatch.setattr(service, "FULL_RETRY_SECONDS", 60.0)
        pending = waiting_claim(coordinator, live.provider_token, 20)
        time.sleep(0.3)
        live.queue_run()  # the ORM commit publishes on the channel
        pending["thread"].join(30)
        assert woken, "no wake-up arrived through Redis"
        assert pending["assignment"] is not None
        assert any(t >= woken[0] for t in pending["tries"])
    finally:
        listener.stop()


def test_a_forked_child_publishes_although_a_parent_thread_held_the_lock(redis_url: str) -> None:
    """Issue #14, finding 9: a work horse forked while the worker's lease-sweeper thread was
    publishing inherited a held lock and hung for good (``futex_do_wait``)."""
    publisher = Publisher(redis_url)
    holding, release = threading.Event(), threading.Event()

    def sweeper_publishing() -> None:  # a parent thread inside publish() at the fork
        with publisher._lock:
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=sweeper_publishing, daemon=True)
    thread.start()
    assert holding.wait(5)
    pid = os.fork()
    if pid == 0:  # the work horse
        signal.alarm(10)  # a hang ends the child (and fails the test), never the suite
        os._exit(0 if publisher.publish() else 3)
    try:
        deadline = time.monotonic() + 15
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        release.set()
        thread.join(5)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # And the parent's publisher still works with its own lock.
    assert publisher.publish()
