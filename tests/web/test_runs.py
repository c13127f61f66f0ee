"""A run's page and its jobs: graph, timing, blockers, logs, cancel and rerun."""

from __future__ import annotations

import pytest
from sqlalchemy import select

import web.logs
from forge_ci.db import Database
from forge_ci.models import Run
from tests.web.people import EVERYONE, READERS
from tests.web.scenario import Pipelines, StandardRun

RUN = "/olivia/app/pipelines/1"
MANAGERS = ["olivia", "adam", "sam"]


def _run_state(database: Database, number: int = 1) -> str:
    with database.session() as session:
        run = session.scalar(select(Run).where(Run.number == number))
        assert run is not None
        return run.state


@pytest.mark.parametrize("name", EVERYONE)
def test_the_run_page_shows_jobs_graph_timing_and_blockers(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    name: str,
) -> None:
    response = as_person(name).get(RUN)
    if name not in READERS:
        assert response.status_code == 404
        return
    body = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<svg" in body and 'class="graph"' in body
    for key, job_id in standard.jobs.items():
        assert f'data-job="{job_id}"' in body, key
    assert f'class="node status-success" data-job="{standard.jobs["build"]}"' in body
    assert f'class="node status-running" data-job="{standard.jobs["lint"]}"' in body
    assert f'class="node status-queued" data-job="{standard.jobs["test"]}"' in body
    assert f'class="node status-waiting" data-job="{standard.jobs["deploy"]}"' in body
    assert body.count('class="edge"') == 3  # build->test, test->deploy, lint->deploy
    # Why the queued job waits, without naming any provider.
    assert "has every label this job needs (gpu, linux, self-hosted)" in body
    assert "p1" not in body
    assert "Waiting for lint, test." in body
    assert "queued 20" in body and "started 20" in body
    assert ("Cancel run" in body) == (name in MANAGERS)


def test_the_job_page_shows_steps_and_the_escaped_log(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    body = as_person("rita").get(f"{RUN}/jobs/{standard.jobs['lint']}").get_data(as_text=True)
    assert "checking &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in body
    assert "<script>alert" not in body
    assert "error: line too long" in body
    assert 'data-open-line="true"' in body  # "partial line " has no newline yet
    assert 'class="line stream-stderr"' in body
    assert 'data-complete="false"' in body
    build = as_person("rita").get(f"{RUN}/jobs/{standard.jobs['build']}").get_data(as_text=True)
    assert "Compile line 3" in build and "Package line 1" in build
    assert 'data-complete="true"' in build
    assert build.count('class="line"') == 6


def test_a_long_log_is_cut_after_the_record_that_reaches_the_line_limit(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records of a fast job hold hundreds of lines each: the page stops at the record that
    reaches the limit, inside the first page of records, and the script continues after it."""
    monkeypatch.setattr(web.logs, "INITIAL_LINES", 10)
    step = standard.lint.assignment.steps[0].id
    for cursor in range(3, 7):  # after the standard run's two records
        standard.lint.log("".join(f"record {cursor} line {n}\n" for n in range(4)), step)
    rita = as_person("rita")
    body = rita.get(f"{RUN}/jobs/{standard.jobs['lint']}").get_data(as_text=True)
    # 2 lines, the open "partial line " continued by record 3 and 3 more, then record 4: 10.
    assert body.count('class="line') == 10
    assert "partial line record 3 line 0" in body and "record 4 line 3" in body
    assert "record 5" not in body
    assert 'data-next-cursor="4"' in body and 'data-open-line="false"' in body
    assert 'data-complete="false"' in body and "The page shows the first 10 lines" in body
    rest = rita.get(f"{RUN}/attempts/{standard.lint.attempt_id}/logs?after=4").json
    assert [r["text"].split("\n")[0] for r in rest["records"]] == [
        "record 5 line 0",
        "record 6 line 0",
    ]


def test_a_log_of_small_records_fills_the_page_up_to_its_record_budget(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A few records first, then full pages, until INITIAL_PAGES pages' worth of records."""
    monkeypatch.setattr(web.logs, "FIRST_RECORDS", 2)
    monkeypatch.setattr(web.logs, "PAGE_SIZE", 3)
    monkeypatch.setattr(web.logs, "INITIAL_PAGES", 2)
    step = standard.lint.assignment.steps[0].id
    for cursor in range(3, 9):
        standard.lint.log(f"r{cursor}\n", step)
    body = as_person("rita").get(f"{RUN}/jobs/{standard.jobs['lint']}").get_data(as_text=True)
    # Records 1 and 2, then 3 to 5, then 6: six records, read as 2 + 3 + 1.
    assert body.count('class="line') == 6
    assert "partial line r3" in body and ">r6<" in body and "r7" not in body
    assert 'data-next-cursor="6"' in body and 'data-complete="false"' in body


def test_a_step_can_be_chosen_without_javascript(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    body = (
        as_person("rita")
        .get(f"{RUN}/jobs/{standard.jobs['build']}?step=package")
        .get_data(as_text=True)
    )
    assert body.count('class="line filtered"') == 3  # the Compile lines are hidden by CSS
    assert 'data-step="package" aria-current="true"' in body


def test_a_job_without_an_attempt_says_so(as_person, standard: StandardRun) -> None:  # type: ignore[no-untyped-def]
    body = as_person("rita").get(f"{RUN}/jobs/{standard.jobs['test']}").get_data(as_text=True)
    assert "No provider has started this job yet" in body


@pytest.mark.parametrize(
    "path",
    [RUN.replace("/1", "/2"), f"{RUN}/jobs/999999", "/otto/other/pipelines/1"],
)
def test_unknown_runs_and_jobs_and_other_repositories_runs_are_404(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    path: str,
) -> None:
    assert as_person("sam").get(path).status_code == 404


def test_a_job_of_another_run_is_not_found_under_this_run(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    second = pipelines.dispatch()
    other_job = pipelines.job_id(second, "build")
    assert as_person("rita").get(f"{RUN}/jobs/{other_job}").status_code == 404


@pytest.mark.parametrize(
    ("name", "status"),
    [("olivia", 302), ("adam", 302), ("sam", 302), ("will", 403), ("rita", 403), ("otto", 404)],
)
def test_only_owners_and_admins_cancel(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
    name: str,
    status: int,
) -> None:
    response = as_person(name).post(f"{RUN}/cancel")
    assert response.status_code == status
    if status == 302:
        page = as_person(name).get(RUN).get_data(as_text=True)
        assert "Cancellation requested." in page or "cancelled" in page
    else:
        assert _run_state(database) == "running"


def test_cancel_needs_the_csrf_token(as_person, standard: StandardRun, database: Database) -> None:  # type: ignore[no-untyped-def]
    response = as_person("olivia").client.post(f"{RUN}/cancel")
    assert response.status_code == 400
    assert _run_state(database) == "running"


def test_rerun_of_a_completed_run(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    olivia = as_person("olivia")
    active = olivia.post(f"{RUN}/rerun")
    assert active.status_code == 409
    assert "cancel it first" in active.get_data(as_text=True)
    olivia.post(f"{RUN}/cancel")
    standard.lint.complete("failure")  # the runner reports after the cancellation request
    assert _run_state(database) == "completed"
    page = olivia.get(RUN).get_data(as_text=True)
    assert 'class="control-cancel" hidden' in page
    assert "Rerun failed jobs" in page
    for name, status in (("will", 403), ("rita", 403), ("otto", 404)):
        assert as_person(name).post(f"{RUN}/rerun").status_code == status
    response = olivia.post(f"{RUN}/rerun", {"failed": "1"})
    assert response.status_code == 302
    assert response.headers["Location"] == "/olivia/app/pipelines/2"
    second = olivia.get("/olivia/app/pipelines/2").get_data(as_text=True)
    assert "rerun of" in second and 'href="/olivia/app/pipelines/1"' in second


@pytest.mark.parametrize(
    "path",
    ["", "/jobs/{lint}", "/updates", "/attempts/{attempt}/logs"],
    ids=["run", "job", "updates", "logs"],
)
def test_a_run_page_looks_its_repository_up_once(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
    path: str,
) -> None:
    """The run, its blockers and its log are read in a repository authorized once per request."""
    from sqlalchemy import event

    url = RUN + path.format(lint=standard.jobs["lint"], attempt=standard.lint.attempt_id)
    browser = as_person("rita")
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        statements.append(statement)

    for engine in database.engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        response = browser.get(url)
    finally:
        for engine in database.engines:
            event.remove(engine, "before_cursor_execute", record)
    assert response.status_code == 200, response.get_data(as_text=True)
    # (A poll first asks the one statement of forge_ci.coordinator.watch, which reads the
    # session too, whether it can answer at once; it cannot here, the run was never presented.)
    lookups = [
        s
        for s in statements
        if "FROM repositories JOIN users" in " ".join(s.split()) and "web_sessions" not in s
    ]
    assert len(lookups) == 1, lookups


def test_the_job_page_sums_up_the_jobs_network_use(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    from forge_ci.protocol import EgressRecord, EgressRequest

    lint = standard.lint
    page = f"{RUN}/jobs/{standard.jobs['lint']}"
    assert "egress-summary" not in as_person("rita").get(page).get_data(as_text=True)

    def record(sequence: int, host: str, port: int, allowed: bool, reason: str) -> EgressRecord:
        return EgressRecord(
            sequence, 1_800_000_000_000, "CONNECT", host, port, host, allowed, False, reason,
            "", 10, 2048, 5,
        )  # fmt: skip

    records = [
        record(1, "pypi.org", 443, True, "a public address"),
        record(2, "pypi.org", 443, True, "a public address"),
        record(3, "<b>x</b>.example", 443, True, "a public address"),
        record(4, "10.0.0.5", 6379, False, "10.0.0.5 is private (RFC 1918): always denied"),
    ]
    assert pipelines.provider_token is not None
    pipelines.coordinator.egress(
        pipelines.provider_token, lint.attempt_id, EgressRequest(lint.token, records)
    )
    body = as_person("rita").get(page).get_data(as_text=True)
    assert (
        "Network: 3 connections to pypi.org:443, &lt;b&gt;x&lt;/b&gt;.example:443,"
        " 1 denied to 10.0.0.5:6379" in body
    )
    assert "<b>x</b>" not in body
    assert "10.0.0.5 is private (RFC 1918): always denied" in body
    # Another repository's reader sees none of it (the page is a 404).
    assert as_person("otto").get(page).status_code == 404
