"""The runner API's HTTP edges (issue #14, finding 13): JSON for every error, no cookies.

Before: a wrong method or ``attempts//start`` was answered with the browser's HTML error page,
and a browser cookie sent along was refreshed on every call (``Set-Cookie``, ``Vary: Cookie``).
"""

from __future__ import annotations

import json

import pytest
from flask import Flask
from flask.testing import FlaskClient

from forge_ci import protocol
from tests.forge_ci.coordinator.world import World
from tests.web.people import Browser, People
from tests.web.test_runner_api import api, claim_body, world  # noqa: F401 - fixtures
from web.runner_api import register_runner_api

PREFIX = protocol.API_PREFIX


def assert_json_error(response: object, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)  # type: ignore[attr-defined]
    assert response.mimetype == "application/json"  # type: ignore[attr-defined]
    assert response.headers["Cache-Control"] == "no-store"  # type: ignore[attr-defined]
    body = json.loads(response.get_data())  # type: ignore[attr-defined]
    assert body["version"] == 1 and body["error"]["code"] == code and body["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/claims", 405, "method_not_allowed"),
        ("PUT", "/attempts/1/start", 405, "method_not_allowed"),
        ("POST", "/attempts//start", 404, "not_found"),
        ("POST", "/nothing-here", 404, "not_found"),
        ("GET", "", 404, "not_found"),
    ],
)
def test_routing_errors_are_json_without_caching(
    api: FlaskClient,  # noqa: F811 - the fixture
    method: str,
    path: str,
    status: int,
    code: str,
) -> None:
    response = api.open(PREFIX + path, method=method)
    assert_json_error(response, status, code)
    if status == 405:
        assert "POST" in response.headers["Allow"]


def test_pages_keep_their_html_errors(browser: Browser, people: People) -> None:
    response = browser.get("/-/nothing-here-at-all")
    assert response.status_code == 404 and response.mimetype == "text/html"


def test_no_cookie_is_set_or_varied_on_for_the_runner_api(
    app: Flask,
    world: World,  # noqa: F811 - the fixture
    browser: Browser,
    people: People,
) -> None:
    register_runner_api(app, world.coordinator)
    signed_in = browser.login("rita")  # a browser with a permanent session
    assert signed_in.status_code == 302
    sent = json.dumps(claim_body()).encode()
    response = browser.client.post(
        PREFIX + "/claims",
        data=sent,
        headers={
            "Authorization": f"Bearer {world.provider_token}",
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    assert "Set-Cookie" not in response.headers
    assert "Cookie" not in response.headers.get("Vary", "")
    refused = browser.client.get(PREFIX + "/claims")
    assert "Set-Cookie" not in refused.headers
    # The refusal's other side: signing in sets the browser's session cookie, and pages answer
    # by it (they no longer re-send an unchanged cookie with every answer).
    assert "Set-Cookie" in signed_in.headers
    page = browser.get("/")
    assert page.status_code == 200 and "Cookie" in page.headers.get("Vary", "")
