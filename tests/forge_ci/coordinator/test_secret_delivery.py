"""Just-in-time secret delivery (``POST attempts/<id>/secrets``) with the real store, on both
databases: every recheck refused with its status, idempotence, the 256 KiB cap, records gone
when the attempt ends, and masking of issued values through rotation and deletion."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from forge_ci.authz import Role
from forge_ci.coordinator.errors import BadCredential
from forge_ci.coordinator.providers import pause_provider
from forge_ci.coordinator.service import AttemptRefused
from forge_ci.errors import ForgeCIError
from forge_ci.models import AttemptSecret, LogRecord
from forge_ci.repos import grant, revoke
from forge_ci.runs.cancel import cancel_run
from forge_ci.secrets.rotation import rotate_key
from forge_ci.secrets.rules import SECRET
from forge_ci.secrets.store import delete_entry, set_secret, set_variable
from tests.forge_ci.coordinator.world import OPERATOR, Claimed, World, plan_job, step
from tests.forge_ci.secrets.conftest import commit_branches

CI = ".github/workflows/ci.yml"
VALUE = "first-value-of-the-deploy-token"


def store(
    world: World,
    name: str,
    value: str | None,
    version: str = "0",
    repository: str = "alice/app",
    branch: str = "main",
) -> None:
    with world.session() as session:
        set_secret(
            session,
            world.settings,
            OPERATOR,
            repository,
            name,
            branch=branch,
            workflow_path=CI,
            value=value,
            version=version,
        )
        session.commit()


@pytest.fixture
def ready(world: World) -> World:
    for repository in ("alice/app", "bob/lib"):
        commit_branches(world.settings, repository, "main", "dev")
    store(world, "DEPLOY_TOKEN", VALUE)
    return world


def deploy_job(*step_ids: str, secret: str = "DEPLOY_TOKEN") -> dict[str, Any]:
    return plan_job(
        "deploy",
        step_specs=[step(s, env={"TOKEN": {"secret": secret}, "MODE": "fast"}) for s in step_ids],
    )


def running(world: World, job: dict[str, Any], step_id: str = "a", **run: Any) -> Claimed:
    world.queue_run(job, workflow_path=run.pop("workflow_path", CI), **run)
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.step(claimed, step_id, "running")
    return claimed


def refusal(world: World, claimed: Claimed, step_id: str, token: str | None = None) -> ForgeCIError:
    with pytest.raises(AttemptRefused) as info:
        world.secrets(claimed, step_id, token)
    return info.value.error


def test_a_running_step_gets_its_values_once_and_keeps_them(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a", "b"))
    # Names only in the assignment; the value arrives for the running step.
    assert VALUE not in str(claimed.assignment.to_json())
    assert world.secrets(claimed, "a") == {"TOKEN": VALUE}
    store(world, "DEPLOY_TOKEN", "second-value-of-the-token", "1")
    # Idempotent per attempt/step/name: the running step keeps the value it first got...
    assert world.secrets(claimed, "a") == {"TOKEN": VALUE}
    assert world.count(AttemptSecret) == 1
    # ...and a step that has not started gets nothing; once it runs, the current value.
    assert refusal(world, claimed, "b").code == "step_not_running"
    assert refusal(world, claimed, "nope").code == "unknown_step"
    world.step(claimed, "a", "completed", "success", 0)
    assert refusal(world, claimed, "a").code == "step_not_running"
    world.step(claimed, "b", "running")
    assert world.secrets(claimed, "b") == {"TOKEN": "second-value-of-the-token"}
    # Both issued values stay masked until the attempt ends, also after deletion.
    with world.session() as session:
        delete_entry(session, OPERATOR, SECRET, "alice/app", "DEPLOY_TOKEN", "2")
        session.commit()
    world.log(claimed, 1, f"{VALUE} and second-value-of-the-token\n", step_id="b")
    world.step(claimed, "b", "completed", "success", 0)
    world.complete(claimed)
    with world.session() as session:
        text = "".join(session.scalars(select(LogRecord.text)))
    assert VALUE not in text and "second-value" not in text and "***" in text
    assert world.count(AttemptSecret) == 0  # delivery records are gone with the attempt
    assert refusal(world, claimed, "b").code == "attempt_ended"


def test_deletion_and_scope_changes_stop_later_deliveries(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a", "b"))
    assert world.secrets(claimed, "a") == {"TOKEN": VALUE}
    store(world, "DEPLOY_TOKEN", None, "1", branch="dev")  # moved to another branch
    error = refusal(world, claimed, "a")
    assert (error.code, error.http_status) == ("secret_unavailable", 403)
    assert "only be used on branch dev" in error.message
    store(world, "DEPLOY_TOKEN", None, "2", branch="main")
    with world.session() as session:
        delete_entry(session, OPERATOR, SECRET, "alice/app", "DEPLOY_TOKEN", "3")
        session.commit()
    world.step(claimed, "a", "completed", "success", 0)
    world.step(claimed, "b", "running")
    error = refusal(world, claimed, "b")
    assert error.http_status == 403 and "does not exist" in error.message


def test_an_expired_lease_gets_nothing_and_forgets_what_it_got(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a"))
    world.secrets(claimed, "a")
    assert world.count(AttemptSecret) == 1
    world.clock.advance(world.settings.lease_seconds + 1)
    error = refusal(world, claimed, "a")
    assert (error.code, error.http_status) == ("attempt_ended", 409)
    assert world.attempt(claimed.id).conclusion == "lost"
    assert world.count(AttemptSecret) == 0


def test_issued_values_stay_masked_through_key_rotation(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a"))
    assert world.secrets(claimed, "a") == {"TOKEN": VALUE}
    with world.session() as session:
        rotate_key(session, world.settings, OPERATOR)
    # Rotation re-seals the store; what the attempt was given is its own, and still masked.
    assert world.secrets(claimed, "a") == {"TOKEN": VALUE}
    world.log(claimed, 1, f"token={VALUE}\n", step_id="a")
    with world.session() as session:
        text = "".join(session.scalars(select(LogRecord.text)))
    assert VALUE not in text and text == "token=***\n"


def test_a_cancelled_run_gets_nothing(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a"))
    with world.session() as session:
        cancel_run(session, OPERATOR, "alice/app", claimed.assignment.run_number)
        session.commit()
    error = refusal(world, claimed, "a")
    assert (error.code, error.http_status) == ("cancel_requested", 409)


def test_a_requester_who_lost_permission_gets_nothing(ready: World) -> None:
    world = ready
    store(world, "DEPLOY_TOKEN", VALUE, repository="bob/lib")
    claimed = running(world, deploy_job("a"), repository="bob/lib", requester="alice")
    with world.session() as session:
        revoke(session, OPERATOR, "bob/lib", "alice")
        grant(session, OPERATOR, "bob/lib", "alice", Role.WRITE)
        session.commit()
    error = refusal(world, claimed, "a")
    assert error.http_status == 403 and "may no longer run workflows" in error.message
    assert world.attempt(claimed.id).cancel_requested_at is not None


def test_a_paused_or_revoked_provider_gets_nothing(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a"))
    with world.session() as session:
        pause_provider(session, OPERATOR, "p1")
        session.commit()
    error = refusal(world, claimed, "a")
    assert (error.code, error.http_status) == ("provider_not_permitted", 403)


def test_provider_and_foreign_credentials_cannot_ask(ready: World) -> None:
    world = ready
    claimed = running(world, deploy_job("a"))
    for token in (world.provider_token, "f" * 64):
        with pytest.raises(BadCredential) as info:
            world.secrets(claimed, "a", token)
        assert info.value.http_status == 401
    assert world.count(AttemptSecret) == 0


def test_an_attempt_receives_at_most_256_kib(ready: World) -> None:
    world = ready
    names = [f"BIG_{n}" for n in range(17)]  # 17 x 16 KiB > 256 KiB
    for name in names:
        store(world, name, name[-1] * 16_384)
    env = {f"E{n}": {"secret": name} for n, name in enumerate(names)}
    claimed = running(world, plan_job("deploy", step_specs=[step("a", env=env)]))
    error = refusal(world, claimed, "a")
    assert (error.code, error.http_status) == ("secret_limit", 413)
    assert world.count(AttemptSecret) == 0  # nothing of the refused request was kept


@pytest.mark.parametrize(
    "run, reason",
    [
        ({"event_name": "pull_request"}, "not given to pull_request runs"),
        ({"ref": "refs/heads/dev"}, "only be used on branch main, not dev"),
        (
            {"workflow_path": ".github/workflows/other.yml"},
            "only be used by .github/workflows/ci.yml",
        ),
    ],
)
def test_other_events_branches_and_workflows_are_refused_at_claim(
    ready: World, run: dict[str, Any], reason: str
) -> None:
    world = ready
    run_id = world.queue_run(deploy_job("a"), **{"workflow_path": CI, **run})
    assert world.claim() is None
    job = world.jobs_of(run_id)[0]
    assert (job.state, job.conclusion) == ("completed", "failure")
    assert reason in (job.status_reason or "")


def test_the_vars_context_holds_the_run_s_variables(ready: World) -> None:
    world = ready
    with world.session() as session:
        for name, branch, workflow in (
            ("REGION", None, None),
            ("CHANNEL", "main", CI),
            ("ELSEWHERE", "dev", CI),
        ):
            set_variable(
                session,
                world.settings,
                OPERATOR,
                "alice/app",
                name,
                branch=branch,
                workflow_path=workflow,
                value=name.lower(),
                version="0",
            )
        session.commit()
    world.queue_run(plan_job("build"), workflow_path=CI)
    claimed = world.claim()
    assert claimed is not None
    assert claimed.assignment.contexts["vars"] == {"CHANNEL": "channel", "REGION": "region"}
    world.queue_run(plan_job("build"), workflow_path=CI, ref="refs/heads/dev")
    other = world.claim()
    assert other is not None
    assert other.assignment.contexts["vars"] == {"ELSEWHERE": "elsewhere", "REGION": "region"}
