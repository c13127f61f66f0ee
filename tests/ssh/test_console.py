"""SSH-side commands through a real OpenSSH client: acceptance and refusal per command group.

alice  owns alice/demo          bob    may write to it
carol  may read it              dave   has a key and nothing else
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from forge_ci.authz import Actor
from forge_ci.cli import cli
from forge_ci.db import Database
from forge_ci.models import User
from forge_ci.settings import Settings
from forge_ci_testing.forge import wait_for
from forge_ci_testing.git import GitClient
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient, start_server

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


def push_workflow(alice: GitClient) -> None:
    work = alice.work_tree()
    (work / ".github" / "workflows").mkdir(parents=True)
    (work / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    alice.git("add", ".", cwd=work)
    alice.git("commit", "-q", "-m", "ci", cwd=work)
    alice.push(work, "main")


@pytest.fixture
def pushed(people: dict[str, GitClient]) -> GitClient:
    """alice/demo with a dispatchable workflow on main."""
    push_workflow(people["alice"])
    return people["alice"]


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


def test_secrets_and_variables_take_their_values_from_stdin_only(
    pushed: GitClient, people: dict[str, GitClient], world: Settings, database: Database
) -> None:
    alice, carol, dave = pushed, people["carol"], people["dave"]
    scope = ("--repo", "alice/demo", "--branch", "main", "--workflow", ".github/workflows/ci.yml")
    saved = alice.ssh("secret", "set", "TOKEN", *scope, "--version", "0", stdin=b"s3cret-value\n")
    assert ok(saved) == "secret TOKEN of alice/demo saved at version 1\n"
    listed = json.loads(ok(alice.ssh("secret", "list", "--repo", "alice/demo", "--json")))
    assert [(e["name"], e["version"], e["branch"]) for e in listed] == [("TOKEN", "1", "main")]
    assert shape(listed) == shape(cli_json(world, "secret", "list", "--repo", "alice/demo"))
    assert "s3cret" not in json.dumps(listed)
    # An update with empty stdin keeps the value; a stale version is refused.
    kept = json.loads(ok(alice.ssh("secret", "set", "TOKEN", *scope, "--version", "1", "--json")))
    assert kept["version"] == "2"
    stale = alice.ssh("secret", "set", "TOKEN", *scope, "--version", "1", stdin=b"x")
    assert one_line(stale).startswith("forge-ci: ")
    assert "version" in stale.stderr
    assert one_line(alice.ssh("secret", "set", "NEW", *scope, "--version", "0")) == (
        "forge-ci: the secret value is empty; a value has at least 1 byte"
    )
    too_big = alice.ssh("secret", "set", "BIG", *scope, "--version", "0", stdin=b"x" * 20_000)
    assert one_line(too_big) == (
        "forge-ci: the secret value on standard input is larger than 16384 bytes"
    )
    assert "the following arguments are required: --branch, --workflow" in refused(
        alice.ssh("secret", "set", "T2", "--repo", "alice/demo", "--version", "0")
    )
    # Readers may not manage secrets; strangers learn nothing.
    assert one_line(carol.ssh("secret", "list", "--repo", "alice/demo")).startswith(
        "forge-ci: admin access to alice/demo is required"
    )
    assert one_line(dave.ssh("secret", "list", "--repo", "alice/demo")) == (
        "forge-ci: repository alice/demo not found"
    )
    assert one_line(
        alice.ssh("secret", "delete", "TOKEN", "--repo", "alice/demo", "--version", "1")
    )
    deleted = alice.ssh("secret", "delete", "TOKEN", "--repo", "alice/demo", "--version", "2")
    assert ok(deleted) == "secret TOKEN of alice/demo deleted (version 3)\n"

    assert ok(
        alice.ssh("var", "set", "REGION", "--repo", "alice/demo", "--version", "0", stdin=b"eu")
    )
    variables = ok(alice.ssh("var", "list", "--repo", "alice/demo"))
    assert variables.splitlines()[0].split()[-1] == "VALUE" and " eu" in variables
    assert shape(json.loads(ok(alice.ssh("var", "list", "--repo", "alice/demo", "--json")))) == (
        shape(cli_json(world, "var", "list", "--repo", "alice/demo"))
    )


def test_keys_of_ones_own_account(
    people: dict[str, GitClient], keys: dict[str, Path], tmp_path: Path
) -> None:
    from forge_ci_testing.keys import make_key

    alice, bob = people["alice"], people["bob"]
    mine = json.loads(ok(alice.ssh("key", "list", "--json")))
    assert [(k["user"], k["in_use"]) for k in mine] == [("alice", True)]
    spare = make_key(tmp_path, name="spare")
    added = json.loads(
        ok(alice.ssh("key", "add", "--json", stdin=Path(f"{spare}.pub").read_bytes()))
    )
    assert added["user"] == "alice"
    assert one_line(bob.ssh("key", "add", stdin=Path(f"{spare}.pub").read_bytes())) == (
        f"forge-ci: key {added['fingerprint']} is already registered to another user"
    )
    assert one_line(alice.ssh("key", "add", stdin=b"not a key")).startswith("forge-ci: ")
    assert one_line(alice.ssh("key", "add", stdin=b"x" * 20_000)) == (
        "forge-ci: the public key on standard input is larger than 16384 bytes"
    )
    in_use = mine[0]["fingerprint"]
    assert one_line(alice.ssh("key", "remove", in_use)) == (
        f"forge-ci: key {in_use} is the one this connection uses; connect with another of "
        "your keys to remove it"
    )
    # Someone else's key does not exist for bob.
    assert one_line(bob.ssh("key", "remove", str(added["id"]))) == f"forge-ci: no key {added['id']}"
    assert ok(alice.ssh("key", "remove", str(added["id"]))) == (
        f"removed key {added['fingerprint']} of alice\n"
    )
    assert len(json.loads(ok(alice.ssh("key", "list", "--json")))) == 1


def test_site_administration(
    people: dict[str, GitClient], world: Settings, database: Database
) -> None:
    alice, dave = people["alice"], people["dave"]
    assert one_line(dave.ssh("provider", "list")) == (
        "forge-ci: only site administrators manage providers"
    )
    assert one_line(dave.ssh("user", "list")) == "forge-ci: only site administrators may list users"
    with database.session() as session:
        user = session.query(User).filter_by(name="alice").one()
        user.is_admin = True
        session.commit()
    assert json.loads(ok(alice.ssh("whoami", "--json")))["admin"] is True
    created = json.loads(
        ok(
            alice.ssh(
                "provider",
                "create",
                "--name",
                "p1",
                "--labels",
                "self-hosted,linux",
                "--repositories",
                "alice/demo",
                "--json",
            )
        )
    )
    assert len(created.pop("token")) == 64 and created["state"] == "active"
    text = ok(
        alice.ssh(
            "provider",
            "create",
            "--name",
            "p2",
            "--labels",
            "self-hosted,windows",
            "--scope",
            "all",
        )
    )
    assert text.splitlines()[1].startswith("token (shown only now): ")
    listed = json.loads(ok(alice.ssh("provider", "list", "--json")))
    assert [p["name"] for p in listed] == ["p1", "p2"]
    assert shape(listed) == shape(cli_json(world, "provider", "list"))
    assert "token" not in json.dumps(listed)
    assert ok(alice.ssh("provider", "pause", "p1")).startswith("paused provider p1 (paused")
    assert ok(alice.ssh("provider", "resume", "p1")).startswith("resumed provider p1 (active")
    labels = json.loads(
        ok(alice.ssh("provider", "labels", "p1", "--labels", "self-hosted,linux,gpu", "--json"))
    )
    assert (labels["labels"], labels["cancelled_attempts"]) == ("gpu,linux,self-hosted", 0)
    access = ok(alice.ssh("provider", "access", "p1", "--scope", "all"))
    assert (
        access.splitlines()
        == [
            "updated provider p1 (active, labels gpu, repositories *)",
            "cancelled 0 running attempt(s) outside the new scope",
        ]
        or "repositories *" in access
    )
    assert one_line(
        alice.ssh("provider", "access", "p1", "--scope", "all", "--repositories", "a/b")
    )
    assert ok(alice.ssh("provider", "revoke", "p2")).startswith("revoked provider p2 (revoked")
    assert one_line(alice.ssh("provider", "pause", "nope")).startswith("forge-ci: ")
    users = json.loads(ok(alice.ssh("user", "list", "--json")))
    assert [u["name"] for u in users] == ["alice", "bob", "carol", "dave"]
    assert shape(users) == shape(cli_json(world, "user", "list"))


def test_limits_slots_per_user_deadline_and_followers_that_go_away(
    world: Settings, client_for: MakeClient, database: Database
) -> None:
    # The deadline is long enough for the set-up's commands (a dispatch, listings) on a loaded
    # machine, where 1 s was not, and short enough to wait out once.
    settings = dataclasses.replace(world, ssh_command_timeout=4.0, ssh_commands_per_user=2)
    server, thread = start_server(settings)
    followers: list[subprocess.Popen[bytes]] = []
    try:
        port = server.address[1]
        alice, bob = client_for("alice", port), client_for("bob", port)
        push_workflow(alice)
        ok(
            alice.ssh(
                "run",
                "dispatch",
                "alice/demo",
                "--branch",
                "main",
                "--workflow",
                ".github/workflows/ci.yml",
            )
        )
        with database.session() as session:
            alice_id = session.query(User).filter_by(name="alice").one().id
        slots = server.context.command_slots

        # A run that nobody serves never ends: its followers hold their slots...
        for _ in range(2):
            followers.append(alice.ssh_process("run", "logs", "alice/demo", "1", "--follow"))
        wait_for("two followers", lambda: slots.running(alice_id) == 2, 20)
        assert one_line(alice.ssh("run", "list", "alice/demo")) == (
            "forge-ci: you already have 2 commands running; wait for one to end"
        )
        assert ok(bob.ssh("run", "list", "alice/demo", "--json"))  # each user has their own
        # ...until their client goes away: nothing of a follow outlives it.
        followers[0].kill()
        wait_for("the follow to end", lambda: slots.running(alice_id) == 1, 20)

        # A command that is not a follow has a deadline, reading stdin included.
        stuck = alice.ssh_process(
            "var", "set", "X", "--repo", "alice/demo", "--version", "0", stdin=subprocess.PIPE
        )
        out, err = _wait_open_stdin(stuck)
        assert (stuck.returncode, out, err) == (
            2,
            b"",
            b"forge-ci: the command did not finish within 4 s\n",
        )
        assert stuck.stdin is not None
        stuck.stdin.close()
        followers[1].terminate()
        wait_for("every slot free", lambda: slots.running(alice_id) == 0, 20)
    finally:
        for follower in followers:
            follower.kill()
            follower.communicate()
        server.close(grace=5)
        thread.join(10)


def _wait_open_stdin(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Wait for ``process`` while its stdin stays open (communicate() would close it)."""
    assert process.stdout is not None and process.stderr is not None
    process.wait(30)
    with process.stdout, process.stderr:
        return process.stdout.read(), process.stderr.read()


def test_run_watch_waits_for_the_run_the_push_starts(
    people: dict[str, GitClient], world: Settings, database: Database
) -> None:
    """No worker runs here: the push stays undecided until the test processes it itself."""
    from forge_ci.models import PushEvent
    from forge_ci.repos import set_push_workflows
    from forge_ci.runs.events import process_push_event

    alice, carol = people["alice"], people["carol"]
    assert one_line(alice.ssh("run", "watch", "alice/demo")) == (
        "forge-ci: alice/demo has no runs yet"
    )
    # A push while push workflows are off started nothing: watch says so, exit status 1.
    push_workflow(alice)
    with database.session() as session:
        process_push_event(session, world, session.query(PushEvent).one().id)
        session.commit()
    nothing = alice.ssh("run", "watch", "alice/demo")
    assert (nothing.returncode, nothing.stdout) == (1, "")
    assert nothing.stderr == "push workflows of alice/demo are off\n"

    with database.session() as session:
        set_push_workflows(session, Actor.operator(), "alice/demo", True)
        session.commit()
    alice.commit(alice.home / "work", "second")
    alice.push(alice.home / "work", "main")
    watcher = alice.ssh_process("run", "watch", "alice/demo")
    try:
        assert watcher.stderr is not None
        assert watcher.stderr.readline() == b"waiting for the push to main to be processed\n"
        with database.session() as session:
            event_id = max(e.id for e in session.query(PushEvent))
            process_push_event(session, world, event_id)
            session.commit()
        assert watcher.stderr.readline() == b"following run #1 of alice/demo\n"
        # carol did not push: she follows the newest run at once.
        follower = carol.ssh_process("run", "watch", "alice/demo")
        assert follower.stderr is not None
        assert follower.stderr.readline() == b"following run #1 of alice/demo\n"
        ok(alice.ssh("run", "cancel", "alice/demo", "1"))
        assert follower.wait(30) == 1
        out, err = follower.communicate()
        assert err == b"run #1 of alice/demo did not succeed: cancelled\n"
        assert watcher.wait(30) == 1
    finally:
        watcher.kill()
        watcher.communicate()
