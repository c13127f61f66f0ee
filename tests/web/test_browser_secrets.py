"""Settings -> Secrets and Variables in headless Chromium (desktop and phone screenshots): add,
edit the scope without a value, delete, a refused form keeps its metadata and clears the value,
values never appear in a page, and a reader gets 404."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from forge_ci.models import RepositorySecret
from forge_ci.secrets.policy import open_secret
from forge_ci.secrets.sealing import Keyring
from tests.web.browser import LiveServer, Screens, allow_failures, sign_in
from tests.web.scenario import CI, WORKFLOW, Pipelines

pytestmark = pytest.mark.browser

PAGE = "/olivia/app/settings/secrets"
VALUE = '{"token": "browser-secret-value-42"}'
PUBLISH = ".github/workflows/publish.yml"


def stored(live_server: LiveServer, name: str) -> tuple[str | None, RepositorySecret | None]:
    with live_server.database.session(read_only=True) as session:
        row = session.scalar(select(RepositorySecret).where(RepositorySecret.name == name))
        if row is None or row.deleted_at is not None:
            return None, row
        keyring = Keyring.load(live_server.settings.sealing_key_path)
        session.expunge(row)
        return open_secret(session, keyring, row.repository_id, name), row


def test_secrets_page(page: Any, live_server: LiveServer, screens: Screens) -> None:
    Pipelines(live_server.settings, live_server.database).commit({CI: WORKFLOW})
    bodies: list[str] = []
    page.on("response", lambda r: bodies.append(r.text()) if "/settings/" in r.url else None)
    sign_in(page, "olivia")
    page.goto("/olivia/app")
    page.click("nav.tabs a:has-text('Settings')")
    assert page.url.endswith(PAGE)
    assert "No secrets yet" in page.locator("main").inner_text()

    # A refused form: the metadata stays, the value is cleared.
    page.fill("#add-name", "deploy_token")
    page.fill("#add-branch", "no-such-branch")
    page.fill("#add-workflow", PUBLISH)
    page.fill("#add-value", VALUE)
    page.click("button:has-text('Add secret')")
    assert "branch no-such-branch does not exist" in page.locator("#form-error").inner_text()
    assert page.locator("#add-name").input_value() == "deploy_token"
    assert page.locator("#add-branch").input_value() == "no-such-branch"
    assert page.locator("#add-workflow").input_value() == PUBLISH
    assert page.locator("#add-value").input_value() == ""
    screens.snap(page, "secrets-refused")

    page.fill("#add-branch", "main")
    page.fill("#add-value", VALUE)
    page.click("button:has-text('Add secret')")
    assert "DEPLOY_TOKEN was saved (version 1)" in page.locator(".notice").inner_text()
    row = page.locator("#entry-DEPLOY_TOKEN")
    assert "main" in row.inner_text() and PUBLISH in row.inner_text()
    assert stored(live_server, "DEPLOY_TOKEN")[0] == VALUE

    # Edit the scope only: the value field stays empty and the value is kept.
    row.locator("summary").click()
    assert page.locator("#value-DEPLOY_TOKEN").input_value() == ""
    page.fill("#workflow-DEPLOY_TOKEN", CI)
    page.click("button:has-text('Save DEPLOY_TOKEN')")
    assert "version 2" in page.locator(".notice").inner_text()
    value, secret_row = stored(live_server, "DEPLOY_TOKEN")
    assert value == VALUE and secret_row is not None and secret_row.workflow_path == CI
    screens.snap(page, "secrets-list")

    # A refused edit (a bad workflow path) keeps the edit open with what was sent.
    page.locator("#entry-DEPLOY_TOKEN summary").click()
    page.fill("#workflow-DEPLOY_TOKEN", "ci.yml")
    page.fill("#value-DEPLOY_TOKEN", "typed-but-refused-value")
    page.click("button:has-text('Save DEPLOY_TOKEN')")
    assert "directly under .github/workflows" in page.locator("#form-error").inner_text()
    assert page.locator("#workflow-DEPLOY_TOKEN").input_value() == "ci.yml"
    assert page.locator("#value-DEPLOY_TOKEN").input_value() == ""
    assert stored(live_server, "DEPLOY_TOKEN")[0] == VALUE

    page.goto(PAGE)
    page.locator("#entry-DEPLOY_TOKEN summary").click()
    page.click("button:has-text('Delete DEPLOY_TOKEN')")
    assert "DEPLOY_TOKEN was deleted" in page.locator(".notice").inner_text()
    assert stored(live_server, "DEPLOY_TOKEN")[0] is None

    # Variables beside it: shown with their values.
    page.click("nav.sub-tabs a:has-text('Variables')")
    page.fill("#add-name", "region")
    page.fill("#add-value", "eu-west")
    page.click("button:has-text('Add variable')")
    assert "eu-west" in page.locator("#entry-REGION").inner_text()
    screens.snap(page, "variables")

    for body in bodies:
        assert "browser-secret-value-42" not in body and "typed-but-refused" not in body


def test_readers_and_writers_get_404(page: Any, live_server: LiveServer) -> None:
    allow_failures(page, "/settings/")
    for name in ("rita", "will"):
        page.context.clear_cookies()
        sign_in(page, name)
        response = page.goto(PAGE)
        assert response is not None and response.status == 404
        page.goto("/olivia/app")
        assert page.locator("nav.tabs a:has-text('Settings')").count() == 0
