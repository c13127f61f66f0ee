"""The ``forge-ci`` command: the composition root.

Each command group lives in its own module and is registered here by name, in ``COMMANDS``. The
root imports a command's module only when that command runs (or its ``--help`` is asked for):
``forge-ci workflow validate`` must not pay for SQLAlchemy, nor ``forge-ci user list`` for the
workflow parser. ``forge-ci --help`` lists every command from the one-line help kept in
``COMMANDS``, importing none of them; a test holds that line to the command's own docstring. A
command that starts a front door (web, ssh, worker, provider) also imports it inside the command,
never at module level.

The click side (the root group ``cli``, ``LazyGroup``, ``command_tree``) is
:mod:`forge_ci.cli.root`, re-exported here on first use: ``forge-ci workflow validate FILES``
runs without importing click at all (:mod:`forge_ci.cli.validating`).

Errors: a ``ForgeCIError`` ends the command with exit status 2 and one line on stderr naming the
problem. Nothing else is caught here: a crash is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge_ci.cli.root import LazyGroup as LazyGroup
    from forge_ci.cli.root import cli as cli
    from forge_ci.cli.root import command_tree as command_tree

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


def __getattr__(name: str) -> Any:
    if name in ("cli", "LazyGroup", "command_tree"):
        from forge_ci.cli import root

        return getattr(root, name)
    raise AttributeError(f"module 'forge_ci.cli' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["workflow", "validate"]:
        from forge_ci.cli.validating import fast_validate

        status = fast_validate(args[2:])
        if status is not None:
            return status
    from forge_ci.cli.common import run_cli
    from forge_ci.cli.root import cli

    return run_cli(cli, args)
