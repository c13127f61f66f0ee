"""People with every role in ``olivia/app``, and a test client that posts forms like a browser.

``create_people`` creates one repository, ``olivia/app``, and one person per way of relating to
it:

    olivia  owner            rita   read member       will  write member
    adam    admin member     sam    site administrator
    otto    owns only ``otto/other`` (a user of another repository: olivia/app is a 404 for him)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from werkzeug.test import TestResponse

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.db import Database
from forge_ci.models import User
from forge_ci.passwords import hash_password
from forge_ci.repos import create_repository, grant
from forge_ci.settings import Settings
from forge_ci.signins import open_session
from web import auth

PASSWORD = "correct horse battery"
OPERATOR = Actor.operator()
REPO = "olivia/app"
OTHER_REPO = "otto/other"

#: name -> the role each person has in olivia/app (None: cannot read it).
ROLES: dict[str, Role | None] = {
    "olivia": Role.OWNER,
    "rita": Role.READ,
    "will": Role.WRITE,
    "adam": Role.ADMIN,
    "sam": Role.OWNER,  # a site administrator acts as owner everywhere
    "otto": None,
}
EVERYONE = ["anonymous", *ROLES]
READERS = [name for name, role in ROLES.items() if role is not None]
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class People:
    ids: dict[str, int]


@functools.cache
def password_hash() -> str:
    """PASSWORD hashed once per test session (argon2 is slow on purpose)."""
    return hash_password(PASSWORD)


def create_people(database: Database, settings: Settings) -> People:
    with database.session() as session:
        for name in ROLES:
            user = create_user(session, OPERATOR, name, None, is_admin=name == "sam")
            user.password_hash = password_hash()
        create_repository(session, settings, OPERATOR, REPO)
        create_repository(session, settings, OPERATOR, OTHER_REPO)
        grant(session, OPERATOR, REPO, "rita", Role.READ)
        grant(session, OPERATOR, REPO, "will", Role.WRITE)
        grant(session, OPERATOR, REPO, "adam", Role.ADMIN)
        session.commit()
        ids = {user.name: user.id for user in session.scalars(select(User))}
    return People(ids)


def csrf_from(response: TestResponse) -> str:
    match = CSRF_RE.search(response.get_data(as_text=True))
    assert match, "the page has no CSRF field"
    return match.group(1)


class Browser:
    """A test client with a person's session and helpers to post forms like a browser."""

    def __init__(self, app: Flask, database: Database) -> None:
        self.app = app
        self.database = database
        self.client: FlaskClient = app.test_client()

    def get(self, path: str, **kwargs: object) -> TestResponse:
        return self.client.get(path, **kwargs)  # type: ignore[arg-type]

    def token(self) -> str:
        with self.client.session_transaction() as session:
            value = session.get("csrf")
        if not isinstance(value, str):
            value = csrf_from(self.get("/-/login"))
        return value

    def post(self, path: str, data: dict[str, str] | None = None, **kwargs: object) -> TestResponse:
        """POST a form carrying this session's CSRF token (as the site's own forms do)."""
        form = {"csrf_token": self.token(), **(data or {})}
        return self.client.post(path, data=form, **kwargs)  # type: ignore[arg-type]

    def sign_in_as(self, name: str) -> Browser:
        """Sign in without the form (fast): the same session the login view would write."""
        if name == "anonymous":
            return self
        with self.database.session() as session:
            user = session.scalar(select(User).where(User.name == name))
            assert user is not None
            with self.app.test_request_context():
                binding = auth._binding(user)
            token = open_session(session, user, self.app.permanent_session_lifetime)
            session.commit()
        with self.client.session_transaction() as session:
            session.clear()
            session["uid"] = user.id
            session["sid"] = token
            session["auth"] = binding
            session["csrf"] = f"token-of-{name}-0123456789"
        return self

    def login(self, name: str, password: str = PASSWORD, next_path: str = "/") -> TestResponse:
        """Sign in through the login form."""
        page = self.get("/-/login")
        return self.client.post(
            "/-/login",
            data={
                "name": name,
                "password": password,
                "csrf_token": csrf_from(page),
                "next": next_path,
            },
        )

    def signed_in_user(self) -> int | None:
        with self.client.session_transaction() as session:
            value = session.get("uid")
        return value if isinstance(value, int) else None
