"""SQLite: the look made before the write lock is used under it only while it is still true.

A claim looks before it queues for the write lock (so that empty polls never queue), on the
connection it then takes the lock on; ``PRAGMA data_version`` tells whether any other
connection committed in between. SQLite only: PostgreSQL claims make no look before their
transaction (``db_kind`` narrowed below, not skipped).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from forge_ci.authz import Actor
from forge_ci.coordinator import claims, direct_claims
from forge_ci.coordinator.providers import pause_provider, resume_provider
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
    monkeypatch.setattr(direct_claims, "look", lambda *a: looks.append(a) or real_look(*a))
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
    real_lock = claims._sqlite_claim_lock
    raced: list[Any] = []

    @contextmanager
    def lock_after_another_claim(lock_dir: Path | None) -> Iterator[None]:
        if not raced:  # our claim looked; another provider claims the head and commits
            raced.append(None)  # (its own claim passes here too)
            raced[0] = world.claim(other)
        with real_lock(lock_dir):
            yield

    monkeypatch.setattr(claims, "_sqlite_claim_lock", lock_after_another_claim)
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
    real_lock = claims._sqlite_claim_lock
    paused: list[bool] = []

    @contextmanager
    def lock_after_a_pause(lock_dir: Path | None) -> Iterator[None]:
        if not paused:  # our claim looked (an active provider, a queued job); an admin pauses it
            paused.append(True)
            world.in_session(lambda session: pause_provider(session, OPERATOR, "p1"))
        with real_lock(lock_dir):
            yield

    monkeypatch.setattr(claims, "_sqlite_claim_lock", lock_after_a_pause)
    assert world.claim() is None  # the look was made again under the lock, and refused
    assert uses == [False]
    monkeypatch.setattr(claims, "_sqlite_claim_lock", real_lock)
    world.in_session(lambda session: resume_provider(session, OPERATOR, "p1"))
    assert world.claim() is not None  # the job stayed queued for it
