"""One database session per request, from the core's :class:`forge_ci.db.Database`.

The web uses the same engine rules as every other process (:mod:`forge_ci.db`) and passes the
session to the core's use cases, exactly like the CLI does. The session is opened on first use
in a request and closed when the request ends; whatever a view did not commit is rolled back.
Requests that must not change anything (GET, HEAD, OPTIONS) get a read-only session, which
neither waits for nor blocks writers; every other request's session is a writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Flask, current_app, g, request
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from forge_ci.db import Database
from forge_ci.settings import Settings
from web.deltas import Answers, Bases

EXTENSION = "forge_ci"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class WebState:
    """What the application holds for its process: the settings, the database and what the
    run pages' polls were last sent."""

    settings: Settings
    database: Database
    #: The bases of the run pages' answers lately sent (:mod:`web.deltas`).
    bases: Bases = field(default_factory=Bases)
    #: The runs those answers presented, for a few seconds (:mod:`web.deltas`).
    answers: Answers = field(default_factory=Answers)


def init_app(app: Flask, settings: Settings, database: Database) -> None:
    app.extensions[EXTENSION] = WebState(settings, database)
    app.teardown_appcontext(_close_session)


def state(app: Flask | None = None) -> WebState:
    value: WebState = (app or current_app).extensions[EXTENSION]
    return value


def settings() -> Settings:
    return state().settings


def db() -> Session:
    """This request's session (opened on first use; read-only for safe methods)."""
    session: Session | None = g.get("db_session")
    if session is None:
        database = state().database
        factory = database.read_sessions if request.method in SAFE_METHODS else database.sessions
        session = factory()
        g.db_session = session
    return session


def reading() -> Connection:
    """A plain read-only connection for a statement or two, without this request's session
    (:meth:`forge_ci.db.Database.reading`; a context manager)."""
    return state().database.reading()


def _close_session(_exc: BaseException | None) -> None:
    session: Session | None = g.pop("db_session", None)
    if session is not None:
        session.close()
