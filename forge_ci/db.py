"""Database engines and sessions, created per process (after any fork).

SQLite (the default) runs in WAL mode with foreign keys on and a busy timeout, and SQLAlchemy's
implicit transactions are replaced by explicit ``BEGIN`` so that writers that must be serialized
(claims, run numbering) can ask for ``BEGIN IMMEDIATE`` with :func:`begin_write`. PostgreSQL is
reached with psycopg 3 through ``FORGE_CI_DATABASE_URL``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from forge_ci.errors import ConfigurationError, Unavailable
from forge_ci.settings import Settings

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def create_db_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine with forge-ci's connection rules applied."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ConfigurationError("an in-memory SQLite database cannot be shared; use a file")
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **kwargs
        )
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, **kwargs)
    raise ConfigurationError(f"unsupported database {parsed.get_backend_name()!r}")


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN itself (pysqlite's own implicit
        # transactions start too late and cannot be IMMEDIATE).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("forge_ci_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def is_sqlite(session_or_engine: Session | Engine) -> bool:
    bind = (
        session_or_engine.get_bind()
        if isinstance(session_or_engine, Session)
        else session_or_engine
    )
    return bind.dialect.name == "sqlite"


def begin_write(session: Session) -> None:
    """Start the session's transaction as a serialized writer.

    On SQLite this is ``BEGIN IMMEDIATE`` (the write lock is taken now, so two writers never
    both read-then-write); on PostgreSQL it is a no-op and callers use row locks. Must be called
    before the session's first statement.
    """
    if session.in_transaction():
        raise RuntimeError("begin_write() must be called before the first statement")
    session.connection(execution_options={"forge_ci_write": True})


@contextmanager
def unavailable_on_failure() -> Iterator[None]:
    """Turn a database that cannot be reached or refuses to write into ``Unavailable``.

    For front doors that must answer a person: a dropped PostgreSQL database, a lost connection,
    a read-only or locked SQLite file all mean "try again later", not a traceback.
    Integrity errors and the like are bugs and pass through unchanged.
    """
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
        raise Unavailable("the database is unavailable; try again later") from exc


class Database:
    """One process's engine and session factory."""

    def __init__(self, settings: Settings, **engine_kwargs: Any) -> None:
        self.url = normalize_url(settings.database_url)
        self.engine = create_db_engine(self.url, **engine_kwargs)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that rolls back whatever was not committed when the block ends."""
        session = self.sessions()
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def require_current_schema(self) -> None:
        """Refuse to go on unless the schema is exactly at this code's head revision."""
        from forge_ci.migrations import check_schema

        check_schema(self.engine)

    def dispose(self) -> None:
        self.engine.dispose()
