"""The lazy command tree: ``forge-ci --help`` lists every command without importing it.

The root imports a command's module only when that command is used (``forge_ci.cli.COMMANDS``);
these tests hold the one-line help kept there to the commands themselves, and check that every
command's own ``--help`` still loads and answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from forge_ci.cli import COMMANDS, cli, command_tree

REPO_ROOT = Path(__file__).resolve().parents[3]


def _eager_root() -> click.Group:
    """The same root with every command loaded and added the ordinary way (the full tree)."""
    ctx = click.Context(cli)
    commands = [cli.get_command(ctx, name) for name in cli.list_commands(ctx)]
    assert all(command is not None for command in commands)
    return click.Group(
        name=cli.name,
        commands=[c for c in commands if c is not None],
        help=cli.help,
        params=cli.params,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


@pytest.mark.parametrize("width", [80, 200])
def test_the_root_help_is_the_help_of_the_full_tree(width: int) -> None:
    """Same names, same one-line help, at the usual and at a wide terminal (no cut words)."""
    settings = {"terminal_width": width, "max_content_width": width, "resilient_parsing": True}
    lazy = cli.make_context("forge-ci", [], **settings).get_help()
    eager = _eager_root().make_context("forge-ci", [], **settings).get_help()
    assert lazy == eager
    for name in COMMANDS:
        assert f"\n  {name} " in lazy


def test_every_module_command_is_registered() -> None:
    """A command group added to a module but not to ``COMMANDS`` would be unreachable."""
    import forge_ci.cli as package

    registered = {(module, attribute) for module, attribute, _ in COMMANDS.values()}
    registered |= {pair for pairs in package.SUBCOMMANDS.values() for pair in pairs}
    assert ("workflow", "workflow") in registered and ("runlogs", "logs") in registered
    assert set(cli.list_commands(click.Context(cli))) == set(COMMANDS)
    assert ("run", "logs") in command_tree() and ("provider", "run") in command_tree()
    assert cli.get_command(click.Context(cli), "no-such-command") is None


def test_an_unknown_command_is_refused() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output


@pytest.mark.parametrize("words", sorted(command_tree()), ids=" ".join)
def test_every_command_answers_help(words: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*words, "--help"], prog_name="forge-ci")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: forge-ci {' '.join(words)} ")


@pytest.mark.parametrize("group", ["run", "provider", "workflow"])
def test_every_group_lists_its_commands(group: str) -> None:
    result = CliRunner().invoke(cli, [group, "--help"], prog_name="forge-ci")
    assert result.exit_code == 0, result.output
    for words in command_tree():
        if words[0] == group:
            assert f"\n  {words[1]} " in result.output, words


def test_the_root_help_imports_no_command_module(tmp_path: Path) -> None:
    """``forge-ci --help`` loads only the root and its plumbing: no command, no SQLAlchemy."""
    code = (
        "import json, sys\n"
        "from forge_ci.cli import main\n"
        "code = main(['--help'])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "workflow  Validate workflow files" in result.stdout
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    commands = {name for name in loaded if name.startswith("forge_ci.cli.")}
    assert commands == {"forge_ci.cli.common", "forge_ci.cli.root"}, sorted(commands)
    assert "sqlalchemy" not in loaded
