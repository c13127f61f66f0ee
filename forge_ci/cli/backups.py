"""``forge-ci backup DIR`` and ``forge-ci restore DIR`` (see ``forge_ci.backup``)."""

from __future__ import annotations

from pathlib import Path

import click

from forge_ci.cli.common import settings

_DIR = click.Path(file_okay=False, path_type=Path)


@click.command()
@click.argument("directory", type=_DIR)
def backup(directory: Path) -> None:
    """Write a consistent backup of the database, repositories and key files to DIRECTORY."""
    from forge_ci.backup.snapshot import create_backup
    from forge_ci.db import require_database

    config = settings()
    require_database(config)
    summary = create_backup(config, directory)
    manifest = summary.manifest
    click.echo(
        f"backup written to {summary.path}: {manifest.database} database at revision"
        f" {manifest.schema_revision}, {len(manifest.repositories)} repositories,"
        f" {len(manifest.files)} files"
    )
    click.echo("it holds secrets.key, which opens every stored secret: keep the backup private")


@click.command()
@click.argument("directory", type=_DIR)
def restore(directory: Path) -> None:
    """Restore the backup in DIRECTORY into an empty data directory and database."""
    from forge_ci.backup.snapshot import restore_backup
    from forge_ci.cli.database import _install_hooks
    from forge_ci.cli.setup import ensure_layout
    from forge_ci.migrations import head_revision

    config = settings()
    manifest = restore_backup(config, directory)
    ensure_layout(config)
    _install_hooks()
    click.echo(
        f"restored {len(manifest.repositories)} repositories and the {manifest.database}"
        f" database (revision {manifest.schema_revision}) from {directory} into"
        f" {config.data_dir}"
    )
    if manifest.schema_revision != head_revision():
        click.echo("the schema is older than this forge-ci's; run `forge-ci db upgrade` next")
