"""Throwaway PostgreSQL databases for tests: migrated ones are reused, emptied, between tests.

Cloning a migrated template (``CREATE DATABASE ... TEMPLATE``) copies every catalog and costs
0.5-1.5 s on this machine; with 600 PostgreSQL tests that was a third of the suite. A migrated
database a test is done with is instead emptied (``DELETE`` of the tables it filled, every
sequence back to 1) and handed to the next test under a new name, so that a process a test
left behind cannot write into its successor's data: it can no longer connect. A database whose
schema a test changed (another table set or revision) is dropped, never reused. Databases
with no schema (``migrated=False``) are always created anew.
"""

from __future__ import annotations

import os
import time
import uuid

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from forge_ci.db import create_db_engine
from forge_ci.migrations import upgrade
from forge_ci.models import Base

_TABLES = """
    select table_name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE' order by table_name
"""


class PostgresDatabases:
    """Creates, empties and drops the test databases of one pytest session."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = make_url(admin_url)
        self.admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.prefix = f"fci_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.template: str | None = None
        self.created: list[str] = []
        self._counter = 0
        self._spare: list[str] = []  # emptied migrated databases, ready for the next test
        self._shape: tuple[tuple[str, ...], str] | None = None  # the template's tables, revision

    def url_for(self, name: str) -> str:
        return self.admin_url.set(database=name).render_as_string(hide_password=False)

    def _new_name(self) -> str:
        self._counter += 1
        return f"{self.prefix}_{self._counter}"

    def create(self, migrated: bool) -> str:
        name = self._new_name()
        if migrated and self._spare:
            spare = self._spare.pop()
            if self._rename(spare, name):
                self.created.append(name)
                return self.url_for(name)
            self._forget(spare)
        with self.admin.connect() as conn:
            if migrated:
                conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{self._template()}"'))
            else:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return self.url_for(name)

    def _template(self) -> str:
        if self.template is None:
            name = f"{self.prefix}_template"
            with self.admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            self.created.append(name)
            engine = create_db_engine(self.url_for(name))
            upgrade(engine)
            with engine.connect() as conn:
                self._shape = _shape(conn)
                filled = _filled(conn, self._shape[0])
            engine.dispose()
            # Emptying a used database would lose rows the migrations wrote.
            assert not filled, f"the migrations write rows into {filled}: cannot reuse databases"
            self.template = name
        return self.template

    def drop(self, url: str) -> None:
        """Done with one test's database: empty it for the next test, or drop it."""
        name = make_url(url).database
        if name not in self.created:
            return
        if name != self.template and self._shape is not None and self._empty(url):
            self._spare.append(name)
        elif self._drop(name, 3):
            self.created.remove(name)

    def _empty(self, url: str) -> bool:
        """Whether the database has the template's shape and is now empty (ids from 1)."""
        name = make_url(url).database
        assert name is not None and self._shape is not None
        self._terminate(name)
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                if _shape(conn) != self._shape:
                    return False
                # DELETE of the few tables a test filled, children first, is ~20x cheaper than
                # TRUNCATE of all of them (which makes new files for every table).
                filled = set(_filled(conn, self._shape[0]))
                for table in reversed(Base.metadata.sorted_tables):
                    if table.name in filled:
                        conn.execute(text(f'DELETE FROM "{table.name}"'))
                        filled.discard(table.name)
                if filled:  # a table the models do not know: the schema is not the template's
                    return False
                conn.execute(text("select setval(oid, 1, false) from pg_class where relkind = 'S'"))
            return True
        except DBAPIError:
            return False
        finally:
            engine.dispose()

    def _terminate(self, name: str) -> None:
        """End every other connection to ``name`` (a test's pools, processes it left behind).

        Only client connections: an autovacuum worker in the database belongs to the server
        (terminating it needs a superuser, which the test role is not) and ends on its own within
        moments, which the rename's retries wait for.
        """
        with self.admin.connect() as conn:
            conn.execute(
                text(
                    "select pg_terminate_backend(pid) from pg_stat_activity "
                    "where datname = :name and pid <> pg_backend_pid() "
                    "and backend_type = 'client backend'"
                ),
                {"name": name},
            )

    def _rename(self, old: str, new: str) -> bool:
        for attempt in range(3):
            self._terminate(old)
            try:
                with self.admin.connect() as conn:
                    conn.execute(text(f'ALTER DATABASE "{old}" RENAME TO "{new}"'))
                self.created.remove(old)
                return True
            except DBAPIError:  # something connected again in between: try once more
                time.sleep(0.1 * (attempt + 1))
        return False

    def _forget(self, name: str) -> None:
        if self._drop(name, 3):
            self.created.remove(name)

    def _drop(self, name: str, attempts: int) -> bool:
        # WITH (FORCE) may not terminate an autovacuum worker busy in the fresh database (it
        # belongs to another role): it finishes within moments, so try again.
        for attempt in range(attempts):
            try:
                with self.admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                return True
            except DBAPIError:
                if attempt == attempts - 1:
                    return False
                time.sleep(0.2 * (attempt + 1))
        return False

    def drop_all(self) -> None:
        left = [name for name in reversed(self.created) if not self._drop(name, 10)]
        self.admin.dispose()
        assert not left, f"could not drop test databases {left}"


def _shape(conn: Connection) -> tuple[tuple[str, ...], str]:
    tables = tuple(conn.execute(text(_TABLES)).scalars())
    revision = ""
    if "alembic_version" in tables:
        revision = ",".join(
            sorted(conn.execute(text("select version_num from alembic_version")).scalars())
        )
    return tables, revision


def _filled(conn: Connection, tables: tuple[str, ...]) -> list[str]:
    """The tables with at least one row, in one query (``alembic_version`` left out)."""
    probes = [
        f"select '{table}' where exists (select 1 from \"{table}\")"
        for table in tables
        if table != "alembic_version"
    ]
    return list(conn.execute(text(" union all ".join(probes))).scalars()) if probes else []
