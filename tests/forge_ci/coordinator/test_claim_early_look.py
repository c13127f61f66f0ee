"""SQLite: the look made before the write lock is used under it only while it is still true.

A claim looks before it queues for the write lock (so that empty polls never queue), on the
connection it then takes the lock on; ``PRAGMA data_version`` tells whether any other
connection committed in between. SQLite only: PostgreSQL claims make no look before their
transaction (``db_kind`` narrowed below, not skipped).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from forge_ci.authz import Actor
from forge_ci.coordinator import claim_lock, claims, direct_claims
from forge_ci.coordinator.claim_rows import IssuedTokens
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import pause_provider, resume_provider
from forge_ci.db import Database
from forge_ci.protocol import ClaimRequest
from tests.forge_ci.coordinator.world import World, plan_job

pytestmark = pytest.mark.parametrize("db_kind", ["sqlite"])
OPERATOR = Actor.operator()


def _looks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each look's use under the lock: True when it was still true, False when made again."""
    uses: list[bool] = []
    real = direct_claims.EarlyLook.still_true

    def still_true(self: direct_claims.EarlyLook, cursor: Any) -> Any:
        seen = real(self, cursor)
        uses.append(seen is not None)
        return seen

    monkeypatch.setattr(direct_claims.EarlyLook, "still_true", still_true)
    return uses


def test_a_claim_alone_looks_once(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    run = world.queue_run(plan_job("a"), plan_job("b"))
    uses = _looks(monkeypatch)
    looks: list[object] = []
    real_look = direct_claims.look
    monkeypatch.setattr(
        direct_claims, "look", lambda *a, **k: looks.append(a) or real_look(*a, **k)
    )
    first, second = world.claim(), world.claim()
    assert first is not None and second is not None
    assert {first.assignment.job_id, second.assignment.job_id} == {
        job.id for job in world.jobs_of(run)
    }
    assert (uses, len(looks)) == ([True, True], 2)  # one look a claim, used under the lock


def test_a_commit_between_the_look_and_the_lock_makes_the_claim_look_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = world.queue_run(plan_job("a"), plan_job("b"))
    first_job, second_job = (job.id for job in world.jobs_of(run))
    other = world.add_provider("p2", scope="all")
    uses = _looks(monkeypatch)
    real_lock = claims.sqlite_claim_lock
    raced: list[Any] = []

    @contextmanager
    def lock_after_another_claim(lock_dir: Path | None, early: Any = None) -> Iterator[Any]:
        if not raced:  # our claim looked; another provider claims the head and commits
            raced.append(None)  # (its own claim passes here too)
            raced[0] = world.claim(other)
        with real_lock(lock_dir, early) as usable:
            yield usable

    monkeypatch.setattr(claims, "sqlite_claim_lock", lock_after_another_claim)
    claimed = world.claim()
    assert raced[0] is not None and raced[0].assignment.job_id == first_job
    # Its look (both jobs queued) was no longer true: it looked again and took the other job.
    assert claimed is not None and claimed.assignment.job_id == second_job
    assert uses == [True, False]  # the other claim's look held; ours was made again
    assert world.claim() is None


def test_a_provider_paused_between_the_look_and_the_lock_claims_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.queue_run(plan_job("a"))
    uses = _looks(monkeypatch)
    real_lock = claims.sqlite_claim_lock
    paused: list[bool] = []

    @contextmanager
    def lock_after_a_pause(lock_dir: Path | None, early: Any = None) -> Iterator[Any]:
        if not paused:  # our claim looked (an active provider, a queued job); an admin pauses it
            paused.append(True)
            world.in_session(lambda session: pause_provider(session, OPERATOR, "p1"))
        with real_lock(lock_dir, early) as usable:
            yield usable

    monkeypatch.setattr(claims, "sqlite_claim_lock", lock_after_a_pause)
    assert world.claim() is None  # the look was made again under the lock, and refused
    assert uses == [False]
    monkeypatch.setattr(claims, "sqlite_claim_lock", real_lock)
    world.in_session(lambda session: resume_provider(session, OPERATOR, "p1"))
    assert world.claim() is not None  # the job stayed queued for it


def test_a_provider_paused_right_after_the_look_claims_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version is read in the look's own snapshot: a commit after the look, before the
    look's transaction ends, still makes the claim look again."""
    world.queue_run(plan_job("a"))
    real_look = direct_claims.look
    paused: list[bool] = []

    def look_then_pause(*args: Any, **keywords: Any) -> Any:
        seen = real_look(*args, **keywords)
        if not paused:
            paused.append(True)
            world.in_session(lambda session: pause_provider(session, OPERATOR, "p1"))
        return seen

    monkeypatch.setattr(direct_claims, "look", look_then_pause)
    assert world.claim() is None


def test_a_claim_holds_one_pooled_connection_at_a_time(world: World) -> None:
    """A replay goes from the direct path to the ORM path: with a pool of one connection it
    must not need a second one (it gives the early look's back first)."""
    world.queue_run(plan_job("a"))
    database = Database(world.settings, pool_size=1, max_overflow=0, pool_timeout=2)
    try:
        request = ClaimRequest(new_request_id(), new_token(), 0)

        def claim() -> Any:
            lock_dir = world.settings.locks_dir
            return claims.claim(database.session, world.provider_token, request, lock_dir=lock_dir)

        first = claim()
        assert first is not None
        replay = claim()  # the direct path leaves it to the ORM path
        assert replay is not None and replay.attempt_id == first.attempt_id
    finally:
        database.dispose()


def test_a_claim_waiting_for_the_lock_holds_no_connection(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.queue_run(plan_job("a"))
    database = Database(world.settings, pool_size=1, max_overflow=0, pool_timeout=2)
    waiting = threading.Event()
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:  # the blocking wait, after the free try failed
            waiting.set()
        real_flock(fd, operation)

    monkeypatch.setattr(claim_lock.fcntl, "flock", flock)
    path = world.settings.locks_dir / claim_lock.LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = os.open(path, os.O_RDWR | os.O_CREAT)
    result: list[Any] = []
    try:
        real_flock(holder, fcntl.LOCK_EX)  # another claimer's transaction
        request = ClaimRequest(new_request_id(), new_token(), 0)
        thread = threading.Thread(
            target=lambda: result.append(
                claims.claim(
                    database.session,
                    world.provider_token,
                    request,
                    lock_dir=world.settings.locks_dir,
                )
            ),
            daemon=True,
        )
        thread.start()
        assert waiting.wait(10)
        assert database.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        real_flock(holder, fcntl.LOCK_UN)
        thread.join(10)
        assert not thread.is_alive()
        assert result and result[0] is not None  # it looked again under the lock, and claimed
    finally:
        os.close(holder)
        database.dispose()


def test_a_lost_race_in_the_direct_path_leaves_no_transaction_open(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two identical retries racing (a fault SQLite's serialized claims cannot produce): the
    loser's next round must neither wait for the first round's write lock on the early look's
    connection (it would fail after the busy timeout) nor hold that connection beside its own
    (with a pool of one, checkout would time out)."""
    world.queue_run(plan_job("a"))
    database = Database(world.settings, pool_size=1, max_overflow=0, pool_timeout=2)
    real_start = direct_claims._start
    raised: list[bool] = []

    def start_losing_once(*args: Any) -> Any:
        if not raised:
            raised.append(True)
            lost = sqlite3.IntegrityError(
                "UNIQUE constraint failed: attempts.provider_id, attempts.request_id"
            )
            raise IntegrityError("INSERT INTO attempts", {}, lost)
        return real_start(*args)

    monkeypatch.setattr(direct_claims, "_start", start_losing_once)
    try:
        request = ClaimRequest(new_request_id(), new_token(), 0)
        lock_dir = world.settings.locks_dir
        claimed = claims.claim(database.session, world.provider_token, request, lock_dir=lock_dir)
        assert raised and claimed is not None
    finally:
        database.dispose()


def test_the_look_before_the_lock_holds_no_transaction(world: World) -> None:
    """The look is one statement outside any transaction: once it has its rows the connection
    holds no transaction and no read snapshot (which would keep checkpoints from finishing),
    so it sees what a writer elsewhere commits meanwhile; the claim then looks again."""
    world.queue_run(plan_job("a"))
    request = ClaimRequest(new_request_id(), new_token(), 0)
    digest = IssuedTokens.of(request.attempt_token).digest
    path = world.database.engine.url.database
    assert path is not None
    writer = sqlite3.connect(path, timeout=0)
    try:
        with direct_claims.early_look(
            world.database.engine, world.provider_token, request, digest
        ) as early:
            assert early.seen is not None and early.seen.data_version is not None
            assert not early.connection.in_transaction
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("UPDATE providers SET labels = labels || ',extra'")
            writer.execute("COMMIT")
            cursor = early.connection.cursor()
            (labels,) = cursor.execute("SELECT labels FROM providers").fetchone()
            assert labels.endswith(",extra")  # no snapshot of the look's time was kept
            cursor.execute("BEGIN IMMEDIATE")
            try:
                assert early.still_true(cursor) is None  # the commit is seen: look again
            finally:
                cursor.execute("ROLLBACK")
    finally:
        writer.close()
