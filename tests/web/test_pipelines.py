"""The Pipelines page: runs, the push-workflows switch, dispatch and recent push events."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.models import Repository, Run
from tests.web.people import EVERYONE, READERS
from tests.web.scenario import CI, Pipelines, StandardRun

MANAGERS = ["olivia", "adam", "sam"]
PAGE = "/olivia/app/pipelines"


def _push_workflows(database: Database) -> bool:
    with database.session() as session:
        repo = session.scalar(select(Repository).where(Repository.name == "app"))
        assert repo is not None
        return repo.push_workflows_enabled


def _run_count(database: Database) -> int:
    with database.session() as session:
        return len(session.scalars(select(Run)).all())


@pytest.mark.parametrize("name", EVERYONE)
def test_the_runs_list_shows_state_workflow_event_commit_branch_and_duration(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    name: str,
) -> None:
    response = as_person(name).get(PAGE)
    if name not in READERS:
        assert response.status_code == 404
        return
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert 'href="/olivia/app/pipelines/1"' in body
    assert "status-running" in body and "running" in body
    assert "CI" in body and CI in body
    assert "workflow dispatch" in body
    assert "<code>main</code>" in body
    with_controls = name in MANAGERS
    assert ("pipelines/push-workflows" in body) == with_controls
    assert ("pipelines/dispatch" in body) == with_controls


def test_no_runs_yet_is_said_plainly(as_person) -> None:  # type: ignore[no-untyped-def]
    body = as_person("rita").get(PAGE).get_data(as_text=True)
    assert "No runs yet." in body
    assert "No pushes recorded yet." in body


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
def test_only_owners_and_admins_switch_push_workflows(
    as_person,  # type: ignore[no-untyped-def]
    database: Database,
    name: str,
    status: int,
) -> None:
    response = as_person(name).post(PAGE + "/push-workflows", {"enabled": "on"})
    assert response.status_code == status
    assert _push_workflows(database) == (status == 302)


def test_the_switch_turns_on_and_off_and_needs_the_csrf_token(
    as_person,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    olivia = as_person("olivia")
    forged = olivia.client.post(PAGE + "/push-workflows", data={"enabled": "on"})
    assert forged.status_code == 400
    assert not _push_workflows(database)
    response = olivia.post(PAGE + "/push-workflows", {"enabled": "on"})
    assert response.headers["Location"] == PAGE
    assert "Push workflows are <strong" in olivia.get(PAGE).get_data(as_text=True)
    assert _push_workflows(database)
    olivia.post(PAGE + "/push-workflows", {"enabled": "off"})
    assert not _push_workflows(database)
    bad = olivia.post(PAGE + "/push-workflows", {"enabled": "maybe"})
    assert bad.status_code == 400


def test_dispatch_creates_a_run_and_opens_it(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
) -> None:
    from tests.web.scenario import WORKFLOW

    pipelines.commit({CI: WORKFLOW})
    adam = as_person("adam")
    form = adam.get(PAGE).get_data(as_text=True)
    assert f'value="{CI}"' in form  # the workflow file is suggested
    response = adam.post(PAGE + "/dispatch", {"branch": "main", "workflow": CI})
    assert response.status_code == 303  # See Other: a refresh reloads the run, never re-posts
    assert response.headers["Location"] == "/olivia/app/pipelines/1"
    page = adam.get("/olivia/app/pipelines/1").get_data(as_text=True)
    assert "Run #1 was created" in page
    assert _run_count(database) == 1


@pytest.mark.parametrize(
    ("branch", "workflow", "status", "message"),
    [
        ("nope", CI, 404, "branch nope does not exist"),
        ("main", ".github/workflows/missing.yml", 404, "missing.yml"),
        ("main", "ci.yml", 400, "workflow files live directly under"),
        ("main~1", CI, 400, "not a valid branch name"),
        ("main", ".github/workflows/push-only.yml", 400, "does not declare workflow_dispatch"),
    ],
)
def test_a_bad_dispatch_shows_the_form_again_with_the_reason(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
    branch: str,
    workflow: str,
    status: int,
    message: str,
) -> None:
    from tests.web.scenario import WORKFLOW

    push_only = (
        "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    steps:\n      - run: x\n"
    )
    pipelines.commit({CI: WORKFLOW, ".github/workflows/push-only.yml": push_only})
    olivia = as_person("olivia")
    response = olivia.post(PAGE + "/dispatch", {"branch": branch, "workflow": workflow})
    # Redirect-after-POST: the reason and the form survive the redirect; a refresh of the page
    # shown then is a GET (nothing is posted twice), and says nothing the second time.
    assert response.status_code == 303, status
    assert response.headers["Location"] == PAGE + "#dispatch"
    body = olivia.get(PAGE).get_data(as_text=True)
    assert message in body
    assert 'role="alert"' in body
    assert f'value="{branch}"' in body  # what was typed is kept
    assert f'value="{workflow}"' in body
    again = olivia.get(PAGE).get_data(as_text=True)
    assert message not in again and 'role="alert"' not in again
    assert _run_count(database) == 0


def test_the_dispatch_form_offers_only_files_that_can_be_dispatched(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    """Files that sort first but cannot run by hand (push only, invalid) are not pre-filled."""
    from tests.web.scenario import WORKFLOW

    push_only = (
        "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    steps:\n      - run: x\n"
    )
    pipelines.commit(
        {
            ".github/workflows/a-push.yml": push_only,
            ".github/workflows/b-broken.yml": "on: [workflow_dispatch\n",
            ".github/workflows/c-manual.yml": WORKFLOW,
        }
    )
    body = as_person("olivia").get(PAGE).get_data(as_text=True)
    assert 'value=".github/workflows/c-manual.yml"' in body  # pre-filled, and offered
    assert "a-push.yml" not in body and "b-broken.yml" not in body


@pytest.mark.parametrize(("name", "status"), [("will", 403), ("rita", 403), ("otto", 404)])
def test_dispatch_is_refused_to_others(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
    database: Database,
    name: str,
    status: int,
) -> None:
    from tests.web.scenario import WORKFLOW

    pipelines.commit({CI: WORKFLOW})
    response = as_person(name).post(PAGE + "/dispatch", {"branch": "main", "workflow": CI})
    assert response.status_code == status
    assert _run_count(database) == 0


def test_recent_push_events_show_each_workflows_outcome_and_diagnostics(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    from tests.web.scenario import WORKFLOW

    as_person("olivia").post(PAGE + "/push-workflows", {"enabled": "on"})
    broken = "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    stepz: []\n"
    pipelines.push({CI: WORKFLOW, ".github/workflows/broken.yml": broken})
    body = as_person("rita").get(PAGE).get_data(as_text=True)
    assert "Recent push events" in body
    assert "by olivia" in body
    assert ".github/workflows/broken.yml" in body
    assert "outcome-invalid" in body and "line 5" in body
    assert "outcome-run_created" in body
    assert 'href="/olivia/app/pipelines/1">run #1</a>' in body


def test_an_unchanged_invalid_file_is_shown_once_with_a_link_to_its_history(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    """Ten pushes of the same broken file made the page repeat its problems ten times."""
    as_person("olivia").post(PAGE + "/push-workflows", {"enabled": "on"})
    broken = "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    stepz: []\n"
    for n in range(4):
        pipelines.push({".github/workflows/broken.yml": broken, "README": f"{n}\n"})
    rita = as_person("rita")
    body = rita.get(PAGE).get_data(as_text=True)
    assert body.count('class="diagnostics"') == 1 and body.count("line 5") == 1
    history = "/olivia/app/pipelines/workflow-history?path=.github/workflows/broken.yml"
    assert f'href="{history}"' in body.replace("%2F", "/")
    page = rita.get(history).get_data(as_text=True)
    assert page.count('class="outcome-invalid"') == 4
    assert page.count('class="diagnostics"') == 1  # the oldest; later pushes say "the same"
    assert page.count("The same problems as at the push before.") == 3
    assert as_person("otto").get(history).status_code == 404
