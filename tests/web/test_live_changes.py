"""The run page's poll answers 304 while nothing shown changed, and shows every change next.

Each change below is made the real way (through the coordinator and the core's use cases, as a
runner, an operator or an admin would) between two polls: the poll after it must not be 304 and
must show the change; a poll after that is 304 again. What changes without anything shown
changing (lease renewals, log chunks) keeps the token. The cheapness is counted in SQL
statements, not timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, select

from forge_ci.authz import Role
from forge_ci.coordinator.providers import pause_provider
from forge_ci.db import Database
from forge_ci.models import Job, Run
from forge_ci.protocol import HeartbeatRequest
from forge_ci.repos import grant
from forge_ci.runs.cancel import cancel_run
from tests.web.people import OPERATOR, REPO
from tests.web.scenario import Pipelines, StandardRun

RUN = "/olivia/app/pipelines/1"


class Poller:
    """A reader polling like pipelines.js: the last ETag goes back in If-None-Match."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.etag = ""

    def poll(self) -> dict[str, Any] | None:
        headers = {"If-None-Match": self.etag} if self.etag else {}
        response = self.browser.get(f"{RUN}/updates", headers=headers)
        assert response.headers["Cache-Control"] == "no-store"
        if response.status_code == 304:
            assert response.get_data() == b""
            assert response.headers["ETag"] == self.etag
            return None
        assert response.status_code == 200
        self.etag = response.headers["ETag"]
        data: dict[str, Any] = response.json
        return data


def _jobs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["key"]: job for job in data["jobs"]}


def _changed(poller: Poller, change: Callable[[], object]) -> dict[str, Any]:
    assert poller.poll() is None, "unchanged before the change"
    change()
    data = poller.poll()
    assert data is not None, "the change was not noticed"
    assert poller.poll() is None, "unchanged again after it"
    return data


def test_an_unchanged_run_answers_304_and_any_other_tag_gets_the_body(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    poller = Poller(as_person("rita"))
    first = poller.poll()
    assert first is not None and poller.etag.startswith('"')
    assert poller.poll() is None
    assert poller.poll() is None
    stale = as_person("rita").get(f"{RUN}/updates", headers={"If-None-Match": '"0000"'})
    assert stale.status_code == 200 and stale.json["run"]["status"] == first["run"]["status"]
    # The refusal is unchanged: a non-reader gets 404 whatever tag it sends.
    outsider = as_person("otto").get(f"{RUN}/updates", headers={"If-None-Match": poller.etag})
    assert outsider.status_code == 404


def test_every_shown_change_is_in_the_next_poll(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    poller.poll()
    lint = standard.lint
    step = lint.assignment.steps[0].id

    # Quiet changes: a lease renewal and a log chunk change nothing the poll shows.
    lint.coordinator.heartbeat(lint.token, lint.attempt_id, HeartbeatRequest(lint.execution_id))
    lint.log("more output\n", step)
    assert poller.poll() is None

    data = _changed(poller, lambda: lint.step(step, "completed", "success", 0))
    assert _jobs(data)["lint"]["steps"][0]["status"] == "success"

    data = _changed(poller, lambda: lint.complete("success"))
    assert _jobs(data)["lint"]["status"] == "success"
    assert _jobs(data)["deploy"]["note"] == "Waiting for test."

    # A provider with the gpu label: the queued job's explanation follows the providers.
    data = _changed(poller, lambda: pipelines.add_provider("gpu", "self-hosted,linux,gpu"))
    assert "gpu" not in _jobs(data)["test"]["note"]

    def pause() -> None:
        with database.session() as session:
            pause_provider(session, OPERATOR, "gpu")
            session.commit()

    data = _changed(poller, pause)
    assert _jobs(data)["test"]["note"] == "Every provider with these labels is paused."

    def cancel() -> None:
        with database.session() as session:
            cancel_run(session, OPERATOR, REPO, 1)
            session.commit()

    data = _changed(poller, cancel)
    assert data["run"]["note"] or _jobs(data)["test"]["status"] == "cancelled"


def test_a_claim_shows_the_new_attempt(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    poller = Poller(as_person("rita"))
    poller.poll()
    standard.lint.complete("success")
    poller.poll()
    pipelines.add_provider("gpu", "self-hosted,linux,gpu")
    poller.poll()
    execution = pipelines.claim()
    assert execution is not None and execution.assignment.job_key == "test"
    data = poller.poll()
    assert data is not None and _jobs(data)["test"]["attempt"]["state"] == "leased"
    data = _changed(poller, execution.start)
    assert _jobs(data)["test"]["attempt"]["state"] == "running"


def test_the_token_is_per_role_so_buttons_follow_a_role_change(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    data = poller.poll()
    assert data is not None and data["controls"]["cancel"] is False

    def promote() -> None:
        with database.session() as session:
            grant(session, OPERATOR, REPO, "rita", Role.ADMIN)
            session.commit()

    data = _changed(poller, promote)
    assert data["controls"]["cancel"] is True


def test_revisions_count_concurrent_changes_without_losing_one(
    standard: StandardRun, database: Database
) -> None:
    """Two sessions change the same job: ``revision = revision + 1`` in SQL counts both."""
    job_id = standard.jobs["deploy"]
    with database.session() as session:
        before = session.scalar(select(Job.revision).where(Job.id == job_id))
    assert before is not None
    with database.session() as first:
        job = first.get(Job, job_id)
        assert job is not None
        job.status_reason = "first"
        first.commit()
    with database.session() as second:
        job = second.get(Job, job_id)
        assert job is not None
        job.status_reason = "second"
        second.commit()
        job.status_reason = "second"  # no net change: no bump
        second.commit()
    with database.session() as session:
        assert session.scalar(select(Job.revision).where(Job.id == job_id)) == before + 2


@contextmanager
def _statements(database: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


def test_an_unchanged_poll_reads_a_few_rows_however_large_the_run(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    with _statements(database) as full:
        poller.poll()
    with _statements(database) as unchanged:
        assert poller.poll() is None
    assert len(unchanged) < len(full)
    # The reader and the repository (3), the counters (1) and, as jobs are queued, the queue
    # blockers (5): a fixed number of statements, none of which loads the run's steps,
    # attempts or edges.
    assert len(unchanged) <= 10, unchanged
    loads = [text for text in unchanged if "revision" not in text or "jobs.revision," in text]
    for table in ("attempt_steps", "job_dependencies", "attempts.job_id"):
        assert not any(table in text for text in loads), table
    with database.session() as session:
        run = session.scalar(select(Run).where(Run.number == 1))
        assert run is not None and run.revision >= 1
