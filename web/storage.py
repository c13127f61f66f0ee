"""One database session per request, from the core's :class:`forge_ci.db.Database`.

The web uses the same engine rules as every other process (SQLite WAL and ``BEGIN IMMEDIATE``
writers through :func:`forge_ci.db.begin_write`, psycopg 3 on PostgreSQL) and passes the
session to the core's use cases, exactly like the CLI does. The session is opened on first use
in a request and closed when the request ends; whatever a view did not commit is rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, current_app, g
from sqlalchemy.orm import Session

from forge_ci.db import Database
from forge_ci.settings import Settings

EXTENSION = "forge_ci"


@dataclass(frozen=True)
class WebState:
    """What the application holds for its process: the settings and the database."""

    settings: Settings
    database: Database


def init_app(app: Flask, settings: Settings, database: Database) -> None:
    app.extensions[EXTENSION] = WebState(settings, database)
    app.teardown_appcontext(_close_session)


def state(app: Flask | None = None) -> WebState:
    value: WebState = (app or current_app).extensions[EXTENSION]
    return value


def settings() -> Settings:
    return state().settings


def db() -> Session:
    """This request's session (opened on first use)."""
    session: Session | None = g.get("db_session")
    if session is None:
        session = state().database.sessions()
        g.db_session = session
    return session


def _close_session(_exc: BaseException | None) -> None:
    session: Session | None = g.pop("db_session", None)
    if session is not None:
        session.close()
