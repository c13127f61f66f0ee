"""In headless Chromium: the note in place of a job's log follows what happens to the job."""

from __future__ import annotations

from typing import Any

import pytest

from forge_ci.runs.cancel import cancel_run
from tests.web.browser import LiveServer, sign_in
from tests.web.people import OPERATOR, REPO
from tests.web.scenario import Pipelines, standard_run

pytestmark = pytest.mark.browser


def test_a_queued_jobs_note_becomes_what_happened_when_it_ends_without_running(
    page: Any, live_server: LiveServer
) -> None:
    standard = standard_run(Pipelines(live_server.settings, live_server.database))
    sign_in(page, "olivia")
    page.goto(f"/olivia/app/pipelines/1/jobs/{standard.jobs['test']}")
    note = page.locator(".log-empty")
    assert "No provider has started this job yet" in note.inner_text()
    assert "forge-ci provider labels" in note.inner_text()  # why, and the fix
    page.evaluate("window.marker = 'same document'")
    with live_server.database.session() as session:  # not from this page: it must notice
        cancel_run(session, OPERATOR, REPO, 1)
        session.commit()
    page.wait_for_function(
        "() => document.querySelector('.log-empty').textContent.includes('ended cancelled')",
        timeout=15_000,
    )
    assert "No provider has started" not in note.inner_text()
    assert page.evaluate("window.marker") == "same document"
