"""SSH-side commands through a real OpenSSH client: acceptance and refusal per command group.

alice  owns alice/demo          bob    may write to it
carol  may read it              dave   has a key and nothing else
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from forge_ci.authz import Actor
from forge_ci.cli import cli
from forge_ci.db import Database
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient

WORKFLOW = """\
on: [workflow_dispatch, push]
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: echo hello
"""


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The one stderr line of a refusal (exit status 2 unless said otherwise)."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    return result.stderr


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    text = refused(result)
    assert text.count("\n") == 1 and text.startswith("forge-ci: "), text
    return text.strip()


@pytest.fixture
def people(server: SshServer, client_for: MakeClient) -> dict[str, GitClient]:
    port = server.address[1]
    return {name: client_for(name, port) for name in ("alice", "bob", "carol", "dave")}


@pytest.fixture
def pushed(people: dict[str, GitClient]) -> GitClient:
    """alice/demo with a dispatchable workflow on main."""
    alice = people["alice"]
    work = alice.work_tree()
    (work / ".github" / "workflows").mkdir(parents=True)
    (work / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    alice.git("add", ".", cwd=work)
    alice.git("commit", "-q", "-m", "ci", cwd=work)
    alice.push(work, "main")
    return alice


def cli_json(settings: Settings, *args: str) -> object:
    """What ``forge-ci ARGS --json`` prints, for comparing shapes with the SSH side."""
    from click.testing import CliRunner

    env = {
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
    }
    result = CliRunner().invoke(cli, [*args, "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def shape(value: object) -> object:
    """Keys and value types, recursively (values differ between callers; shapes must not)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return type(value).__name__


def test_help_whoami_the_shell_and_what_is_not_a_command(
    people: dict[str, GitClient], keys: dict[str, Path]
) -> None:
    alice = people["alice"]
    reference = ok(alice.ssh("help"))
    assert "ssh git@HOST run logs OWNER/NAME NUMBER [--job KEY] [--follow]" in reference
    assert "Site administrators:" in reference
    assert ok(alice.ssh("help", "run", "watch")).startswith("Commands:\n  ssh git@HOST run watch")
    assert "ssh git@HOST secret set NAME" in ok(alice.ssh("secret", "set", "--help"))
    assert one_line(alice.ssh("help", "nope")) == (
        "forge-ci: no command 'nope'; `ssh git@HOST help` lists them"
    )

    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{keys['alice']}.pub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert ok(alice.ssh("whoami")) == (f"alice (key {fingerprint}), not a site administrator\n")
    assert json.loads(ok(alice.ssh("whoami", "--json"))) == {
        "name": "alice",
        "fingerprint": fingerprint,
        "admin": False,
    }

    # An interactive session greets, prints the reference and ends; nothing runs.
    shell = subprocess.run(
        [*alice.ssh_argv, "-T", "git@127.0.0.1"],
        env=alice.env,
        input="echo hacked\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.returncode == 1 and "hacked" not in shell.stdout + shell.stderr
    assert shell.stderr.startswith("Hi alice! You are authenticated, but forge-ci does not")
    assert "ssh git@HOST run watch OWNER/NAME" in shell.stderr

    unknown = refused(alice.ssh("rm", "-rf", "/"))
    assert unknown.startswith("forge-ci: unknown command 'rm'; `ssh git@HOST help` lists")
    assert "usage: ssh git@HOST run list OWNER/NAME" in unknown
    assert refused(alice.ssh("run", "frobnicate")).startswith(
        "forge-ci: unknown command 'run frobnicate'\nusage: ssh git@HOST run list"
    )
    bad = refused(alice.ssh("run", "show", "alice/demo", "one"))
    assert bad.startswith("forge-ci: run show: argument NUMBER: invalid int value: 'one'\n")
    assert "usage: ssh git@HOST run show OWNER/NAME NUMBER [--json]" in bad
    missing = refused(alice.ssh("run", "dispatch", "alice/demo"))
    assert "the following arguments are required: --branch, --workflow" in missing
    assert one_line(alice.ssh("run", "list", "x" * 1100)) == (
        "forge-ci: the command is longer than 1024 bytes"
    )
    raw = subprocess.run(
        [*alice.ssh_argv, "git@127.0.0.1", "run list 'unbalanced"],
        env=alice.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert one_line(raw) == (
        "forge-ci: the command cannot be split into words: No closing quotation"
    )


def test_repositories_and_their_switches(people: dict[str, GitClient], world: Settings) -> None:
    alice, bob, dave = people["alice"], people["bob"], people["dave"]
    listed = json.loads(ok(alice.ssh("repo", "list", "--json")))
    assert [(r["name"], r["role"]) for r in listed] == [("alice/demo", "owner")]
    assert shape(listed) == shape(cli_json(world, "repo", "list"))
    assert json.loads(ok(dave.ssh("repo", "list", "--json"))) == []
    assert ok(dave.ssh("repo", "list")) == "(none)\n"
    shown = json.loads(ok(bob.ssh("repo", "show", "alice/demo", "--json")))
    assert shown == {**listed[0], "role": "write"}
    assert "push workflows:      off" in ok(bob.ssh("repo", "show", "alice/demo"))

    # No existence oracle: another's repository and a missing one read the same.
    hidden = one_line(dave.ssh("repo", "show", "alice/demo"))
    missing = one_line(dave.ssh("repo", "show", "alice/nothing"))
    assert hidden == "forge-ci: repository alice/demo not found"
    assert missing == hidden.replace("alice/demo", "alice/nothing")
    assert one_line(dave.ssh("run", "list", "alice/demo")) == hidden

    assert one_line(bob.ssh("workflows", "alice/demo", "push", "on")) == (
        "forge-ci: admin access to alice/demo is required; you have write"
    )
    assert one_line(dave.ssh("workflows", "alice/demo", "push", "on")) == hidden
    assert ok(alice.ssh("workflows", "alice/demo", "push", "on")) == (
        "push workflows of alice/demo are on\n"
    )
    switched = json.loads(ok(alice.ssh("workflows", "alice/demo", "schedule", "on", "--json")))
    assert (switched["push_workflows"], switched["scheduled_workflows"]) == (True, True)
    assert "on|off" in refused(alice.ssh("workflows", "alice/demo", "push", "maybe"))


def test_runs_list_show_dispatch_cancel_rerun_and_logs(
    pushed: GitClient, people: dict[str, GitClient], world: Settings
) -> None:
    alice, bob, carol = pushed, people["bob"], people["carol"]
    workflow = ".github/workflows/ci.yml"
    dispatch = ("run", "dispatch", "alice/demo", "--branch", "main", "--workflow", workflow)
    assert one_line(carol.ssh(*dispatch)).startswith("forge-ci: ")
    assert one_line(alice.ssh(*dispatch, "--input", "x")) == (
        "forge-ci: --input: give NAME=VALUE, not 'x'"
    )
    created = ok(alice.ssh(*dispatch))
    assert created.startswith(f"created run #1 of alice/demo ({workflow} at ")
    assert json.loads(ok(alice.ssh(*dispatch, "--json")))["number"] == 2

    rows = json.loads(ok(carol.ssh("run", "list", "alice/demo", "--json")))
    assert [r["number"] for r in rows] == [2, 1]
    assert shape(rows) == shape(cli_json(world, "run", "list", "alice/demo"))
    assert (
        ok(carol.ssh("run", "list", "alice/demo", "--limit", "1")).splitlines()[1].startswith("2 ")
    )
    filtered = ("run", "list", "alice/demo", "--json", "--branch", "main", "--workflow", "ci.yml")
    assert len(json.loads(ok(carol.ssh(*filtered)))) == 2
    assert json.loads(ok(carol.ssh("run", "list", "alice/demo", "--json", "--branch", "x"))) == []
    assert one_line(carol.ssh("run", "list", "alice/demo", "--limit", "0")) == (
        "forge-ci: limit must be between 1 and 500, not 0"
    )

    shown = json.loads(ok(carol.ssh("run", "show", "alice/demo", "1", "--json")))
    assert shape(shown) == shape(cli_json(world, "run", "show", "alice/demo", "1"))
    assert shown["jobs"][0]["blocker"]["code"]
    text = ok(carol.ssh("run", "show", "alice/demo", "1"))
    assert text.startswith("run #1 of alice/demo: queued\n")
    assert one_line(carol.ssh("run", "show", "alice/demo", "9")) == (
        "forge-ci: run #9 not found in alice/demo"
    )
    assert ok(carol.ssh("run", "logs", "alice/demo", "1")) == ""
    assert one_line(carol.ssh("run", "logs", "alice/demo", "1", "--job", "deploy")) == (
        "forge-ci: run #1 of alice/demo has no job 'deploy'"
    )

    assert one_line(bob.ssh("run", "cancel", "alice/demo", "1")).startswith(
        "forge-ci: admin access to alice/demo is required"
    )
    assert ok(alice.ssh("run", "cancel", "alice/demo", "1")) == "run #1 of alice/demo cancelled\n"
    cancelled = json.loads(ok(alice.ssh("run", "cancel", "alice/demo", "2", "--json")))
    assert (cancelled["number"], cancelled["conclusion"]) == (2, "cancelled")
    follow = carol.ssh("run", "logs", "alice/demo", "1", "--follow")
    assert (follow.returncode, follow.stdout) == (1, "")
    assert follow.stderr == "run #1 of alice/demo did not succeed: cancelled\n"

    assert one_line(carol.ssh("run", "rerun", "alice/demo", "1")).startswith(
        "forge-ci: admin access to alice/demo is required"
    )
    assert ok(alice.ssh("run", "rerun", "alice/demo", "1")) == (
        "created run #3 of alice/demo (rerun of #1)\n"
    )
    rerun = json.loads(ok(alice.ssh("run", "rerun", "alice/demo", "1", "--failed", "--json")))
    assert rerun["rerun_of"] == 1 and rerun["number"] == 4
