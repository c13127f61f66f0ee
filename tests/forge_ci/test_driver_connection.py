"""forge_ci.db.DriverConnection, the claim's connection used through its driver, keeps the rules
of the engine's own connections (SQLite's BEGIN IMMEDIATE with query_only off, SQLAlchemy's
errors, invalidation of a connection that is gone) and lends its open transaction to an ORM
session without letting the session end it. Both databases, but where a rule is SQLite's."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    InvalidRequestError,
    OperationalError,
    ResourceClosedError,
)
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.db import SQLITE_BUSY_TIMEOUT_MS, Database, DriverConnection, begin_read
from forge_ci.settings import Settings

SQLITE = pytest.mark.parametrize("db_kind", ["sqlite"])

OPERATOR = Actor.operator()


def _other(settings: Settings) -> sqlite3.Connection:
    """A connection of another process's kind: its own file handle, no busy wait."""
    path = make_url(settings.database_url).database
    assert path is not None
    return sqlite3.connect(path, isolation_level=None, timeout=0)


@pytest.fixture
def database(database: Database) -> Database:
    """The test database with a table of notes for the driver's own writes."""
    with database.engine.begin() as connection:
        connection.execute(text("CREATE TABLE notes (name TEXT NOT NULL)"))
    return database


def _names(database: Database) -> list[str]:
    """The notes and the users, by name."""
    with database.session(read_only=True) as session:
        query = "SELECT name FROM notes UNION ALL SELECT name FROM users ORDER BY name"
        return list(session.scalars(text(query)))


def _note(connection: DriverConnection, name: str) -> None:
    placeholder = "?" if connection.dialect.name == "sqlite" else "%s"
    connection.cursor().execute(f"INSERT INTO notes (name) VALUES ({placeholder})", (name,))


def test_commit_keeps_and_the_blocks_end_rolls_back(database: Database) -> None:
    with DriverConnection(database.engine) as connection:
        assert not connection.in_transaction
        connection.begin()
        _note(connection, "ann")
        assert connection.in_transaction
        connection.commit()
        assert not connection.in_transaction
        connection.commit()  # nothing open: nothing to do
    with DriverConnection(database.engine) as connection:
        connection.begin()
        _note(connection, "bob")  # never committed
    with DriverConnection(database.engine) as connection:
        connection.begin()
        _note(connection, "carl")
        connection.rollback()
        assert not connection.in_transaction
        connection.rollback()
    assert _names(database) == ["ann"]


@SQLITE
def test_begin_takes_the_write_lock_and_commit_releases_it(
    settings: Settings, database: Database
) -> None:
    other = _other(settings)
    try:
        with DriverConnection(database.engine) as connection:
            connection.begin()
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")  # taken at BEGIN, before any statement
            connection.commit()
            other.execute("BEGIN IMMEDIATE")  # free again
            other.execute("ROLLBACK")
    finally:
        other.close()


@SQLITE
def test_a_readers_query_only_is_switched_off(database: Database) -> None:
    """A writers' session that began as a reader leaves query_only on its pooled connection;
    the driver connection's transaction may write all the same."""
    with database.session() as session:
        begin_read(session)
        with pytest.raises(DBAPIError, match="(?i)readonly|read-only"):
            session.execute(text("INSERT INTO notes (name) VALUES ('x')"))
    with DriverConnection(database.engine) as connection:  # the pool's one connection
        assert connection.cursor().execute("PRAGMA query_only").fetchone() == (1,)
        connection.begin()
        _note(connection, "dora")
        connection.commit()
        assert connection.cursor().execute("PRAGMA query_only").fetchone() == (0,)
    with database.session() as session:  # and the bookkeeping knows: a reader refuses again
        begin_read(session)
        with pytest.raises(DBAPIError, match="(?i)readonly|read-only"):
            session.execute(text("INSERT INTO notes (name) VALUES ('y')"))
    assert _names(database) == ["dora"]


@SQLITE
def test_a_refused_lock_is_sqlalchemys_error(settings: Settings, database: Database) -> None:
    other = _other(settings)
    try:
        other.execute("BEGIN IMMEDIATE")
        with DriverConnection(database.engine) as connection:
            connection.cursor().execute("PRAGMA busy_timeout=0")
            with pytest.raises(OperationalError, match="database is locked") as refused:
                connection.begin()
            assert refused.value.statement == "BEGIN IMMEDIATE"
            assert not refused.value.connection_invalidated
            connection.cursor().execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_a_connection_gone_under_the_pool_is_invalidated(database: Database) -> None:
    """The driver's connection closed under the pool: the error is SQLAlchemy's, says the
    connection was invalidated, and the pool's next connection is a new one that works."""
    connection = DriverConnection(database.engine)
    connection.begin()
    connection.driver_connection.close()
    with pytest.raises(DBAPIError, match="(?i)closed") as refused:
        connection.commit()
    assert refused.value.statement == "COMMIT"
    assert refused.value.connection_invalidated
    connection.close()
    with database.session() as session:
        create_user(session, OPERATOR, "erin", None)
        session.commit()
    assert _names(database) == ["erin"]


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_an_orm_session_joins_the_transaction_and_cannot_end_it(
    database: Database, end: str
) -> None:
    """A session bound to ``joined()`` sees the transaction's writes and adds its own; its
    commit and close end nothing: the driver connection's commit or rollback decides both."""
    with DriverConnection(database.engine) as connection:
        connection.begin()
        _note(connection, "fay")
        session = Session(bind=connection.joined(), expire_on_commit=False)
        assert connection.joined() is connection.joined()
        assert session.scalar(text("SELECT count(*) FROM notes WHERE name = 'fay'")) == 1
        create_user(session, OPERATOR, "gus", None)
        session.commit()  # the session's own: ends nothing
        session.close()
        assert connection.in_transaction
        cursor = connection.cursor()
        cursor.execute("SELECT count(*) FROM users")
        assert cursor.fetchone()[0] == 1
        getattr(connection, end)()
    assert _names(database) == (["fay", "gus"] if end == "commit" else [])


def test_joined_needs_the_transaction_begun(database: Database) -> None:
    with DriverConnection(database.engine) as connection:
        with pytest.raises(RuntimeError, match="begun"):
            connection.joined()
        connection.begin()
        session = Session(bind=connection.joined())  # PostgreSQL: before any statement too
        create_user(session, OPERATOR, "hal", None)
        session.flush()
        connection.commit()
        with pytest.raises(RuntimeError, match="begun"):
            Session(bind=connection.joined())  # the one made before: still refused
    assert _names(database) == ["hal"]


def test_a_rollback_by_the_joined_session_is_not_committed_past(database: Database) -> None:
    """The session rolled the transaction back under the connection: what came before it is
    gone, and the connection refuses to commit what would follow outside any transaction."""
    with DriverConnection(database.engine) as connection:
        connection.begin()
        _note(connection, "ida")
        session = Session(bind=connection.joined())
        create_user(session, OPERATOR, "jon", None)
        session.flush()
        session.rollback()
        with pytest.raises(InvalidRequestError, match="rolled back by the ORM session"):
            connection.commit()
    assert _names(database) == []


def test_a_closed_connection_refuses_statements_and_close_keeps_the_first_error(
    database: Database,
) -> None:
    """Once closed, the driver's connection (back in the pool) is not used; a connection that
    is gone unnoticed fails its rollback at close without replacing the error under way."""
    connection = DriverConnection(database.engine)
    connection.close()
    with pytest.raises(ResourceClosedError):
        connection.cursor()
    connection.close()  # twice: nothing
    connection = DriverConnection(database.engine)
    connection.begin()
    connection.driver_connection.close()
    with pytest.raises(KeyError, match="under way"):
        with connection:
            raise KeyError("under way")
    with database.session() as session:  # the pool replaced the broken connection
        create_user(session, OPERATOR, "kim", None)
        session.commit()
    assert _names(database) == ["kim"]
