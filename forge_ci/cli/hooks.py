"""``forge-ci hooks``: the deployment's git hooks."""

from __future__ import annotations

import click

from forge_ci.cli.common import settings
from forge_ci.settings import require_data_dir


@click.group()
def hooks() -> None:
    """Manage the deployment's git hooks."""


@hooks.command("install")
def hooks_install() -> None:
    """(Re)write pre-receive into the data directory's hooks/ (and remove retired hooks)."""
    from hooks.install import install_hooks

    require_data_dir(settings())
    for path in install_hooks(settings()):
        click.echo(f"installed hook {path}")
