"""Shared plumbing for CLI commands: settings, sessions, JSON output and error mapping."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from forge_ci.errors import ForgeCIError
from forge_ci.output import json_text, table_lines

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from forge_ci.db import Database
    from forge_ci.settings import Settings

#: Exit status for every refused command (bad input, unknown thing, refused operation).
EXIT_REFUSED = 2


def run_cli(group: click.Group, argv: list[str]) -> int:
    """Run ``group`` and map ``ForgeCIError`` to one stderr line and exit status 2.

    A database that cannot be reached, opened or written (``db.UNAVAILABLE_ERRORS``) is the
    operator's to fix, not a bug: one line too, with the driver's reason. Commands meet most of
    these at their first contact (:func:`open_database`), which names the database as well.
    """
    try:
        with _unavailable_database_refused():
            result = group.main(args=argv, prog_name="forge-ci", standalone_mode=False)
    except ForgeCIError as exc:
        click.echo(f"forge-ci: {exc.message}", err=True)
        return EXIT_REFUSED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("forge-ci: aborted", err=True)
        return EXIT_REFUSED
    except click.ClickException as exc:
        click.echo(f"forge-ci: {exc.format_message()}", err=True)
        return EXIT_REFUSED
    # Without standalone mode click returns the status of an explicit ``Exit(n)`` instead of
    # raising it; commands themselves return None.
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


@contextmanager
def _unavailable_database_refused() -> Iterator[None]:
    """``db.unavailable_on_failure(detail=True)``, importing the database layer only when needed.

    A command that never loaded SQLAlchemy cannot raise its errors, and must not pay for importing
    it (``forge-ci workflow validate`` reads files only).
    """
    try:
        yield
    except Exception:
        if "sqlalchemy" not in sys.modules:
            raise
        from forge_ci.db import unavailable_on_failure

        with unavailable_on_failure(detail=True):
            raise


def settings() -> Settings:
    """The settings of this invocation, read once and cached on the click context."""
    ctx = click.get_current_context()
    root = ctx.find_root()
    if root.obj is None:
        root.obj = {}
    if "settings" not in root.obj:
        from forge_ci.settings import load_settings

        root.obj["settings"] = load_settings()
    value: Settings = root.obj["settings"]
    return value


def open_database(*, check_schema: bool = True) -> Database:
    """This invocation's database, after the checks that name what is missing and the fix.

    The data directory must exist (and, for SQLite, the database file), the database must
    answer, and (``check_schema``) be at this version's schema. Every command that uses the
    database opens it here, so each of these problems is one line and exit status 2.
    The caller disposes of it.
    """
    from forge_ci.db import Database, require_database

    config = settings()
    require_database(config)
    database = Database(config)
    try:
        if check_schema:
            database.require_current_schema()
    except BaseException:
        database.dispose()
        raise
    return database


def check_database() -> None:
    """Refuse now (see :func:`open_database`) rather than after a long-running command began."""
    open_database().dispose()


def use_settings(config: Settings) -> None:
    """Make ``config`` this invocation's settings (a command's options that override them)."""
    root = click.get_current_context().find_root()
    if root.obj is None:
        root.obj = {}
    root.obj["settings"] = config


@contextmanager
def session_scope(check_schema: bool = True, *, read_only: bool = False) -> Iterator[Session]:
    """A session on a checked database; commits on success, rolls back on error.

    ``read_only`` for commands that only show: they neither wait for nor block writers.
    """
    database = open_database(check_schema=check_schema)
    try:
        with database.session(read_only=read_only) as session:
            yield session
            session.commit()
    finally:
        database.dispose()


def echo_json(value: Any) -> None:
    """Print ``value`` as JSON (stable key order) on stdout."""
    sys.stdout.write(json_text(value))


def echo_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print rows as aligned text columns for people."""
    for line in table_lines(rows, columns):
        click.echo(line)


def read_text_file(path: Path, what: str) -> str:
    """Read a small UTF-8 file named on the command line, with errors that name it."""
    from forge_ci.errors import InvalidInput

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidInput(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) > 1024 * 1024:
        raise InvalidInput(f"{what} {path} is larger than 1 MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} {path} is not UTF-8 text") from None
