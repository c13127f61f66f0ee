"""The Pipelines page: the scheduled-workflows switch and its recent minutes, dispatch inputs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.models import Repository, Run
from forge_ci.runs.scheduled import fire_minute
from forge_ci.settings import Settings
from tests.web.scenario import CI, Pipelines

PAGE = "/olivia/app/pipelines"
SCHEDULED = """\
name: Nightly
on:
  schedule:
    - cron: '*/5 * * * *'
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
"""
INPUTS = """\
name: Release
on:
  workflow_dispatch:
    inputs:
      tag:
        description: The tag to release
        required: true
      publish:
        type: boolean
        default: true
      level:
        type: choice
        options: [info, debug]
        default: info
      count:
        type: number
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
"""


def _repository(database: Database) -> tuple[bool, str | None]:
    with database.session(read_only=True) as session:
        repo = session.scalar(select(Repository).where(Repository.name == "app"))
        assert repo is not None
        requester = repo.scheduled_workflows_requester
        return repo.scheduled_workflows_enabled, requester.name if requester else None


def _runs(database: Database) -> list[dict[str, Any]]:
    with database.session(read_only=True) as session:
        return [dict(run.context) for run in session.scalars(select(Run).order_by(Run.number))]


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("olivia", 302),
        ("adam", 302),
        ("sam", 302),
        ("will", 403),
        ("rita", 403),
        ("otto", 404),
        ("anonymous", 404),
    ],
)
def test_only_owners_and_admins_switch_scheduled_workflows(
    as_person,  # type: ignore[no-untyped-def]
    database: Database,
    name: str,
    status: int,
) -> None:
    response = as_person(name).post(PAGE + "/scheduled-workflows", {"enabled": "on"})
    assert response.status_code == status
    assert _repository(database) == ((True, name) if status == 302 else (False, None))


def test_the_schedule_switch_shows_who_requests_and_what_each_minute_came_to(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
    settings: Settings,
) -> None:
    pipelines.commit({CI: SCHEDULED})
    adam = as_person("adam")
    forged = adam.client.post(PAGE + "/scheduled-workflows", data={"enabled": "on"})
    assert forged.status_code == 400  # no CSRF token
    assert adam.post(PAGE + "/scheduled-workflows", {"enabled": "maybe"}).status_code == 400
    assert _repository(database) == (False, None)
    response = adam.post(PAGE + "/scheduled-workflows", {"enabled": "on"})
    assert response.headers["Location"] == PAGE
    body = adam.get(PAGE).get_data(as_text=True)
    assert "Run scheduled workflows is on" in body and "requested by\n  adam" in body
    with database.session(read_only=True) as session:
        fire_minute(session, settings, datetime(2026, 12, 1, 12, 5, tzinfo=UTC))
    reader = as_person("rita").get(PAGE).get_data(as_text=True)
    assert "2026-12-01 12:05 UTC" in reader and "run #1" in reader
    assert "pipelines/scheduled-workflows" not in reader  # readers see, but get no switch
    adam.post(PAGE + "/scheduled-workflows", {"enabled": "off"})
    assert _repository(database) == (False, None)
    overview = adam.get("/olivia/app").get_data(as_text=True)
    assert "<dt>Scheduled workflows</dt><dd>off</dd>" in overview


def test_the_dispatch_form_shows_the_inputs_of_the_workflow(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    pipelines.commit({CI: INPUTS})
    body = as_person("olivia").get(PAGE).get_data(as_text=True)
    assert f'data-workflow="{CI}"' in body
    assert 'type="checkbox" name="input.publish" value="true"' in body
    assert '<select id="dispatch-input-3-level" name="input.level"' in body
    assert '<option value="info" selected>info</option>' in body
    assert "tag (required)" in body and "The tag to release" in body


def test_dispatch_with_inputs_stores_them_typed(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
) -> None:
    pipelines.commit({CI: INPUTS})
    form: dict[str, Any] = {
        "branch": "main",
        "workflow": CI,
        "input.tag": "v2.0",
        "input.publish": ["false"],  # the checkbox left unticked: only its hidden "false"
        "input.level": "debug",
        "input.count": "12",
    }
    response = as_person("olivia").post(PAGE + "/dispatch", form)
    assert response.status_code == 303 and response.headers["Location"].endswith("/pipelines/1")
    (context,) = _runs(database)
    assert context["inputs"] == {"tag": "v2.0", "publish": False, "level": "debug", "count": "12"}
    assert context["event"]["inputs"]["publish"] == "false"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"input.count": "twelve"}, "input 'count' is a number, not 'twelve'"),
        ({"input.level": "loud"}, "input 'level' must be one of info, debug"),
        ({"input.colour": "red"}, "unknown input 'colour'"),
        ({"input.tag": ""}, "input 'tag' is required"),
    ],
)
def test_a_refused_input_is_named_and_the_form_keeps_what_was_typed(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
    inputs: dict[str, str],
    message: str,
) -> None:
    pipelines.commit({CI: INPUTS})
    olivia = as_person("olivia")
    form = {"branch": "main", "workflow": CI, "input.tag": "v<3>", **inputs}
    response = olivia.post(PAGE + "/dispatch", form)
    assert response.status_code == 303
    assert response.headers["Location"] == PAGE + "#dispatch"
    body = olivia.get(PAGE).get_data(as_text=True)
    assert message in body.replace("&#39;", "'") and 'role="alert"' in body
    if inputs.get("input.tag", "x"):
        assert 'value="v&lt;3&gt;"' in body  # what was typed, escaped
    if "input.count" in inputs:
        assert 'value="twelve"' in body and 'aria-invalid="true"' in body
    assert _runs(database) == []
