"""The database part of a backup: SQLite's online backup API, or pg_dump / psql for PostgreSQL.

Passwords never reach argv: the PostgreSQL tools get the connection in ``PG*`` environment
variables (``PGPASSWORD`` included), never as a URL on their command line.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy import inspect
from sqlalchemy.engine import URL, make_url

from forge_ci.db import create_db_engine, display_url, normalize_url
from forge_ci.errors import ConfigurationError, Conflict, Unavailable

SQLITE_NAME = "database/forge-ci.sqlite3"
POSTGRES_NAME = "database/forge-ci.sql"
_TOOL_TIMEOUT = 6 * 3600


def database_kind(url: str) -> str:
    backend = make_url(normalize_url(url)).get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigurationError(f"cannot back up a {backend!r} database")
    return backend


def dump_name(kind: str) -> str:
    return SQLITE_NAME if kind == "sqlite" else POSTGRES_NAME


def sqlite_path(url: str) -> Path:
    return Path(str(make_url(normalize_url(url)).database))


def backup_sqlite(url: str, target: Path) -> None:
    """Copy the SQLite database at ``url`` to ``target`` with the online backup API.

    The copy is one consistent snapshot even while other processes write (it is made in one
    step, under SQLite's read lock; writers wait at most the busy timeout, as for any reader).
    """
    source = sqlite3.connect(f"file:{sqlite_path(url)}?mode=ro", uri=True, timeout=30)
    try:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
    except sqlite3.Error as exc:
        raise Unavailable(f"cannot copy the SQLite database {sqlite_path(url)}: {exc}") from None
    finally:
        source.close()


def postgres_environment(url: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``PG*`` variables that point libpq's tools at ``url`` (password included)."""
    parsed: URL = make_url(normalize_url(url))
    environ = dict(os.environ if base is None else base)
    for name in [key for key in environ if key.startswith("PG")]:
        del environ[name]
    values = {
        "PGHOST": parsed.host or str(parsed.query.get("host") or ""),
        "PGPORT": str(parsed.port or parsed.query.get("port") or ""),
        "PGUSER": parsed.username or "",
        "PGPASSWORD": parsed.password or "",
        "PGDATABASE": parsed.database or "",
        "PGSSLMODE": str(parsed.query.get("sslmode") or ""),
        "PGCONNECT_TIMEOUT": "10",
    }
    environ.update({key: value for key, value in values.items() if value})
    return environ


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ConfigurationError(
            f"{name} is not installed; a PostgreSQL backup needs the PostgreSQL client tools"
            " (Debian: apt-get install postgresql-client)"
        )
    return found


def _run(argv: list[str], url: str, what: str) -> None:
    result = subprocess.run(
        argv,
        env=postgres_environment(url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=_TOOL_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        reason = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise Unavailable(
            f"{what} of {display_url(url)} failed: " + (reason[0] if reason else "no message")
        )


def backup_postgres(url: str, target: Path) -> None:
    """``pg_dump`` the database at ``url`` into ``target`` (plain SQL, one snapshot)."""
    _run(
        [
            _tool("pg_dump"),
            "--format=plain",
            "--no-owner",
            "--no-privileges",
            "--file",
            str(target),
        ],
        url,
        "pg_dump",
    )


def backup_database(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if database_kind(url) == "sqlite":
        backup_sqlite(url, target)
    else:
        backup_postgres(url, target)


def require_empty_database(url: str) -> None:
    """Refuse unless the database at ``url`` holds no tables (or, for SQLite, does not exist)."""
    if database_kind(url) == "sqlite":
        path = sqlite_path(url)
        if path.exists() and path.stat().st_size > 0:
            raise Conflict(
                f"the SQLite database {path} already exists; restore only into an empty data"
                " directory"
            )
        return
    engine = create_db_engine(url)
    try:
        tables = inspect(engine).get_table_names()
    except Exception as exc:  # the driver's errors: unreachable, refused, unknown database
        raise Unavailable(f"cannot reach {display_url(url)} to restore into it: {exc}") from None
    finally:
        engine.dispose()
    if tables:
        raise Conflict(
            f"the database {display_url(url)} is not empty (it has {len(tables)} tables, e.g."
            f" {sorted(tables)[0]}); restore only into an empty database"
        )


def restore_database(url: str, dump: Path) -> None:
    """Load ``dump`` (made by :func:`backup_database`) into the empty database at ``url``."""
    if database_kind(url) == "sqlite":
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".restoring")
        shutil.copyfile(dump, partial)
        os.chmod(partial, 0o600)
        os.replace(partial, path)
        return
    _run(
        [
            _tool("psql"),
            "--quiet",
            "--no-psqlrc",
            "--set",
            "ON_ERROR_STOP=1",
            "--single-transaction",
            "--file",
            str(dump),
        ],
        url,
        "psql (loading the backup)",
    )
