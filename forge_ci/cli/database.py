"""``forge-ci init`` and ``forge-ci db``: prepare a data directory and migrate its database."""

from __future__ import annotations

import click

from forge_ci.cli.common import settings


def _upgrade() -> tuple[str | None, str]:
    from forge_ci.db import create_db_engine
    from forge_ci.migrations import current_revision, head_revision, upgrade

    engine = create_db_engine(settings().database_url)
    try:
        before = current_revision(engine)
        upgrade(engine)
        return before, head_revision()
    finally:
        engine.dispose()


@click.command()
def init() -> None:
    """Create the data directory, host key and secrets, install hooks, migrate the database."""
    from forge_ci.cli.setup import ensure_layout

    for path in ensure_layout(settings()):
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
    from forge_ci.db import Database

    database = Database(settings())
    try:
        database.require_current_schema()
    finally:
        database.dispose()
    click.echo("database schema is current")
