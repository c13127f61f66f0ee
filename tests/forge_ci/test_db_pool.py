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
from forge_ci.db import create_db_engine

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
            assert connection.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
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
