"""Claims: assignment, replay, empty polls, eligibility (labels, scope, state, permission)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select

from forge_ci import protocol
from forge_ci.coordinator import direct_claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.errors import BadCredential, ClaimConflict
from forge_ci.coordinator.providers import pause_provider, resume_provider, revoke_provider
from forge_ci.models import Attempt, AttemptStep, Job, Provider, Repository, RunSequence, User
from forge_ci.repos import revoke as revoke_membership
from tests.forge_ci.coordinator.world import LINUX, OPERATOR, World, plan_job


def test_a_claim_leases_the_queued_job_with_a_complete_assignment(world: World) -> None:
    run_id = world.queue_run(plan_job("build", steps=("compile", "test"), timeout_minutes=7))
    claimed = world.claim()
    assert claimed is not None
    assignment = claimed.assignment
    # The assignment survives the runner's own validation and the wire round trip.
    wire = json.loads(protocol.dumps(assignment.to_json()))
    assert protocol.Assignment.from_json(wire) == assignment
    assert assignment.state == "leased"
    assert assignment.job_key == "build"
    assert [s.id for s in assignment.steps] == ["compile", "test"]
    assert assignment.timeout_minutes == 7
    assert assignment.contexts["github"]["repository"] == "alice/app"
    assert assignment.contexts["github"]["run_attempt"] == "1"
    assert assignment.contexts["needs"] == {}
    assert "secrets" not in assignment.to_json()
    assert (
        assignment.source_archive_path == f"{protocol.API_PREFIX}/attempts/{claimed.id}/source.tar"
    )
    assert assignment.job_deadline_ms == 0
    assert assignment.lease_deadline_ms - assignment.server_time_ms == 60_000
    job = world.jobs_of(run_id)[0]
    assert job.state == "running"
    assert world.run(run_id).state == "running"
    attempt = world.attempt(claimed.id)
    assert (attempt.state, attempt.number) == ("leased", 1)
    assert attempt.token_hash != claimed.token  # only the hash is stored
    assert world.count(AttemptStep) == 2
    assert world.claim() is None  # nothing else is queued


def test_an_empty_poll_stores_nothing(world: World) -> None:
    assert world.claim() is None
    assert world.count(Attempt) == 0


def test_replay_returns_the_same_assignment_without_extending_the_lease(world: World) -> None:
    world.queue_run()
    request_id, token = new_request_id(), new_token()
    first = world.claim(request_id=request_id, attempt_token=token)
    assert first is not None
    world.clock.advance(30)
    again = world.claim(request_id=request_id, attempt_token=token)
    assert again is not None
    assert again.id == first.id
    assert again.assignment.lease_deadline_ms == first.assignment.lease_deadline_ms
    assert again.assignment.steps == first.assignment.steps
    assert world.count(Attempt) == 1
    # A replay of an attempt that already runs reports it: reconcile, never start twice.
    world.start(first)
    replayed = world.claim(request_id=request_id, attempt_token=token)
    assert replayed is not None and replayed.assignment.state == "running"


def test_replay_with_another_credential_or_after_the_end_is_a_conflict(world: World) -> None:
    world.queue_run()
    request_id, token = new_request_id(), new_token()
    first = world.claim(request_id=request_id, attempt_token=token)
    assert first is not None
    with pytest.raises(ClaimConflict, match="another attempt_token"):
        world.claim(request_id=request_id, attempt_token=new_token())
    world.clock.advance(61)  # the start window passes: the attempt is lost
    with pytest.raises(ClaimConflict, match="has ended"):
        world.claim(request_id=request_id, attempt_token=token)
    assert world.attempt(first.id).conclusion == "lost"
    assert world.count(Attempt) == 1


def test_an_attempt_credential_is_never_reused(world: World) -> None:
    world.queue_run(plan_job("a"), plan_job("b"))
    token = new_token()
    assert world.claim(attempt_token=token) is not None
    with pytest.raises(ClaimConflict, match="already used"):
        world.claim(attempt_token=token)
    with pytest.raises(ClaimConflict, match="already used"):
        world.claim(attempt_token=world.provider_token)


def test_unknown_and_revoked_providers_are_refused(world: World) -> None:
    world.queue_run()
    with pytest.raises(BadCredential):
        world.claim(provider_token=new_token())
    with world.session() as session:
        revoke_provider(session, OPERATOR, "p1")
        session.commit()
    with pytest.raises(BadCredential):
        world.claim()


def test_a_paused_provider_gets_no_work_until_resumed(world: World) -> None:
    world.queue_run()
    world.in_session(lambda s: pause_provider(s, OPERATOR, "p1"))
    assert world.claim() is None
    world.in_session(lambda s: resume_provider(s, OPERATOR, "p1"))
    assert world.claim() is not None


def test_every_job_label_must_be_a_provider_label(world: World) -> None:
    world.queue_run(plan_job("gpu", runs_on=(*LINUX, "gpu")))
    assert world.claim() is None
    gpu = world.add_provider("gpu-box", "self-hosted,linux,GPU", scope="all")
    claimed = world.claim(provider_token=gpu)
    assert claimed is not None and claimed.assignment.job_key == "gpu"


def test_scope_selected_covers_only_granted_repositories(world: World) -> None:
    selected = world.add_provider("lib-only", scope="selected", repositories=("bob/lib",))
    world.queue_run(repository="alice/app")
    assert world.claim(provider_token=selected) is None
    world.queue_run(repository="bob/lib")
    claimed = world.claim(provider_token=selected)
    assert claimed is not None
    assert claimed.assignment.contexts["github"]["repository"] == "bob/lib"
    nothing = world.add_provider("nothing", scope="selected")
    assert world.claim(provider_token=nothing) is None


def test_a_requester_who_lost_permission_gets_the_job_cancelled(world: World) -> None:
    run_id = world.queue_run(repository="bob/lib", requester="alice")
    world.in_session(lambda s: revoke_membership(s, OPERATOR, "bob/lib", "alice"))
    assert world.claim() is None
    job = world.jobs_of(run_id)[0]
    assert (job.state, job.conclusion) == ("completed", "cancelled")
    assert "alice" in (job.status_reason or "") and "bob/lib" in (job.status_reason or "")
    assert world.count(Attempt) == 0


@pytest.fixture(params=["direct", "orm"])
def claim_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Claims through the direct path (as they usually go) or all through the ORM path (as
    the unusual ones do): both keep the same fairness key."""
    if request.param == "orm":
        monkeypatch.setattr(
            direct_claims, "claim_direct", lambda *_args, **_kwargs: direct_claims.UNHANDLED
        )
    return str(request.param)


def _served(world: World) -> dict[str, datetime | None]:
    """Each repository's fairness key (its last claim), by name."""
    with world.session(read_only=True) as session:
        rows = session.execute(
            select(User.name, Repository.name, RunSequence.served_at)
            .join(Repository, Repository.id == RunSequence.repository_id)
            .join(User, User.id == Repository.owner_id)
        )
        return {f"{owner}/{name}": served for owner, name, served in rows}


def test_repositories_are_served_in_turn(world: World, claim_path: str) -> None:
    """One repository's backlog cannot starve another's single job: each claim stamps its
    repository as served, and the least recently served goes first."""
    world.queue_run(*[plan_job(f"a{i}") for i in range(4)], repository="alice/app")
    world.clock.advance(1)
    world.queue_run(plan_job("b0"), repository="bob/lib")
    assert _served(world) == {"alice/app": None, "bob/lib": None}
    order = []
    for _ in range(5):
        claimed = world.claim()
        assert claimed is not None
        repository = claimed.assignment.contexts["github"]["repository"]
        order.append(repository)
        assert _served(world)[repository] == world.clock()
        world.clock.advance(1)
    assert order[:2] == ["alice/app", "bob/lib"]
    assert order.count("bob/lib") == 1
    stamps = _served(world)
    assert world.claim() is None  # an empty poll serves no one
    assert _served(world) == stamps


def test_a_claim_with_an_earlier_clock_leaves_the_later_stamp(
    world: World, claim_path: str
) -> None:
    """A claim whose time is behind the stamp (it waited for a lock, or its coordinator's clock
    is behind) does not make the repository look less recently served than it was."""
    world.queue_run(plan_job("a0"), plan_job("a1"), repository="alice/app")
    world.clock.advance(10)
    assert world.claim() is not None
    later = world.clock()
    world.clock.now = later - timedelta(seconds=5)
    assert world.claim() is not None
    assert _served(world)["alice/app"] == later


def test_a_job_referencing_a_missing_secret_fails_at_claim(world: World) -> None:
    spec = plan_job("deploy")
    spec["steps"][0]["env"] = {"TOKEN": {"secret": "DEPLOY_TOKEN"}}
    run_id = world.queue_run(spec)
    assert world.claim() is None
    job = world.jobs_of(run_id)[0]
    assert (job.state, job.conclusion) == ("completed", "failure")
    assert "DEPLOY_TOKEN" in (job.status_reason or "")


def test_dependents_are_claimable_once_their_needs_complete(world: World) -> None:
    run_id = world.queue_run(
        plan_job("build", outputs={"artifact": {"template": [{"expr": "steps.x.outputs.a"}]}}),
        plan_job("deploy", needs=("build",)),
    )
    build = world.claim()
    assert build is not None and build.assignment.job_key == "build"
    assert world.claim() is None
    world.start(build)
    world.run_steps(build)
    world.complete(build, outputs={"artifact": "app-1.0.tar"})
    deploy = world.claim()
    assert deploy is not None and deploy.assignment.job_key == "deploy"
    assert deploy.assignment.contexts["needs"] == {
        "build": {"result": "success", "outputs": {"artifact": "app-1.0.tar"}}
    }
    world.start(deploy)
    world.run_steps(deploy)
    world.complete(deploy)
    assert world.run(run_id).conclusion == "success"
    with world.session() as session:
        assert session.scalar(select(Provider.last_contact_at)) == world.clock()
        jobs = session.scalars(select(Job).order_by(Job.id)).all()
        assert [j.conclusion for j in jobs] == ["success", "success"]
