"""The browser polling endpoints: updates and log pages, for readers only, never cached."""

from __future__ import annotations

import pytest

from tests.web.people import EVERYONE, READERS
from tests.web.scenario import Pipelines, StandardRun

RUN = "/olivia/app/pipelines/1"


@pytest.mark.parametrize("name", EVERYONE)
def test_updates_need_read_access_and_are_not_cached(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    name: str,
) -> None:
    response = as_person(name).get(f"{RUN}/updates")
    assert response.headers["Cache-Control"] == "no-store"
    assert response.mimetype == "application/json"
    if name not in READERS:
        assert response.status_code == 404
        assert response.json == {
            "error": {"code": "not_found", "message": "repository olivia/app not found"}
        }
        return
    data = response.json
    assert data["run"]["number"] == "1" and data["run"]["terminal"] is False
    jobs = {job["key"]: job for job in data["jobs"]}
    assert jobs["build"]["status"] == "success"
    assert jobs["build"]["id"] == str(standard.jobs["build"])
    assert jobs["lint"]["attempt"]["state"] == "running"
    assert isinstance(jobs["lint"]["attempt"]["id"], str)
    assert jobs["test"]["status"] == "queued"
    assert "gpu" in jobs["test"]["note"]
    assert jobs["deploy"]["note"] == "Waiting for lint, test."
    assert [s["id"] for s in jobs["build"]["steps"]] == ["compile", "package"]
    managers = name in ("olivia", "adam", "sam")
    assert data["controls"] == {"cancel": managers, "rerun": False, "rerun_failed": False}


def test_log_pages_follow_the_cursor_until_complete(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    rita = as_person("rita")
    attempt = pipelines.attempt_of(1, "lint")
    url = f"{RUN}/attempts/{attempt}/logs"
    first = rita.get(url + "?after=0")
    assert first.headers["Cache-Control"] == "no-store"
    page = first.json
    assert [r["text"] for r in page["records"]] == [
        "checking <script>alert('x')</script>\nerror: line too long\n",
        "partial line ",
    ]
    assert page["records"][1]["stream"] == "stderr"
    assert page["next_cursor"] == "2" and page["complete"] is False
    assert rita.get(url + "?after=2").json["records"] == []
    standard.lint.log("done\n", standard.lint.assignment.steps[0].id)
    standard.lint.step(standard.lint.assignment.steps[0].id, "completed", "success", 0)
    standard.lint.complete("success")
    rest = rita.get(url + "?after=2").json
    assert [r["text"] for r in rest["records"]] == ["done\n"]
    assert rest["complete"] is True and rest["attempt_state"] == "completed"
    assert rita.get(url).json["next_cursor"] == rest["next_cursor"]  # no after: from 0


@pytest.mark.parametrize(
    "after", ["-1", "01", "1.5", "x", " 1", "99999999999999999999", "1" * 4301]
)
def test_a_malformed_cursor_is_refused(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    after: str,
) -> None:
    attempt = pipelines.attempt_of(1, "lint")
    response = as_person("rita").get(
        f"{RUN}/attempts/{attempt}/logs", query_string={"after": after}
    )
    assert response.status_code == 400
    assert response.json["error"]["code"] == "invalid"


@pytest.mark.parametrize("name", EVERYONE)
def test_logs_need_read_access(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    name: str,
) -> None:
    attempt = pipelines.attempt_of(1, "build")
    for suffix in ("logs?after=0", "log.txt"):
        response = as_person(name).get(f"{RUN}/attempts/{attempt}/{suffix}")
        assert response.status_code == (200 if name in READERS else 404)


def test_an_attempt_is_found_only_under_its_own_run(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    second = pipelines.dispatch()
    attempt = pipelines.attempt_of(1, "build")
    response = as_person("rita").get(f"/olivia/app/pipelines/{second}/attempts/{attempt}/logs")
    assert response.status_code == 404


def test_log_txt_is_the_whole_log_as_plain_text(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    response = as_person("rita").get(f"{RUN}/attempts/{standard.build_attempt}/log.txt")
    assert response.mimetype == "text/plain"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    text = response.get_data(as_text=True)
    assert text.splitlines() == [
        *(f"Compile line {n}" for n in (1, 2, 3)),
        *(f"Package line {n}" for n in (1, 2, 3)),
    ]


def test_runner_credentials_do_not_authorize_browser_endpoints(
    app,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    client = app.test_client()
    headers = {"Authorization": f"Bearer {pipelines.provider_token}"}
    assert client.get(f"{RUN}/updates", headers=headers).status_code == 404
    headers = {"Authorization": f"Bearer {standard.lint.token}"}
    url = f"{RUN}/attempts/{standard.lint.attempt_id}/logs"
    assert client.get(url, headers=headers).status_code == 404
