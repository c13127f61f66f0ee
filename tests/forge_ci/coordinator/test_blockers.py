"""Why a queued job waits: every explanation, and none that names a provider or a repository."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from forge_ci.authz import Actor, Role
from forge_ci.coordinator.blockers import queue_blockers
from forge_ci.coordinator.providers import (
    pause_provider,
    revoke_provider,
    set_provider_access,
)
from forge_ci.errors import NotFound
from forge_ci.models import User
from forge_ci.repos import grant, revoke
from tests.forge_ci.coordinator.world import OPERATOR, World, plan_job


def _blockers(world: World, run_id: int, actor: Actor | None = None) -> dict[str, str]:
    number = world.run(run_id).number
    with world.session(read_only=True) as session:
        if actor is None:
            user = session.scalar(select(User).where(User.name == "alice"))
            assert user is not None
            actor = Actor.for_user(user)
        found = queue_blockers(session, actor, "alice/app", number, now=world.clock())
        keys = {job.id: job.key for job in world.jobs_of(run_id)}
        codes = {keys[job_id]: blocker.code for job_id, blocker in found.items()}
        for blocker in found.values():
            assert "p1" not in blocker.message and "bob/lib" not in blocker.message
        return codes


def _change(world: World, fn) -> None:  # type: ignore[no-untyped-def]
    world.in_session(fn)


def test_a_provider_that_has_not_been_in_contact_is_no_recent_contact(world: World) -> None:
    run_id = world.queue_run(plan_job("build"))
    assert _blockers(world, run_id) == {"build": "no_recent_contact"}


def test_after_contact_the_job_is_simply_waiting_and_then_busy(world: World) -> None:
    run_id = world.queue_run(plan_job("build"), plan_job("test"))
    claimed = world.claim()
    assert claimed is not None
    assert _blockers(world, run_id) == {"test": "providers_busy"}
    world.start(claimed)
    world.run_steps(claimed)
    world.complete(claimed)
    assert _blockers(world, run_id) == {"test": "waiting"}
    world.clock.advance(61)
    assert _blockers(world, run_id) == {"test": "no_recent_contact"}


def test_labels_no_provider_has(world: World) -> None:
    run_id = world.queue_run(plan_job("gpu", runs_on=("self-hosted", "linux", "gpu")))
    with world.session() as session:
        found = queue_blockers(session, OPERATOR, "alice/app", world.run(run_id).number)
    (blocker,) = found.values()
    assert blocker.code == "no_matching_labels"
    assert "(gpu, linux, self-hosted)" in blocker.message


def test_paused_and_revoked_providers(world: World) -> None:
    run_id = world.queue_run(plan_job("build"))
    _change(world, lambda s: pause_provider(s, OPERATOR, "p1"))
    assert _blockers(world, run_id) == {"build": "providers_paused"}
    _change(world, lambda s: revoke_provider(s, OPERATOR, "p1"))
    assert _blockers(world, run_id) == {"build": "no_provider"}


def test_a_provider_for_other_repositories_does_not_count(world: World) -> None:
    run_id = world.queue_run(plan_job("build"))
    _change(world, lambda s: set_provider_access(s, OPERATOR, "p1", "selected", ["bob/lib"]))
    assert _blockers(world, run_id) == {"build": "no_provider"}
    _change(world, lambda s: set_provider_access(s, OPERATOR, "p1", "selected", ["alice/app"]))
    assert _blockers(world, run_id) == {"build": "no_recent_contact"}


def test_a_requester_who_lost_the_right_to_run_code(world: World) -> None:
    def setup(session) -> None:  # type: ignore[no-untyped-def]
        grant(session, OPERATOR, "alice/app", "bob", Role.ADMIN)

    _change(world, setup)
    run_id = world.queue_run(plan_job("build"), requester="bob")
    _change(world, lambda s: revoke(s, OPERATOR, "alice/app", "bob"))
    assert _blockers(world, run_id) == {"build": "not_authorized"}


def test_jobs_that_are_not_queued_have_no_blocker(world: World) -> None:
    run_id = world.queue_run(plan_job("build"), plan_job("test", needs=("build",)))
    assert _blockers(world, run_id) == {"build": "no_recent_contact"}


def test_only_readers_may_ask(world: World) -> None:
    run_id = world.queue_run(plan_job("build"))
    with world.session() as session:
        stranger = Actor(user_id=world.user_id("bob"), name="bob")
        with pytest.raises(NotFound):
            queue_blockers(session, stranger, "alice/app", world.run(run_id).number)
