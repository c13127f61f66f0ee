"""What a run page says about jobs that did not (or not yet) run, and how reruns link up.

A completed job without an attempt never ran: it was reused by "rerun failed", or the server
decided it (failed when claimed, cancelled before a provider took it). Such a job must not
claim that "no provider has started it yet". A job waiting for labels no provider has says so,
with the fix.
"""

from __future__ import annotations

from forge_ci.authz import Actor
from forge_ci.secrets.rules import SECRET as SECRET_KIND
from forge_ci.secrets.store import delete_entry, set_secret
from tests.web.scenario import Pipelines, StandardRun

OPERATOR = Actor.operator()

RUN = "/olivia/app/pipelines/1"
NOT_YET = "No provider has started this job yet"
SECRET = """\
name: Secret
on: workflow_dispatch
jobs:
  publish:
    runs-on: [self-hosted, linux]
    steps:
      - run: ./publish
        env:
          TOKEN: ${{ secrets.TOKEN }}
"""


def test_a_job_reused_by_rerun_failed_says_where_its_result_came_from(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    olivia = as_person("olivia")
    olivia.post(f"{RUN}/cancel")
    standard.lint.complete("failure")
    assert olivia.post(f"{RUN}/rerun", {"failed": "1"}).status_code == 302
    second = olivia.get("/olivia/app/pipelines/2").get_data(as_text=True)
    reused_build = pipelines.job_id(2, "build")
    body = olivia.get(f"/olivia/app/pipelines/2/jobs/{reused_build}").get_data(as_text=True)
    assert NOT_YET not in body
    assert "did not run again: it kept its result (success) and outputs from run #1" in body
    assert f'href="{RUN}/jobs/{standard.jobs["build"]}">build in run #1</a>' in body
    # A rerun and its source link to each other.
    assert 'class="rerun-of" href="/olivia/app/pipelines/1"' in second
    first = olivia.get(RUN).get_data(as_text=True)
    assert "Rerun as" in first and 'href="/olivia/app/pipelines/2">#2</a>' in first


def test_a_job_that_failed_when_claimed_says_why(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    path = ".github/workflows/secret.yml"
    pipelines.commit({path: SECRET})
    with pipelines.database.session() as session:
        set_secret(
            session,
            pipelines.settings,
            OPERATOR,
            "olivia/app",
            "TOKEN",
            branch="main",
            workflow_path=path,
            value="run-notes-token",
            version="0",
        )
        session.commit()
    number = pipelines.dispatch(SECRET, path)
    with pipelines.database.session() as session:  # deleted after the run was created
        delete_entry(session, OPERATOR, SECRET_KIND, "olivia/app", "TOKEN", "1")
        session.commit()
    pipelines.add_provider()
    assert pipelines.claim() is None  # the claim fails the job: the secret is gone
    job = pipelines.job_id(number, "publish")
    body = as_person("rita").get(f"/olivia/app/pipelines/{number}/jobs/{job}")
    text = body.get_data(as_text=True)
    assert NOT_YET not in text
    assert (
        "No provider ran this job: it ended failure before any provider started it: step "
    ) in text
    assert "(env TOKEN): secret TOKEN does not exist in this repository" in text
    assert "run-notes-token" not in text


def test_a_job_cancelled_before_any_provider_took_it_says_so(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    olivia = as_person("olivia")
    olivia.post(f"{RUN}/cancel")
    body = olivia.get(f"{RUN}/jobs/{standard.jobs['test']}").get_data(as_text=True)
    assert NOT_YET not in body
    assert "No provider ran this job: it ended cancelled before any provider started it" in body


def test_a_job_waiting_for_labels_no_provider_has_says_how_to_fix_it(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    rita = as_person("rita")
    for page in (RUN, f"{RUN}/jobs/{standard.jobs['test']}"):
        body = rita.get(page).get_data(as_text=True)
        assert "has every label this job needs (gpu, linux, self-hosted); none has gpu" in body
        assert "runs-on: self-hosted" in body and "forge-ci provider labels" in body
    updates = rita.get(f"{RUN}/updates").json
    (test,) = [job for job in updates["jobs"] if job["key"] == "test"]
    assert "forge-ci provider labels" in test["note"]
    assert test["log_note"].startswith(NOT_YET) and "none has gpu" in test["log_note"]
