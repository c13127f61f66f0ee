"""Pipelines pages in headless Chromium: live updates, the log viewer, polling rules, providers.

The test drives runs through the real coordinator (as a provider and runner would) while the
page polls the live server, and checks what a person sees change without reloading.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.web.browser import LiveServer, Screens, allow_failures, sign_in
from tests.web.scenario import CI, Pipelines, StandardRun, standard_run

pytestmark = pytest.mark.browser

RUN = "/olivia/app/pipelines/1"
ONE_JOB = """\
name: Long log
on: workflow_dispatch
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - name: Make
        id: make
        run: make
"""


@pytest.fixture
def pipelines(live_server: LiveServer) -> Pipelines:
    return Pipelines(live_server.settings, live_server.database)


@pytest.fixture
def standard(pipelines: Pipelines) -> StandardRun:
    return standard_run(pipelines)


def _poller(page: Any, expression: str) -> Any:
    return page.evaluate(f"document.getElementById('run-page').forgeCi.{expression}")


def _updates(url: str) -> bool:
    return urlsplit(url).path.endswith("/updates")  # with ?since=BASE after the first answer


def _wait(page: Any, expression: str, timeout: float = 15_000) -> None:
    # forgeCi appears when the page's module script has run (after parsing): until then, wait.
    page.wait_for_function(
        f"() => document.getElementById('run-page').forgeCi?.{expression}", timeout=timeout
    )


def test_pipelines_page_switch_and_dispatch(
    page: Any, pipelines: Pipelines, screens: Screens
) -> None:
    pipelines.commit({CI: ONE_JOB})
    sign_in(page, "olivia")
    page.goto("/olivia/app/pipelines")
    push = "section[aria-labelledby='push-title']"  # beside it: the schedule switch
    assert page.locator(f"{push} .switch-state").inner_text() == "off"
    page.click(f"{push} button:has-text('Switch on')")
    assert page.locator(f"{push} .switch-state").inner_text() == "on"
    page.fill("#dispatch-branch", "no-such-branch")
    page.click("button:has-text('Run workflow')")
    assert "branch no-such-branch does not exist" in page.locator(".alert").inner_text()
    page.fill("#dispatch-branch", "main")
    page.fill("#dispatch-workflow", CI)
    page.click("button:has-text('Run workflow')")
    assert page.url.endswith(RUN)
    assert "Run #1 was created" in page.locator(".notice").inner_text()
    broken = "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    stepz: []\n"
    pipelines.push({".github/workflows/broken.yml": broken, "README": "push"})
    page.goto("/olivia/app/pipelines")
    assert page.locator("table.runs tbody tr").count() == 1
    assert page.locator("ul.events > li").count() == 1
    assert "line 5" in page.locator("ul.diagnostics").inner_text()
    screens.snap(page, "pipelines")


def test_the_run_page_follows_the_run_without_reloading(
    page: Any, pipelines: Pipelines, standard: StandardRun, screens: Screens
) -> None:
    sign_in(page, "olivia")
    page.goto(RUN)
    lint = f'ul.jobs li[data-job="{standard.jobs["lint"]}"]'
    assert "running" in page.locator(f"{lint} .job-status").inner_text()
    assert (
        "gpu"
        in page.locator(f'ul.jobs li[data-job="{standard.jobs["test"]}"] .job-note').inner_text()
    )
    screens.snap(page, "run-running")
    page.evaluate("window.marker = 'same document'")
    _wait(page, "poll.base")  # the first answer (the whole run) is in: what follows are deltas
    step = standard.lint.assignment.steps[0].id
    standard.lint.step(step, "completed", "success", 0)
    standard.lint.complete("success")
    page.wait_for_selector(f"{lint} .job-status.status-success", timeout=15_000)
    page.wait_for_selector(
        f'svg.graph a.node.status-success[data-job="{standard.jobs["lint"]}"]', timeout=5_000
    )
    assert page.evaluate("window.marker") == "same document"
    # The changes came as deltas (only the jobs that changed, applied over what was shown).
    assert _poller(page, "poll.deltas") >= 1
    # Cancelling ends the run: the buttons change and polling stops.
    page.click("button:has-text('Cancel run')")
    page.wait_for_selector("#run-status.status-cancelled", timeout=15_000)
    _wait(page, "poll.stopped === true")
    assert page.locator("form.control-rerun").is_visible()
    assert not page.locator("form.control-cancel").is_visible()
    screens.snap(page, "run-cancelled")


def test_the_job_log_streams_searches_follows_copies_and_downloads(
    page: Any, pipelines: Pipelines, standard: StandardRun, screens: Screens, tmp_path: Any
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, "rita")
    page.goto(f"{RUN}/jobs/{standard.jobs['lint']}")
    log = page.locator("#log")
    assert log.locator(".line").count() == 3
    # Text is text: the script tag in the output is shown, not run.
    assert "<script>alert('x')</script>" in log.inner_text()
    assert page.evaluate("typeof window.alertCalled") == "undefined"
    step = standard.lint.assignment.steps[0].id
    standard.lint.log("continued\nwarning: x\n", step, "stderr")
    page.wait_for_function(
        "() => document.querySelectorAll('#log .line').length === 4", timeout=15_000
    )
    assert log.locator(".line").nth(2).inner_text().endswith("partial line continued")

    page.fill(".log-search", "ERROR")
    assert page.locator(".search-count").inner_text() == "1 of 1"
    assert page.locator("#log mark.current").inner_text() == "error"
    page.fill(".log-search", "")
    page.click(".error-next")
    assert "Error line 1 of 1" in page.locator(".log-status").inner_text()

    page.click(".follow")
    assert page.get_attribute(".follow", "aria-pressed") == "true"
    screens.snap(page, "job-log-running")

    page.click(".copy")
    page.wait_for_function(
        "() => document.querySelector('.log-status').textContent.startsWith('Copied 4 lines')"
    )
    assert page.evaluate("navigator.clipboard.readText()").splitlines()[-1] == "warning: x"
    with page.expect_download() as info:
        page.click(".download")
    download = info.value
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    assert download.suggested_filename == "olivia-app-run-1-lint.log"
    assert target.read_text().splitlines()[1] == "error: line too long"

    standard.lint.step(step, "completed", "success", 0)
    standard.lint.complete("success")
    _wait(page, "poll.logComplete === true")


def test_a_long_completed_log_drains_and_collapses_its_middle(
    page: Any, pipelines: Pipelines, screens: Screens
) -> None:
    pipelines.commit({CI: ONE_JOB})
    number = pipelines.dispatch(ONE_JOB)
    pipelines.add_provider()
    build = pipelines.claim()
    assert build is not None
    build.start()
    build.step("make", "running")
    for n in range(1, 651):  # more records than the page renders (5 x 100): the rest drain
        build.log(f"line {n}{' error: boom' if n == 300 else ''}\n", "make")
    build.step("make", "completed", "success", 0)
    build.complete("success")
    job_id = pipelines.job_id(number, "build")
    sign_in(page, "rita")
    page.goto(f"/olivia/app/pipelines/{number}/jobs/{job_id}")
    _wait(page, "poll.stopped === true")
    assert _poller(page, "log.lines.length") == 650
    visible = page.locator("#log .line:visible")
    assert visible.count() == 100  # 20 + 80
    assert visible.first.inner_text().endswith("line 1")
    assert visible.last.inner_text().endswith("line 650")
    expand = page.locator("#log button.expand")
    assert expand.inner_text() == "Show 550 more lines (550 hidden)"
    screens.snap(page, "long-log-collapsed")
    # Search reveals a hidden match.
    page.fill(".log-search", "boom")
    assert page.locator(".search-count").inner_text() == "1 of 1"
    assert page.locator("#log mark.current").is_visible()
    expand.click()
    assert page.locator("#log .line:visible").count() == 650
    assert page.locator("#log button.expand").count() == 0


def test_polling_backs_off_stops_on_revoked_access_and_pauses_when_hidden(
    page: Any, pipelines: Pipelines, standard: StandardRun
) -> None:
    sign_in(page, "rita")
    calls: list[float] = []
    failing = {"status": 503}

    def handle(route: Any) -> None:
        calls.append(time.monotonic())
        route.fulfill(status=failing["status"], body="{}", content_type="application/json")

    allow_failures(page, r"/pipelines/1/updates$")
    page.route(re.compile(r".*/pipelines/1/updates$"), handle)
    page.goto(RUN)
    page.wait_for_timeout(9_000)
    # 2 s, then 4 s and 8 s apart: at most 3 requests in 9 s (steady polling would make 4).
    assert 2 <= len(calls) <= 3, calls
    failing["status"] = 404
    page.wait_for_function(
        "() => document.getElementById('run-page').forgeCi?.poll.stopped === true", timeout=20_000
    )
    page.unroute(re.compile(r".*/pipelines/1/updates$"))

    # A hidden tab does not poll; it resumes when visible again.
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    page.goto(RUN)
    page.wait_for_timeout(2_500)
    assert [url for url in seen if _updates(url)]
    page.evaluate(
        """() => {
        Object.defineProperty(document, 'hidden', {value: true, configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }"""
    )
    page.wait_for_timeout(2_500)  # let a request already in flight finish
    seen.clear()
    page.wait_for_timeout(4_500)
    assert not [url for url in seen if _updates(url)]
    page.evaluate(
        """() => {
        Object.defineProperty(document, 'hidden', {value: false, configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }"""
    )
    page.wait_for_timeout(1_500)
    assert [url for url in seen if _updates(url)]


def test_providers_are_created_and_edited_by_a_site_administrator(
    page: Any, screens: Screens
) -> None:
    sign_in(page, "sam")
    page.goto("/-/admin/pipelines/providers")
    page.fill("#create-name", "docker-1")
    page.check("text=olivia/app")
    page.click("button:has-text('Create provider')")
    token = page.locator("#new-token").inner_text()
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    screens.snap(page, "provider-created")
    page.goto("/-/admin/pipelines/providers")
    assert page.locator("#new-token").count() == 0
    page.click("#provider-docker-1 summary:has-text('Edit labels')")
    page.fill("#labels-docker-1", "self-hosted,linux,gpu")
    page.click("button:has-text('Save labels')")
    assert "Labels of docker-1 saved." in page.locator(".notice").inner_text()
    assert "gpu" in page.locator("#provider-docker-1 dl").inner_text()
    page.click("#provider-docker-1 button:has-text('Pause')")
    assert page.locator("#provider-docker-1 .badge.state-paused").count() == 1
    page.click("#provider-docker-1 summary:has-text('Edit access')")
    screens.snap(page, "providers")
