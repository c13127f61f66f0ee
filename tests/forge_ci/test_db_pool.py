"""PostgreSQL's pooled connections: pinged before use only after being idle, replaced when gone.

Real server, real connections: the server side of a pooled connection is ended with
``pg_terminate_backend`` (allowed for the test's own role), as a server restart ends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from forge_ci import db
from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import Database, create_db_engine
from forge_ci.protocol import ClaimRequest
from forge_ci.settings import Settings
from forge_ci_testing.seeding import seed

pytestmark = pytest.mark.parametrize("db_kind", ["postgres"])  # SQLite's pool has no server


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = create_db_engine(db_url, pool_size=1, max_overflow=0)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def pings(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ping the engine's dialect sends (the real one, counted)."""
    sent: list[Any] = []
    real = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        sent.append(dbapi_connection)
        return real(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    return sent


def _backend(engine: Engine) -> int:
    with engine.connect() as connection:
        pid = connection.scalar(text("SELECT pg_backend_pid()"))
        assert isinstance(pid, int)
        return pid


def _terminate(db_url: str, pid: int) -> None:
    other = create_db_engine(db_url)
    try:
        with other.connect() as connection:
            # Waits (up to 5 s) until the backend is gone, not only signalled.
            ended = connection.scalar(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
            assert ended
    finally:
        other.dispose()


def test_a_connection_returned_a_moment_ago_is_handed_out_without_a_ping(
    engine: Engine, pings: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 60.0)
    first = _backend(engine)
    for _ in range(5):
        assert _backend(engine) == first  # the same pooled connection, five checkouts
    assert pings == []


def test_an_idle_connection_is_pinged_and_kept_when_it_answers(
    engine: Engine, pings: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
    first = _backend(engine)
    assert pings == []  # connected just now: nothing to ask
    assert _backend(engine) == first
    assert len(pings) == 1


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    engine: Engine, db_url: str, pings: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
    dropped = _backend(engine)
    _terminate(db_url, dropped)
    replacement = _backend(engine)  # no error: the ping failed and the pool reconnected
    assert replacement != dropped
    assert len(pings) == 1


def test_a_failed_ping_replaces_every_connection_of_the_pool(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server restart ends every connection: the first failed ping replaces them all, so the
    other idle connection is not pinged (and found dead) in turn."""
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
    engine = create_db_engine(db_url, pool_size=2, max_overflow=0)
    sent: list[Any] = []
    real = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda c: sent.append(c) or real(c))
    try:
        with engine.connect() as first, engine.connect() as second:
            dropped = {
                first.scalar(text("SELECT pg_backend_pid()")),
                second.scalar(text("SELECT pg_backend_pid()")),
            }
        for pid in dropped:
            _terminate(db_url, pid)
        with engine.connect() as first, engine.connect() as second:
            alive = {
                first.scalar(text("SELECT pg_backend_pid()")),
                second.scalar(text("SELECT pg_backend_pid()")),
            }
        assert not alive & dropped
        assert len(sent) == 1
    finally:
        engine.dispose()


def test_within_the_window_a_dropped_connection_fails_once_then_is_replaced(
    engine: Engine, db_url: str, pings: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trade-off the window makes, shown: not pinged, the dropped connection's first
    statement fails (a disconnect, which invalidates it), and the next checkout is new."""
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 60.0)
    dropped = _backend(engine)
    _terminate(db_url, dropped)
    with pytest.raises(OperationalError) as failed:
        _backend(engine)
    assert failed.value.connection_invalidated
    assert _backend(engine) != dropped
    assert pings == []


def test_a_claim_on_a_dropped_connection_says_so_and_the_next_claim_works(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside the window a dropped connection reaches the claim's own statements on the bare
    cursor: the claim fails with the server's error, marked as an invalidated connection (not
    with an error of the rollback on the dead connection, which hid it), and the next claim
    gets a new connection and the job."""
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 60.0)
    (token,) = seed(settings, 1, 2, 1, jobs_per_run=2)
    database = Database(settings, pool_size=1, max_overflow=0)

    def claim() -> Any:
        request = ClaimRequest(new_request_id(), new_token(), 0)
        return claims.claim(database.session, token, request, lock_dir=settings.locks_dir)

    try:
        assert claim() is not None
        _terminate(settings.database_url, _backend(database.engine))
        with pytest.raises(OperationalError) as failed:
            claim()
        assert failed.value.connection_invalidated
        assert failed.value.statement is not None and "providers" in failed.value.statement
        assert claim() is not None
    finally:
        database.dispose()
