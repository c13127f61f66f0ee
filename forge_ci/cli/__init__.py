"""The ``forge-ci`` command: the composition root.

Each command group lives in its own module and is registered here by name, in ``COMMANDS``. The
root imports a command's module only when that command runs (or its ``--help`` is asked for):
``forge-ci workflow validate`` must not pay for SQLAlchemy, nor ``forge-ci user list`` for the
workflow parser. ``forge-ci --help`` lists every command from the one-line help kept in
``COMMANDS``, importing none of them; a test holds that line to the command's own docstring. A
command that starts a front door (web, ssh, worker, provider) also imports it inside the command,
never at module level.

Errors: a ``ForgeCIError`` ends the command with exit status 2 and one line on stderr naming the
problem. Nothing else is caught here: a crash is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from forge_ci.cli.common import run_cli

#: The root's commands: name -> (module in ``forge_ci.cli``, attribute, first sentence of its
#: help, which ``forge-ci --help`` shows).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "backup": (
        "backups",
        "backup",
        "Write a consistent backup of the database, repositories and key files to DIRECTORY.",
    ),
    "db": ("database", "db", "Database schema management."),
    "events": ("events", "events", "Inspect push events."),
    "hooks": ("hooks", "hooks", "Manage the deployment's git hooks."),
    "init": (
        "database",
        "init",
        "Create the data directory, host key and secrets, install hooks, migrate the database.",
    ),
    "key": ("accounts", "key", "Manage SSH public keys."),
    "provider": (
        "providers",
        "provider",
        "Register and manage providers (the machines that run jobs).",
    ),
    "repo": ("repos", "repo", "Manage repositories."),
    "restore": (
        "backups",
        "restore",
        "Restore the backup in DIRECTORY into an empty data directory and database.",
    ),
    "run": ("runs", "run", "List, show, dispatch, cancel and rerun workflow runs."),
    "secret": ("repo_secrets", "secret", "Manage repository secrets (sealed; never shown)."),
    "ssh": (
        "services",
        "ssh_command",
        "Serve git over SSH on FORGE_CI_SSH_LISTEN until SIGTERM (pushes, clones, fetches).",
    ),
    "up": ("up", "up", "Start web, ssh, worker, a private Redis and (with Docker) a provider."),
    "user": ("accounts", "user", "Manage users."),
    "var": (
        "repo_secrets",
        "var",
        "Manage repository variables (the vars context; not secret).",
    ),
    "web": ("web", "web", "Serve the web UI and the runner API on FORGE_CI_WEB_LISTEN."),
    "worker": (
        "services",
        "worker_command",
        "Run RQ jobs (push events) and scan the database for events that were never enqueued.",
    ),
    "workflow": (
        "workflow",
        "workflow",
        "Validate workflow files and show their normalized plans.",
    ),
}

#: Subcommands a group gets from a module of its own: (module, attribute). ``provider run`` and
#: ``run logs`` are long-running clients, kept apart from the administration commands.
SUBCOMMANDS: dict[str, tuple[tuple[str, str], ...]] = {
    "run": (("runlogs", "logs"), ("runlogs", "watch")),
    "provider": (("provider_run", "run"),),
}


def _attribute(module: str, name: str) -> click.Command:
    command = getattr(importlib.import_module(f"forge_ci.cli.{module}"), name)
    assert isinstance(command, click.Command), (module, name)
    return command


class LazyGroup(click.Group):
    """The root group: each command is imported the first time it is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            command = _attribute(module, attribute)
            if isinstance(command, click.Group):
                for sub_module, sub_attribute in SUBCOMMANDS.get(cmd_name, ()):
                    command.add_command(_attribute(sub_module, sub_attribute))
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Click's own listing, over stand-ins that carry only the one-line help: the same text
        # as the loaded commands would give, without importing them.
        stand_ins = click.Group(
            commands=[click.Command(name, help=line) for name, (*_, line) in COMMANDS.items()]
        )
        click.Group.format_commands(stand_ins, ctx, formatter)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="forge-ci")
def cli() -> None:
    """forge-ci: CI pipelines for a self-hosted git forge."""


def command_tree(group: click.Group = cli) -> dict[tuple[str, ...], click.Command]:
    """Every leaf command by its words (``("run", "logs")``), importing every module.

    For checks that walk the whole tree (docs, tests); a command run needs only its own.
    """
    ctx = click.Context(group)
    found: dict[tuple[str, ...], click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found |= {(name, *path): leaf for path, leaf in command_tree(command).items()}
        else:
            found[(name,)] = command
    return found


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    return run_cli(cli, sys.argv[1:] if argv is None else argv)
