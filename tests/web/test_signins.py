"""Sign-ins: revocable sessions and the login throttle (issue #14, findings 7 and 8).

Before: a copied cookie still worked after logout, 480 wrong passwords were all answered, and
one login CSRF token served every attempt.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select

from forge_ci import signins
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.models import User, utcnow
from tests.web.people import PASSWORD, Browser, People, csrf_from

COOKIE = "forge_ci_session"


def copy_of(app: Flask, database: Database, browser: Browser) -> Browser:
    """Another client carrying the same session cookie (a stolen or copied cookie)."""
    cookie = browser.client.get_cookie(COOKIE)
    assert cookie is not None
    thief = Browser(app, database)
    thief.client.set_cookie(COOKIE, cookie.value)
    return thief


def signed_in(browser: Browser) -> bool:
    return browser.get("/").status_code == 200


def test_logout_ends_the_session_for_every_copy_of_its_cookie(
    app: Flask, database: Database, browser: Browser, people: People
) -> None:
    assert browser.login("rita").status_code == 302
    thief = copy_of(app, database, browser)
    assert signed_in(thief)
    assert browser.post("/-/logout").status_code == 302
    assert not signed_in(browser)
    assert not signed_in(thief)  # before: still signed in
    # Signing in again makes a new session; the old cookie stays dead.
    assert browser.login("rita").status_code == 302
    assert signed_in(browser) and not signed_in(thief)


@pytest.mark.parametrize("change", ["password", "deactivation", "sign out everywhere"])
def test_sessions_end_on_password_change_deactivation_and_revocation(
    app: Flask, database: Database, browser: Browser, people: People, change: str
) -> None:
    assert browser.login("rita").status_code == 302
    thief = copy_of(app, database, browser)
    other = Browser(app, database)
    assert other.login("will").status_code == 302
    with database.session() as session:
        user = session.scalar(select(User).where(User.name == "rita"))
        assert user is not None
        if change == "password":
            user.password_hash = "$argon2id$v=19$m=65536,t=3,p=4$changed$changed"
        elif change == "deactivation":
            user.is_active = False
        else:
            assert signins.revoke_user_sessions(session, Actor.operator(), user.id) == 1
        session.commit()
    assert not signed_in(browser) and not signed_in(thief)
    assert signed_in(other)  # someone else's session is untouched


def test_only_an_administrator_signs_someone_else_out(database: Database, people: People) -> None:
    with database.session() as session:
        rita = Actor(user_id=people.ids["rita"], name="rita")
        assert signins.revoke_user_sessions(session, rita, people.ids["rita"]) == 0
        with pytest.raises(signins.PermissionDenied):
            signins.revoke_user_sessions(session, rita, people.ids["will"])


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> Any:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(signins, "utcnow", fake)
    return fake


def attempt(browser: Browser, name: str, password: str, address: str = "127.0.0.1") -> Any:
    page = browser.client.get("/-/login", environ_base={"REMOTE_ADDR": address})
    return browser.client.post(
        "/-/login",
        data={"name": name, "password": password, "csrf_token": csrf_from(page), "next": "/"},
        environ_base={"REMOTE_ADDR": address},
    )


def test_failures_on_one_account_block_it_for_growing_times(
    browser: Browser, people: People, clock: Clock
) -> None:
    for _ in range(signins.FREE_ACCOUNT_FAILURES):
        assert attempt(browser, "rita", "wrong password").status_code == 401
    blocks = []
    for _ in range(4):
        assert attempt(browser, "rita", "wrong password").status_code == 401
        # Blocked now: even the right password is not checked.
        blocked = attempt(browser, "rita", PASSWORD)
        assert blocked.status_code == 429
        assert "Too many failed sign-ins" in blocked.get_data(as_text=True)
        blocks.append(int(blocked.headers["Retry-After"]))
        clock.now += timedelta(seconds=blocks[-1])
    assert blocks == [1, 2, 4, 8]
    # Another account from the same address is not blocked by rita's failures.
    assert attempt(browser, "will", PASSWORD).status_code == 302
    # Once the block has passed, the right password signs in and the count starts over.
    other = Browser(browser.app, browser.database)
    assert attempt(other, "rita", PASSWORD).status_code == 302
    assert attempt(Browser(browser.app, browser.database), "rita", "wrong").status_code == 401


def test_failures_from_one_address_block_that_address(
    browser: Browser, people: People, clock: Clock
) -> None:
    names = [f"guess{i}" for i in range(signins.FREE_ADDRESS_FAILURES + 1)]
    for name in names:
        assert attempt(browser, name, "wrong password", "192.0.2.7").status_code == 401
    assert attempt(browser, "rita", PASSWORD, "192.0.2.7").status_code == 429
    assert attempt(browser, "rita", PASSWORD, "198.51.100.1").status_code == 302
    # A day later the address's failures are forgotten.
    clock.now += signins.FORGET_AFTER + timedelta(seconds=1)
    assert (
        attempt(Browser(browser.app, browser.database), "will", PASSWORD, "192.0.2.7").status_code
        == 302
    )


def test_a_login_csrf_token_is_good_for_one_attempt(browser: Browser, people: People) -> None:
    page = browser.get("/-/login")
    token = csrf_from(page)
    form = {"name": "rita", "password": "wrong password", "csrf_token": token, "next": "/"}
    first = browser.client.post("/-/login", data=form)
    assert first.status_code == 401
    again = browser.client.post("/-/login", data=form)
    assert again.status_code == 400  # before: the same token was accepted every time
    fresh = csrf_from(first)
    assert fresh != token
    form.update(password=PASSWORD, csrf_token=fresh)
    assert browser.client.post("/-/login", data=form).status_code == 302
