"""``forge-ci init`` and ``forge-ci db``: prepare a data directory and migrate its database."""

from __future__ import annotations

import click

from forge_ci.cli.common import open_database, settings
from forge_ci.errors import ConfigurationError


def _upgrade() -> tuple[str | None, str]:
    from forge_ci.db import create_db_engine, require_database, unavailable_on_failure
    from forge_ci.migrations import current_revision, head_revision, upgrade

    config = settings()
    require_database(config, create=True)
    engine = create_db_engine(config.database_url)
    try:
        with unavailable_on_failure(config.database_url):
            before = current_revision(engine)
            upgrade(engine)
        return before, head_revision()
    finally:
        engine.dispose()


@click.command()
def init() -> None:
    """Create the data directory, host key and secrets, install hooks, migrate the database."""
    from forge_ci.cli.setup import ensure_layout

    data_dir = settings().data_dir
    try:
        created = ensure_layout(settings())
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and exc.filename != str(data_dir) else ""
        raise ConfigurationError(
            f"cannot prepare the data directory {data_dir}: {exc.strerror}{where}; set"
            " FORGE_CI_DATA_DIR to a directory this user may create or write"
        ) from None
    for path in created:
        click.echo(f"created {path}")
    _install_hooks()
    before, head = _upgrade()
    click.echo(f"database at revision {head}" + ("" if before == head else f" (was {before})"))
    click.echo(f"forge-ci data directory ready: {settings().data_dir}")


def _install_hooks() -> None:
    """Install the deployment's hooks when the hooks front door provides an installer."""
    try:
        from hooks.install import install_hooks
    except ImportError:
        return
    for path in install_hooks(settings()):
        click.echo(f"installed hook {path}")


@click.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Migrate the database to this version's schema."""
    before, head = _upgrade()
    if before == head:
        click.echo(f"database already at revision {head}")
    else:
        click.echo(f"database upgraded from {before or 'empty'} to {head}")


@db.command("check")
def db_check() -> None:
    """Exit 0 when the schema is current, 2 with the fix otherwise."""
    open_database().dispose()
    click.echo("database schema is current")
