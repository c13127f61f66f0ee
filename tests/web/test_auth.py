"""Signing in and out: refusals that do not say why, fresh sessions, CSRF on every form."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.models import User
from forge_ci.passwords import hash_password
from tests.web.people import PASSWORD, Browser, People, csrf_from
from web.auth import LOGIN_REFUSED, safe_next


def test_login_with_the_right_password_signs_in_and_returns_to_next(
    browser: Browser, people: People
) -> None:
    response = browser.login("rita", next_path="/olivia/app")
    assert response.status_code == 302
    assert response.headers["Location"] == "/olivia/app"
    assert browser.signed_in_user() == people.ids["rita"]
    page = browser.get("/")
    assert page.status_code == 200
    assert "rita" in page.get_data(as_text=True)


@pytest.mark.parametrize(
    ("name", "password"),
    [
        ("rita", "wrong password!"),  # wrong password
        ("nobody", PASSWORD),  # unknown user
        ("", PASSWORD),  # empty name
        ("rita", ""),  # empty password
        ("rita", "x" * 5000),  # absurd password
        ("sshonly", PASSWORD),  # an account without a password
        ("gone", PASSWORD),  # a deactivated account
    ],
)
def test_every_login_refusal_says_the_same_thing(
    browser: Browser, database: Database, name: str, password: str
) -> None:
    with database.session() as session:
        session.add(User(name="sshonly", password_hash=None))
        session.add(User(name="gone", password_hash=hash_password(PASSWORD), is_active=False))
        session.commit()
    response = browser.login(name, password)
    assert response.status_code == 401
    body = response.get_data(as_text=True)
    assert LOGIN_REFUSED in body
    assert browser.signed_in_user() is None
    assert browser.get("/").status_code == 302  # still anonymous


def test_a_login_refusal_escapes_what_was_typed(browser: Browser) -> None:
    response = browser.login("<script>alert(1)</script>", "whatever-password")
    body = response.get_data(as_text=True)
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_login_gives_a_fresh_session_and_csrf_token(browser: Browser) -> None:
    page = browser.get("/-/login")
    before = csrf_from(page)
    browser.login("rita")
    after = browser.token()
    assert after != before
    # The token from before signing in no longer works.
    refused = browser.client.post("/-/logout", data={"csrf_token": before})
    assert refused.status_code == 400
    assert browser.signed_in_user() is not None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/olivia/app/pipelines?x=1", "/olivia/app/pipelines?x=1"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("/ok\r\nSet-Cookie: x", "/"),
        ("", "/"),
        (None, "/"),
    ],
)
def test_login_returns_only_to_same_site_paths(value: str | None, expected: str) -> None:
    assert safe_next(value) == expected


def test_login_refuses_an_external_next(browser: Browser) -> None:
    response = browser.login("rita", next_path="https://evil.example/")
    assert response.headers["Location"] == "/"


def test_a_signed_in_visitor_of_the_login_page_goes_home(as_person) -> None:  # type: ignore[no-untyped-def]
    response = as_person("rita").get("/-/login")
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_logout_needs_post_and_the_csrf_token(browser: Browser) -> None:
    browser.login("rita")
    assert browser.get("/-/logout").status_code == 405
    no_token = browser.client.post("/-/logout")
    assert no_token.status_code == 400
    assert "did not come from this site" in no_token.get_data(as_text=True)
    assert browser.signed_in_user() is not None
    response = browser.post("/-/logout")
    assert response.status_code == 302
    assert response.headers["Location"] == "/-/login"
    assert browser.signed_in_user() is None
    assert "You have signed out." in browser.get("/-/login").get_data(as_text=True)
    assert browser.get("/").status_code == 302


def test_the_login_form_itself_needs_the_csrf_token(browser: Browser) -> None:
    for data in (
        {"name": "rita", "password": PASSWORD},
        {"name": "rita", "password": PASSWORD, "csrf_token": "forged"},
    ):
        browser.get("/-/login")
        response = browser.client.post("/-/login", data=data)
        assert response.status_code == 400
        assert browser.signed_in_user() is None


def test_the_csrf_token_may_come_in_a_header(browser: Browser) -> None:
    browser.login("rita")
    response = browser.client.post("/-/logout", headers={"X-CSRF-Token": browser.token()})
    assert response.status_code == 302
    assert browser.signed_in_user() is None


def test_deactivating_a_user_ends_their_sessions(browser: Browser, database: Database) -> None:
    browser.login("rita")
    assert browser.get("/").status_code == 200
    with database.session() as session:
        user = session.scalar(select(User).where(User.name == "rita"))
        assert user is not None
        user.is_active = False
        session.commit()
    assert browser.get("/").status_code == 302
    assert browser.get("/olivia/app").status_code == 404


def test_changing_the_password_ends_sessions_signed_in_with_the_old_one(
    browser: Browser, database: Database
) -> None:
    browser.login("rita")
    with database.session() as session:
        user = session.scalar(select(User).where(User.name == "rita"))
        assert user is not None
        user.password_hash = hash_password("a brand new password")
        session.commit()
    assert browser.get("/").status_code == 302
    assert browser.login("rita", "a brand new password").status_code == 302
    assert browser.get("/").status_code == 200


def test_a_forged_session_cookie_is_not_trusted(browser: Browser, people: People) -> None:
    with browser.client.session_transaction() as session:
        session["uid"] = people.ids["sam"]
        session["auth"] = "0" * 64
    assert browser.get("/").status_code == 302
    assert browser.get("/-/admin").status_code == 302
