"""In headless Chromium: the dispatch form shows the chosen workflow's inputs as the right
controls, follows the file field, and keeps what was typed when an input is refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from forge_ci.models import Run
from tests.web.browser import LiveServer, sign_in
from tests.web.scenario import CI, Pipelines
from tests.web.test_pipelines_schedule_inputs import INPUTS

pytestmark = pytest.mark.browser

OTHER = ".github/workflows/other.yml"
OTHER_INPUTS = INPUTS.replace("      tag:\n", "      region:\n")


def test_inputs_are_shown_checked_and_kept(page: Any, live_server: LiveServer) -> None:
    Pipelines(live_server.settings, live_server.database).commit({CI: INPUTS, OTHER: OTHER_INPUTS})
    sign_in(page, "olivia")
    page.goto("/olivia/app/pipelines")
    fieldset = page.locator(f'fieldset.dispatch-inputs[data-workflow="{CI}"]')
    other = page.locator(f'fieldset.dispatch-inputs[data-workflow="{OTHER}"]')
    assert page.locator("#dispatch-workflow").input_value() == CI
    assert fieldset.is_visible() and not other.is_visible()
    # A checkbox for the boolean (ticked by its default), a select for the choice.
    checkbox = fieldset.locator('input[type="checkbox"][name="input.publish"]')
    assert checkbox.is_checked()
    select_box = fieldset.locator('select[name="input.level"]')
    assert select_box.input_value() == "info"
    assert select_box.locator("option").all_inner_texts() == ["info", "debug"]
    # Typing the other file's path shows its inputs instead (the script follows the field).
    page.fill("#dispatch-workflow", OTHER)
    assert other.is_visible() and not fieldset.is_visible()
    page.fill("#dispatch-workflow", CI)
    assert fieldset.is_visible()

    fieldset.locator('input[name="input.tag"]').fill("v1.2")
    checkbox.uncheck()
    select_box.select_option("debug")
    fieldset.locator('input[name="input.count"]').fill("three")
    page.click("button:has-text('Run workflow')")
    assert "input 'count' is a number, not 'three'" in page.locator(".alert").inner_text()
    # Everything typed is still there, and the refused input is marked.
    fieldset = page.locator(f'fieldset.dispatch-inputs[data-workflow="{CI}"]')
    assert fieldset.locator('input[name="input.tag"]').input_value() == "v1.2"
    assert not fieldset.locator('input[name="input.publish"][type="checkbox"]').is_checked()
    assert fieldset.locator('select[name="input.level"]').input_value() == "debug"
    count = fieldset.locator('input[name="input.count"]')
    assert count.input_value() == "three" and count.get_attribute("aria-invalid") == "true"
    with live_server.database.session(read_only=True) as session:
        assert session.scalars(select(Run)).all() == []

    count.fill("3")
    page.click("button:has-text('Run workflow')")
    assert page.url.endswith("/olivia/app/pipelines/1")
    with live_server.database.session(read_only=True) as session:
        (run,) = session.scalars(select(Run)).all()
        assert run.context["inputs"] == {
            "tag": "v1.2",
            "publish": False,
            "level": "debug",
            "count": "3",
        }
