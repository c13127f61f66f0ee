"""In headless Chromium: dispatching is redirect-after-POST, so a refresh never posts again."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from forge_ci.models import Run
from tests.web.browser import LiveServer, sign_in
from tests.web.scenario import CI, WORKFLOW, Pipelines

pytestmark = pytest.mark.browser


def test_refreshing_after_a_dispatch_reloads_instead_of_posting_again(
    page: Any, live_server: LiveServer
) -> None:
    Pipelines(live_server.settings, live_server.database).commit({CI: WORKFLOW})
    posts: list[str] = []
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )
    sign_in(page, "olivia")
    page.goto("/olivia/app/pipelines")
    assert page.locator("#dispatch-workflow").input_value() == CI  # a file that can run
    page.fill("#dispatch-branch", "no-such-branch")
    page.click("button:has-text('Run workflow')")
    assert "branch no-such-branch does not exist" in page.locator(".alert").inner_text()
    assert page.locator("#dispatch-branch").input_value() == "no-such-branch"
    posted = len(posts)
    page.reload()
    assert len(posts) == posted  # the refresh was a GET
    assert page.locator(".alert").count() == 0

    page.fill("#dispatch-branch", "main")
    page.click("button:has-text('Run workflow')")
    assert page.url.endswith("/olivia/app/pipelines/1")
    assert "Run #1 was created" in page.locator(".notice").inner_text()
    posted = len(posts)
    page.reload()
    assert len(posts) == posted
    with live_server.database.session(read_only=True) as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 1
