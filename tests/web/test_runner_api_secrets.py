"""``POST attempts/<id>/secrets`` over HTTP: the raw claim body holds no value, the delivery
answer is no-store JSON, and refusals carry their status and the attempt's state."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from forge_ci.secrets.store import set_secret
from tests.forge_ci.coordinator.world import OPERATOR, World, plan_job, step
from tests.forge_ci.secrets.conftest import commit_branches
from tests.web.test_runner_api import (  # noqa: F401 - fixtures
    api,
    assert_api_response,
    claim_body,
    error_code,
    post,
    world,
)

CI = ".github/workflows/ci.yml"
VALUE = "raw-body-secret-value-31337"


def _running(api: FlaskClient, world: World) -> tuple[bytes, str, str, str]:  # noqa: F811
    commit_branches(world.settings, "alice/app", "main")
    with world.session() as session:
        set_secret(
            session,
            world.settings,
            OPERATOR,
            "alice/app",
            "DEPLOY_TOKEN",
            branch="main",
            workflow_path=CI,
            value=VALUE,
            version="0",
        )
        session.commit()
    env = {"TOKEN": {"secret": "DEPLOY_TOKEN"}}
    world.queue_run(
        plan_job("deploy", step_specs=[step("push", env=env), step("later")]), workflow_path=CI
    )
    request = claim_body()
    response = post(api, "/claims", request, world.provider_token)
    assert_api_response(response, 200)
    raw = response.get_data()
    attempt = f"/attempts/{response.get_json()['assignment']['attempt_id']}"
    token, execution = request["attempt_token"], "e" * 32
    post(api, f"{attempt}/start", {"version": 1, "execution_id": execution}, token)
    return raw, attempt, token, execution


def _step(state: str, step_id: str = "push", execution: str = "e" * 32) -> dict[str, Any]:
    done = state == "completed"
    return {
        "version": 1,
        "execution_id": execution,
        "step_id": step_id,
        "state": state,
        "conclusion": "success" if done else "",
        "exit_code": 0 if done else -1,
        "continue_on_error": False,
    }


def test_the_claim_body_names_secrets_and_the_step_fetches_them(
    api: FlaskClient,  # noqa: F811 - the fixture
    world: World,  # noqa: F811 - the fixture
) -> None:
    raw, attempt, token, execution = _running(api, world)
    assert VALUE.encode() not in raw and b"DEPLOY_TOKEN" in raw
    body = {"version": 1, "execution_id": execution, "step_id": "push"}
    early = post(api, f"{attempt}/secrets", body, token)
    assert error_code(early, 409) == "step_not_running"
    assert early.get_json()["attempt"]["state"] == "running"
    assert_api_response(post(api, f"{attempt}/steps", _step("running"), token), 200)
    answer = post(api, f"{attempt}/secrets", body, token)
    delivered = assert_api_response(answer, 200)
    assert answer.headers["Cache-Control"] == "no-store"
    assert delivered["env"] == {"TOKEN": VALUE} and delivered["step_id"] == "push"
    assert delivered["attempt"]["state"] == "running"
    # The provider's credential, a wrong execution, a step without secrets.
    assert error_code(post(api, f"{attempt}/secrets", body, world.provider_token), 401) == (
        "unauthenticated"
    )
    other = {**body, "execution_id": "f" * 32}
    assert error_code(post(api, f"{attempt}/secrets", other, token), 409) == "execution_mismatch"
    assert error_code(post(api, f"{attempt}/secrets", {**body, "surprise": 1}, token), 400)
    post(api, f"{attempt}/steps", _step("completed"), token)
    post(api, f"{attempt}/steps", _step("running", "later"), token)
    later = assert_api_response(
        post(api, f"{attempt}/secrets", {**body, "step_id": "later"}, token), 200
    )
    assert later["env"] == {}
