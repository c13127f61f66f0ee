"""The click side of the ``forge-ci`` command: the lazy root group over ``COMMANDS``.

See :mod:`forge_ci.cli` (which re-exports ``cli``, ``LazyGroup`` and ``command_tree``).
"""

from __future__ import annotations

import importlib

import click

from forge_ci.cli import COMMANDS, SUBCOMMANDS


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
