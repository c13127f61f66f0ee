"""The pages in headless Chromium: sign in, repositories, administration, sign out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.browser import LiveServer, Screens, sign_in

pytestmark = pytest.mark.browser


def test_sign_in_see_repositories_and_sign_out(
    page: Any, live_server: LiveServer, screens: Screens
) -> None:
    page.goto("/")
    assert page.url.endswith("/-/login?next=/")
    screens.snap(page, "login")

    sign_in(page, "rita", "not the password")
    assert page.locator(".alert").inner_text() == "Incorrect user name or password."
    assert page.input_value("#name") == "rita"
    assert page.input_value("#password") == ""
    screens.snap(page, "login-refused")

    sign_in(page, "rita")
    assert page.url == f"{live_server.url}/"
    assert page.locator("h1").inner_text() == "Repositories"
    assert page.locator("ul.list a.title").all_inner_texts() == ["olivia/app"]
    assert page.locator("text=Administration").count() == 0
    screens.snap(page, "home")

    page.click("text=olivia/app")
    assert page.url.endswith("/olivia/app")
    assert page.locator("dl.facts .badge").inner_text() == "read"
    screens.snap(page, "repository")

    page.click("nav.tabs >> text=Pipelines")
    assert page.url.endswith("/olivia/app/pipelines")
    screens.snap(page, "pipelines")

    page.click("text=Sign out")
    assert page.url.endswith("/-/login")
    assert "You have signed out." in page.locator(".notice").inner_text()
    page.goto("/olivia/app")
    assert page.locator("h1").inner_text() == "Not found"


def test_a_site_administrator_reaches_administration(page: Any, screens: Screens) -> None:
    sign_in(page, "sam")
    assert page.locator("ul.list a.title").all_inner_texts() == ["olivia/app", "otto/other"]
    page.click("header.site >> text=Administration")
    assert page.locator("h1").inner_text() == "Administration"
    assert page.locator("td", has_text="otto").count() >= 1
    screens.snap(page, "admin-users")
    page.click("text=Pipeline providers")
    assert page.url.endswith("/-/admin/pipelines/providers")
    screens.snap(page, "admin-providers")


def test_another_repositorys_user_gets_not_found(page: Any, screens: Screens) -> None:
    sign_in(page, "otto", "correct horse battery")
    response = page.goto("/olivia/app")
    assert response is not None and response.status == 404
    assert page.locator("h1").inner_text() == "Not found"
    screens.snap(page, "not-found")
