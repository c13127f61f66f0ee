"""The ``forge-ci`` command: the composition root.

Each command group lives in its own module and is registered here. A command that starts a front
door (web, ssh, worker, provider) imports it inside the command, never at module level, so that
``forge-ci user list`` does not import Flask or paramiko.

Errors: a ``ForgeCIError`` ends the command with exit status 2 and one line on stderr naming the
problem. Nothing else is caught here: a crash is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

import click

from forge_ci.cli import (
    accounts,
    database,
    events,
    hooks,
    providers,
    repos,
    runlogs,
    runs,
    services,
    up,
    web,
    workflow,
)
from forge_ci.cli.common import run_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="forge-ci")
def cli() -> None:
    """forge-ci: CI pipelines for a self-hosted git forge."""


for group in (
    database.init,
    database.db,
    accounts.user,
    accounts.key,
    repos.repo,
    runs.run,
    providers.provider,
    events.events,
    hooks.hooks,
    services.ssh_command,
    services.worker_command,
    workflow.workflow,
    web.web,
    up.up,
):
    cli.add_command(group)
runs.run.add_command(runlogs.logs)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    return run_cli(cli, sys.argv[1:] if argv is None else argv)
