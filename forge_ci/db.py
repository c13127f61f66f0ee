"""Database engines and sessions, created per process (after any fork).

SQLite (the default) runs in WAL mode with foreign keys on and a busy timeout. PostgreSQL is
reached with psycopg 3 through ``FORGE_CI_DATABASE_URL``.

**Sessions are writers unless they say they only read.** In WAL mode a deferred SQLite
transaction that reads, and then writes after another connection committed, is refused at once
with "database is locked" (a snapshot conflict: the busy timeout does not apply, because waiting
could never help). A running forge always has some process committing (the worker, the lease
sweeper, log ingestion), so every transaction that may write must take the write lock before its
first read. Hence:

======================  ==================================  =================================
session                 SQLite                              PostgreSQL
======================  ==================================  =================================
``session()``           ``BEGIN IMMEDIATE`` (waits for the  ordinary transaction (row locks
                        lock up to the busy timeout)        where use cases need them)
``session(read_only)``  ``BEGIN`` + ``PRAGMA query_only``   ``READ ONLY`` transaction
======================  ==================================  =================================

A read-only session that tries to write fails loudly on both databases instead of racing, so
the rule cannot be broken quietly. On SQLite read-only sessions have a connection pool of their
own (``Database.read_engine``): switching ``query_only`` on a shared connection cost two
``PRAGMA``s, and the statements after a switch ran several times slower (bench/README.md).
A writer should not hold its transaction across anything slow (git, the network): commit or
roll back first, since it blocks every other writer.

The claim's hot path uses a pooled connection through its driver (:class:`DriverConnection`),
under the same rules, without a session's or a Core connection's machinery.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, UniqueConstraint, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.orm import Session, sessionmaker

from forge_ci.errors import ConfigurationError, Unavailable
from forge_ci.settings import Settings, require_data_dir

SQLITE_BUSY_TIMEOUT_MS = 30_000

#: A pooled PostgreSQL connection idle this long is pinged before use (:func:`_ping_when_idle`).
PING_AFTER_IDLE_S = 0.5
_RETURNED_AT = "forge_ci_returned_at"

#: Execution options read by the SQLite "begin" listener.
_READ_ONLY = "forge_ci_read_only"
_WRITE = "forge_ci_write"
#: A connection joined to a transaction its driver connection already has open
#: (:meth:`DriverConnection.joined`): its begin issues nothing.
_JOINED = "forge_ci_joined"
#: psycopg's ``TransactionStatus.IDLE`` (libpq's PQTRANS_IDLE): no transaction open.
_PG_IDLE = 0


class SessionScope(Protocol):
    """What use cases that open their own transactions take: ``Database.session``."""

    def __call__(self, *, read_only: bool = False) -> AbstractContextManager[Session]: ...


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
        # Pinging is forge-ci's own (``pool_pre_ping=False`` turns it off).
        ping = kwargs.pop("pool_pre_ping", True)
        engine = create_engine(url, **kwargs)
        if ping:
            _ping_when_idle(engine)
        _end_reads_keeping_prepared_statements(engine)
        return engine
    raise ConfigurationError(f"unsupported database {parsed.get_backend_name()!r}")


def _end_reads_keeping_prepared_statements(engine: Engine) -> None:
    """psycopg drops every statement it has prepared on a connection whenever a transaction
    there ends in a rollback (``DEALLOCATE ALL``, a round trip more: a rolled-back schema
    change could outdate them). Then each hot statement is planned anew for each of its next
    five runs, as a new one is; the claim's take costs about 5 ms to plan against 0.5 ms to
    run. Every reader's transaction ended in a rollback, and readers (pages, polls, the
    runner API's reads) share the pool with claims. A read-only transaction has nothing to
    undo and changed no schema: it is ended with ``COMMIT`` (the same outcome), after which
    psycopg's rollback has nothing left to do. A writer's rollback, and a failed
    transaction's, stay psycopg's."""
    psycopg = engine.dialect.loaded_dbapi
    in_transaction = psycopg.pq.TransactionStatus.INTRANS  # not failed, not idle

    @event.listens_for(engine, "rollback")
    def _on_rollback(conn: Connection) -> None:
        if conn.closed or conn.invalidated:
            return
        if not conn.get_execution_options().get("postgresql_readonly"):
            return
        driver: Any = conn.connection.driver_connection
        if driver.pgconn.transaction_status != in_transaction:
            return
        try:
            driver.commit()
        except psycopg.Error:
            pass  # the rollback that follows raises what is wrong, as SQLAlchemy expects


def _ping_when_idle(engine: Engine) -> None:
    """A pooled PostgreSQL connection is pinged before it is handed out only when it has been
    idle for :data:`PING_AFTER_IDLE_S` or longer, and replaced when the ping fails (SQLAlchemy's
    ``pool_pre_ping`` pinged at every checkout: a round trip more for every claim, which
    waits for the server's turn on a busy machine). A connection returned to the pool a moment
    ago was working a moment ago; one the server dropped in that moment fails its first
    statement, and SQLAlchemy then replaces the pool's connections. A failed ping, too, means
    the server was probably restarted: every connection older than it is replaced, as
    ``pool_pre_ping`` does, not pinged in turn."""

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _handed_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get(_RETURNED_AT)  # none: connected just now
        if returned is None or time.monotonic() - returned < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            # The pool discards its connections and checks out a new one.
            raise sa_exc.InvalidatePoolError(f"the idle connection is gone: {error}") from error


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
        options = conn.get_execution_options()
        if options.get(_JOINED):
            return
        read_only = bool(options.get(_READ_ONLY)) and not options.get(_WRITE)
        # query_only is a property of the connection, which the pool hands to readers and
        # writers in turn: set it whenever it must change.
        if conn.info.get(_READ_ONLY, False) != read_only:
            _on_driver(conn, f"PRAGMA query_only={'ON' if read_only else 'OFF'}")
            conn.info[_READ_ONLY] = read_only
        _on_driver(conn, "BEGIN" if read_only else "BEGIN IMMEDIATE")


def _on_driver(conn: Connection, statement: str) -> None:
    """``statement`` on the driver's connection under ``conn``: SQLAlchemy's own execution
    costs several times what SQLite does, at the start of every transaction. The driver's
    errors ("database is locked") are raised as SQLAlchemy's, as its execution raises them,
    and a connection found closed under the pool is invalidated (:func:`invalidate_if_gone`).
    The statement is not seen by execution events or echo."""
    try:
        conn.connection.driver_connection.execute(statement)  # type: ignore[union-attr]
    except conn.dialect.loaded_dbapi.Error as error:
        wrapped = driver_error(conn.dialect, statement, None, error)
        invalidate_if_gone(conn, wrapped)
        raise wrapped from error


def driver_error(
    dialect: Dialect, statement: str, parameters: Any, error: Exception
) -> sa_exc.DBAPIError:
    """The driver's ``error`` from ``statement``, sent past SQLAlchemy's execution, as that
    execution raises it (``IntegrityError``, ``OperationalError``...)."""
    wrapped = sa_exc.DBAPIError.instance(
        statement, parameters, error, dialect.loaded_dbapi.Error, dialect=dialect
    )
    assert isinstance(wrapped, sa_exc.DBAPIError)  # ``error`` is one of the driver's
    return wrapped


class DriverConnection:
    """A pooled connection of an engine, used through its driver: the claim's hot path, where a
    SQLAlchemy ``Connection`` with its transaction (events, transaction objects, the commit's
    layers) cost about a tenth of a claim's CPU (bench/README.md).

    The same rules as the engine's own connections: on SQLite a transaction is ``BEGIN
    IMMEDIATE`` (the connection's ``query_only`` switched off first if a reader left it on); on
    PostgreSQL the driver opens it with the first statement. The driver's errors are raised as
    SQLAlchemy's (``IntegrityError``, ``OperationalError``...), and a connection found gone
    (closed under the pool, ended by the server) is invalidated. Statements run on
    :meth:`cursor`'s cursors. Use it as a context manager: the block's end rolls back what was
    not committed and gives the connection back to the pool.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        self._sqlite = self.dialect.name == "sqlite"
        try:
            self._pooled = engine.raw_connection()
        except self.dialect.loaded_dbapi.Error as error:
            raise driver_error(self.dialect, "connect", None, error) from error
        self._driver: Any = self._pooled.driver_connection
        #: The SQLAlchemy connection joined to the open transaction (:meth:`joined`).
        self._joined: Connection | None = None
        #: Between :meth:`begin` and the transaction's end (on PostgreSQL the driver's
        #: transaction opens only with the first statement).
        self._begun = False
        #: The joined session rolled the transaction back under this connection.
        self._lost = False
        self._closed = False

    @property
    def driver_connection(self) -> Any:
        """The driver's own connection (sqlite3's, psycopg's); refused once closed (it is
        back in the pool, maybe another holder's)."""
        if self._closed:
            raise sa_exc.ResourceClosedError("this driver connection is closed")
        return self._driver

    def cursor(self) -> Any:
        """A driver cursor, in the connection's transaction when one is open."""
        return self.driver_connection.cursor()

    @property
    def in_transaction(self) -> bool:
        driver = self.driver_connection
        if self._sqlite:
            return bool(driver.in_transaction)
        return bool(driver.info.transaction_status != _PG_IDLE)

    def begin(self) -> None:
        """Start a writer's transaction: on SQLite ``BEGIN IMMEDIATE`` (waits for the write
        lock up to the busy timeout); on PostgreSQL the first statement opens it."""
        self._begun, self._lost = True, False
        if not self._sqlite:
            return
        info = self._pooled.info
        if info.get(_READ_ONLY, False):
            self._call("PRAGMA query_only=OFF")
            info[_READ_ONLY] = False
        self._call("BEGIN IMMEDIATE")

    def commit(self) -> None:
        """Commit the open transaction (nothing to do when none is open, as after a COMMIT
        sent with the last statements); refused when the joined session rolled it back."""
        self.require_not_lost()
        self._begun = False
        self._call("COMMIT", self._driver.commit)

    def rollback(self) -> None:
        """Roll back the open transaction (nothing to do when none is open)."""
        self._begun = False
        self._call("ROLLBACK", self._driver.rollback)

    def ended(self) -> None:
        """The transaction was ended by a statement sent with others (a pipelined COMMIT)."""
        self._begun = False

    def require_not_lost(self) -> None:
        """Refuse to go on after the joined session rolled the transaction back: what
        followed would have run, and committed, outside it."""
        if self._lost:
            raise sa_exc.InvalidRequestError(
                "the transaction was rolled back by the ORM session joined to it"
            )

    def joined(self) -> Connection:
        """A SQLAlchemy connection in this connection's open transaction, for an ORM session
        (``Session(bind=...)``): the session's commit and close end nothing (this object ends
        the transaction); a rollback of the session ends it, and :meth:`commit` then refuses.
        Made once, when first asked for."""
        if not self._begun:
            raise RuntimeError("joined() needs the transaction begun")
        if self._joined is None:
            joined = Connection(self.engine, connection=self._pooled)
            joined.execution_options(**{_JOINED: True})
            joined.begin()  # SQLAlchemy's bookkeeping only: the transaction is open already
            event.listen(joined, "rollback", self._rolled_back)
            self._joined = joined
        return self._joined

    def _rolled_back(self, _connection: Connection) -> None:
        if self._begun:
            self._lost = True

    def invalidate_if_gone(self, error: sa_exc.DBAPIError) -> None:
        """After ``error`` from one of this connection's statements: when it says the
        connection is gone, the pool discards it and the error says so (as
        :func:`invalidate_if_gone`)."""
        original: Any = error.orig
        if original is None or self._closed or self._pooled.dbapi_connection is None:
            return
        if self.dialect.is_disconnect(original, self._driver, None):
            error.connection_invalidated = True
            self._invalidate(original)

    def close(self) -> None:
        """Roll back what was not committed; give the connection back to the pool. A
        connection whose rollback fails is discarded, and the failure not raised: the block
        may be ending with the error that says what went wrong."""
        if self._closed:
            return
        try:
            if self._pooled.dbapi_connection is not None and self.in_transaction:
                self._driver.rollback()
        except self.dialect.loaded_dbapi.Error as error:
            self._invalidate(error)
        finally:
            self._closed = True
            self._begun = False
            # The joined connection, when there is one, owns the pooled one now.
            (self._joined or self._pooled).close()

    def _invalidate(self, error: BaseException) -> None:
        (self._joined or self._pooled).invalidate(error)

    def __enter__(self) -> DriverConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _call(self, statement: str, call: Callable[[], object] | None = None) -> None:
        """``call`` (else ``statement`` executed) on the driver, its errors SQLAlchemy's."""
        try:
            if call is None:
                self.driver_connection.execute(statement)
            else:
                call()
        except self.dialect.loaded_dbapi.Error as error:
            wrapped = driver_error(self.dialect, statement, None, error)
            self.invalidate_if_gone(wrapped)
            raise wrapped from error


def invalidate_if_gone(connection: Connection, error: sa_exc.StatementError) -> None:
    """After ``error`` from a statement sent past SQLAlchemy's execution (on the driver's
    connection or a bare cursor): when it says the connection is gone (closed under the pool,
    or ended by the server), the connection is invalidated and the error says so, as
    SQLAlchemy's own execution does; else the connection's end would roll back on the dead
    connection and raise that error instead of this one."""
    if connection.invalidated or not isinstance(error, sa_exc.DBAPIError) or error.orig is None:
        return
    original: Any = error.orig  # the driver's own error (a DB-API Error)
    dbapi_connection = connection.connection.dbapi_connection
    if connection.dialect.is_disconnect(original, dbapi_connection, None):
        error.connection_invalidated = True
        connection.invalidate(original)


def is_sqlite(session_or_engine: Session | Engine) -> bool:
    bind = (
        session_or_engine.get_bind()
        if isinstance(session_or_engine, Session)
        else session_or_engine
    )
    return bind.dialect.name == "sqlite"


def reader(engine: Engine) -> Engine:
    """``engine`` for connections that only read (see the module docstring)."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(postgresql_readonly=True)
    return engine.execution_options(**{_READ_ONLY: True})


def begin_read(session: Session) -> None:
    """Start the session's transaction as a reader (deferred, refusing writes), now.

    For a use case's long reading phase (git, parsing) in a writing session, so that it does not
    hold the write lock meanwhile. Must be called before the transaction's first statement.
    """
    if session.in_transaction():
        raise RuntimeError("begin_read() must be called before the first statement")
    postgresql = session.get_bind().dialect.name == "postgresql"
    session.connection(
        execution_options={_READ_ONLY: True, _WRITE: False, "postgresql_readonly": postgresql}
    )


def begin_write(session: Session) -> None:
    """Start the session's transaction as a serialized writer, now.

    Every transaction of a writing session is one already (see the module docstring); this
    makes the point at which the lock is taken explicit, and turns a transaction of a read-only
    session into a writer. On SQLite this is ``BEGIN IMMEDIATE``; on PostgreSQL callers use row
    locks. Must be called before the transaction's first statement.
    """
    if session.in_transaction():
        raise RuntimeError("begin_write() must be called before the first statement")
    session.connection(execution_options={_WRITE: True, "postgresql_readonly": False})


def violates(error: sa_exc.IntegrityError, constraint: UniqueConstraint) -> bool:
    """Whether ``error`` is a violation of ``constraint`` (a model's unique constraint).

    PostgreSQL names the constraint; SQLite names its columns
    (``UNIQUE constraint failed: attempts.provider_id, attempts.request_id``).
    """
    diagnostics = getattr(error.orig, "diag", None)
    if diagnostics is not None:
        return bool(diagnostics.constraint_name == constraint.name)
    table = constraint.table.name
    columns = ", ".join(f"{table}.{column.name}" for column in constraint.columns)
    return str(error.orig) == f"UNIQUE constraint failed: {columns}"


#: What a database that cannot be reached, opened or written raises (not a bug of ours).
UNAVAILABLE_ERRORS = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


@contextmanager
def unavailable_on_failure(url: str | None = None, *, detail: bool = False) -> Iterator[None]:
    """Turn a database that cannot be reached or refuses to write into ``Unavailable``.

    For front doors that must answer a person: a dropped PostgreSQL database, a lost connection,
    a read-only or locked SQLite file all mean "try again later", not a traceback.
    Integrity errors and the like are bugs and pass through unchanged. With ``detail`` or a
    ``url`` (for the operator, never for users) the message gives the driver's reason and the
    fix, and names the database.
    """
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        if url is None and not detail:
            raise Unavailable("the database is unavailable; try again later") from exc
        which = f" {display_url(url)}" if url else ""
        raise Unavailable(
            f"cannot use the database{which} ({failure_reason(exc)}); check"
            " FORGE_CI_DATABASE_URL (or FORGE_CI_DATA_DIR for the default SQLite file) and that"
            " the database is running"
        ) from exc


def display_url(url: str) -> str:
    """``url`` without its password, for messages."""
    return make_url(normalize_url(url)).render_as_string(hide_password=True)


def failure_reason(exc: BaseException) -> str:
    """The driver's first line for a database error (no SQL, no SQLAlchemy background link)."""
    original = getattr(exc, "orig", None) or exc
    lines = str(original).strip().splitlines()
    return lines[0][:300] if lines else type(original).__name__


def require_database(settings: Settings, *, create: bool = False) -> None:
    """Refuse, naming what is missing and the fix, to open a database that cannot be there.

    Checks the data directory, and for SQLite that its file exists (``create``: that its folder
    does), before anything connects: SQLite would otherwise create an empty database file, or
    fail with "unable to open database file", which names neither the file nor the fix.
    """
    require_data_dir(settings)
    parsed = make_url(normalize_url(settings.database_url))
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return
    path = Path(parsed.database)
    if create:
        if not path.parent.is_dir():
            raise ConfigurationError(
                f"the folder {path.parent} of the SQLite database does not exist; create it or"
                " fix FORGE_CI_DATABASE_URL"
            )
    elif not path.is_file():
        raise ConfigurationError(
            f"there is no forge-ci database at {path}; run `forge-ci init` to create one, or"
            " point FORGE_CI_DATA_DIR (or FORGE_CI_DATABASE_URL) at an existing installation"
        )


class Database:
    """One process's engine and session factory."""

    def __init__(self, settings: Settings, **engine_kwargs: Any) -> None:
        self.url = normalize_url(settings.database_url)
        self.engine = create_db_engine(self.url, **engine_kwargs)
        # SQLite: read-only sessions get a pool of their own, so a connection's query_only is
        # set once, not switched (two PRAGMAs) whenever a reader follows a writer on it.
        self.read_engine = (
            create_db_engine(self.url, **engine_kwargs)
            if self.engine.dialect.name == "sqlite"
            else self.engine
        )
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._reader = reader(self.read_engine)
        self.read_sessions = sessionmaker(self._reader, expire_on_commit=False)

    @contextmanager
    def session(self, *, read_only: bool = False) -> Iterator[Session]:
        """A session that rolls back whatever was not committed when the block ends.

        Its transactions are writers unless ``read_only`` (see the module docstring): pass it
        wherever the block only reads, so that it neither waits for nor blocks writers.
        """
        session = (self.read_sessions if read_only else self.sessions)()
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def reading(self) -> Connection:
        """A plain connection that only reads, without an ORM session (use it as a context
        manager: it rolls back when the block ends). For a statement that runs many times a
        second and must cost little (a run page's unchanged poll): an ORM session's begin,
        rollback and close cost more than such a statement itself."""
        return self._reader.connect()

    def require_current_schema(self) -> None:
        """Refuse to go on unless the schema is exactly at this code's head revision."""
        from forge_ci.migrations import check_schema

        with unavailable_on_failure(self.url):
            check_schema(reader(self.engine))  # only reads: takes no write lock

    @property
    def engines(self) -> tuple[Engine, ...]:
        """Every engine of this database (SQLite: the writers' and the readers'): where an event
        listener must see every statement."""
        return (
            (self.engine,) if self.read_engine is self.engine else (self.engine, self.read_engine)
        )

    def dispose(self) -> None:
        for engine in self.engines:
            engine.dispose()
