"""Core statements compiled once and run on the bare DB-API cursor: the claim's hot path.

SQLAlchemy's execution of a prebuilt Core statement costs about 0.1-0.2 ms of Python per
statement (cache-key lookup, execution context, parameter and result set-up), several times
what SQLite itself spends on a claim's index seeks (bench/README.md). A :class:`Prepared`
statement keeps the statement written in Core (the same tables, types and dialect rules) but
compiles it once per dialect, and at each execution only applies the columns' own bind and
result processors (datetimes as SQLite stores them, JSON) around ``cursor.execute``. It runs
inside the caller's transaction, on a cursor of the driver's connection (the claim's
:class:`forge_ci.db.DriverConnection`, or the one under a SQLAlchemy connection). The
driver's errors, also while rows are fetched, are raised as SQLAlchemy's (``IntegrityError``
and the rest), as its execution would, and a bind without a value is a ``KeyError`` (never a
silent NULL).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from sqlalchemy import bindparam, insert, literal
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.schema import Table

from forge_ci.db import DriverConnection, driver_error

_Processor = Callable[[Any], Any] | None


class Prepared:
    """One statement compiled for one dialect; see the module docstring."""

    def __init__(self, statement: Any, dialect: Dialect, *, many: bool = False) -> None:
        # ``many``: for executemany (no RETURNING of the new keys added on PostgreSQL).
        compiled = statement.compile(dialect=dialect, for_executemany=many)
        self._dialect = dialect
        self.sql = str(compiled)
        if "POSTCOMPILE" in self.sql:
            raise ValueError(f"not a fixed statement (expanding or literal parameters): {self.sql}")
        #: Values the statement carries itself (literals, LIMIT), by bind name.
        self._static = compiled.construct_params(_check=False)
        processors = compiled._bind_processors
        # Binds without a value of their own: the caller must give each one.
        required = {name for name, bind in compiled.binds.items() if bind.required}
        # Positional: one entry per placeholder (a name may repeat); named: one per name.
        names = compiled.positiontup if compiled.positional else list(self._static)
        self._binds: list[tuple[str, _Processor, bool]] = [
            (name, processors.get(name), name in required) for name in names or ()
        ]
        #: The statement's own values as bound (processed once, not at each execution).
        self._static_bound = {
            name: value if processor is None else processor(value)
            for name, processor, _ in self._binds
            if name in self._static
            for value in (self._static[name],)
        }
        self._positional = bool(compiled.positional)
        columns = compiled._result_columns or []
        self._results: list[_Processor] = [
            entry.type._cached_result_processor(dialect, None) for entry in columns
        ]
        self._plain = not any(self._results)
        self.row: Any = namedtuple("Row", [entry.keyname for entry in columns])  # type: ignore[misc]

    def parameters(self, values: Mapping[str, Any]) -> Any:
        static = self._static_bound
        bound = [
            (values[name] if p is None else p(values[name]))
            if required or name in values
            else static[name]
            for name, p, required in self._binds
        ]
        if self._positional:
            return tuple(bound)
        return dict(zip((name for name, _, _ in self._binds), bound, strict=True))

    def execute(self, cursor: Any, values: Mapping[str, Any]) -> Any:
        parameters = self.parameters(values)
        try:
            cursor.execute(self.sql, parameters)
        except self._dialect.loaded_dbapi.Error as error:
            raise self._wrapped(error, parameters) from error
        return cursor

    def execute_many(self, cursor: Any, rows: Iterable[Mapping[str, Any]]) -> None:
        parameters = [self.parameters(values) for values in rows]
        try:
            cursor.executemany(self.sql, parameters)
        except self._dialect.loaded_dbapi.Error as error:
            raise self._wrapped(error, parameters) from error

    def _wrapped(self, error: Exception, parameters: Any) -> Exception:
        return driver_error(self._dialect, self.sql, parameters, error)

    def rows(self, cursor: Any, values: Mapping[str, Any]) -> list[Any]:
        return self.read(self.execute(cursor, values))

    def read(self, cursor: Any) -> list[Any]:
        """The rows of this statement, executed on ``cursor``."""
        try:
            fetched = cursor.fetchall()  # SQLite steps the rows after the first one here
        except self._dialect.loaded_dbapi.Error as error:
            raise self._wrapped(error, None) from error
        make = self.row._make
        if self._plain:
            return [make(raw) for raw in fetched]
        results = self._results
        return [
            make([value if p is None else p(value) for p, value in zip(results, raw, strict=True)])
            for raw in fetched
        ]

    def first(self, cursor: Any, values: Mapping[str, Any]) -> Any:
        rows = self.rows(cursor, values)
        return rows[0] if rows else None


def execute_together(
    connection: Connection | DriverConnection,
    items: list[tuple[Prepared, Mapping[str, Any]]],
    *,
    commit: bool = False,
) -> list[Any]:
    """Each statement on a cursor of its own, in order; on PostgreSQL in one round trip
    (psycopg's pipeline mode: an error raises at the end and leaves the transaction failed;
    the caller rolls back or closes the connection), with the transaction's ``COMMIT`` after
    them in the same round trip when ``commit`` (PostgreSQL only: the connection's own commit
    is then a no-op). ``connection``: a driver connection or SQLAlchemy's. The cursors, to read
    each statement's rows from."""
    driven: DriverConnection | None = None
    if isinstance(connection, DriverConnection):
        driven = connection
        connection.require_not_lost()
        driver: Any = connection.driver_connection
    else:
        driver = connection.connection.driver_connection
    cursors = [cursor_of(connection) for _ in items]
    if connection.dialect.name != "postgresql":
        if commit:
            raise ValueError("a pipelined COMMIT is PostgreSQL's only")
        return [
            statement.execute(cursor, values)
            for (statement, values), cursor in zip(items, cursors, strict=True)
        ]
    try:
        with driver.pipeline():
            for (statement, values), cursor in zip(items, cursors, strict=True):
                cursor.execute(statement.sql, statement.parameters(values))
            if commit:
                # As a statement, so that the block's end sends the only Sync (psycopg's
                # commit() would sync, and so wait for a round trip, of its own).
                cursor_of(connection).execute("COMMIT")
    except connection.dialect.loaded_dbapi.Error as error:
        together = ";\n".join(statement.sql for statement, _ in items)
        raise driver_error(connection.dialect, together, None, error) from error
    if commit and driven is not None:
        driven.ended()
    return cursors


def cursor_of(connection: Connection | DriverConnection) -> Any:
    """A DB-API cursor on the connection (and in the transaction) of a SQLAlchemy one, or of
    a driver connection."""
    if isinstance(connection, DriverConnection):
        return connection.cursor()
    return connection.connection.cursor()


def insert_with_defaults(table: Table, columns: Iterable[str]) -> Any:
    """``INSERT`` of ``columns`` (bound by their names) and every other column's scalar Python
    default (SQLAlchemy's execution fills those in; a bare cursor does not)."""
    return insert(table).values(column_values(table, columns))


def column_values(table: Table, columns: Iterable[str]) -> dict[str, Any]:
    """Each of ``columns`` bound by its name, and every other column with a scalar Python
    default as that value, typed as the column (for ``INSERT ... VALUES`` or ``SELECT``)."""
    given = set(columns)
    values: dict[str, Any] = {}
    for column in table.columns:
        if column.name in given:
            values[column.name] = bindparam(column.name, type_=column.type)
        elif column.default is not None:
            if not column.default.is_scalar:
                raise ValueError(f"{table.name}.{column.name} has a computed default: bind it")
            values[column.name] = literal(cast(Any, column.default).arg, column.type)
    return values
