"""Every operator command, with its errors: exit status 2 and one line naming the problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from forge_ci.cli import main
from forge_ci_testing.keys import fingerprint, make_key
from tests.conftest import action_bundle

REPO_ROOT = Path(__file__).resolve().parents[3]


class Cli:
    """Runs ``forge-ci`` in-process against one data directory and database."""

    def __init__(
        self, data_dir: Path, database_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        env = {"FORGE_CI_DATA_DIR": str(self.data_dir), "FORGE_CI_DATABASE_URL": self.database_url}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            self.capsys.readouterr()
            code = main(list(args))
            out, err = self.capsys.readouterr()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        return code, out, err

    def ok(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 0, err
        return out

    def refused(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 2, (out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("forge-ci: "), err
        return lines[0]


@pytest.fixture
def cli(tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path / "data", empty_db_url, capsys)
    runner.ok("init")
    return runner


def test_init_prepares_an_empty_directory_and_is_repeatable(cli: Cli) -> None:
    assert (cli.data_dir / "ssh_host_ed25519_key").stat().st_mode & 0o777 == 0o600
    assert (cli.data_dir / "secret_key").stat().st_mode & 0o777 == 0o600
    assert (cli.data_dir / "repositories").is_dir()
    out = cli.ok("init")
    assert "created" not in out
    assert "database at revision" in out
    assert "already at revision" in cli.ok("db", "upgrade")
    assert "current" in cli.ok("db", "check")


def test_commands_refuse_an_unmigrated_database(
    tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(tmp_path / "data", empty_db_url, capsys)
    cli.data_dir.mkdir()
    if empty_db_url.startswith("sqlite:"):
        Path(empty_db_url.removeprefix("sqlite:///")).write_bytes(b"")  # empty, no schema
    line = cli.refused("user", "list")
    assert "run `forge-ci db upgrade`" in line
    line = cli.refused("db", "check")
    assert "run `forge-ci db upgrade`" in line
    assert "upgraded from empty" in cli.ok("db", "upgrade")
    cli.ok("user", "list")


def test_users(cli: Cli, tmp_path: Path) -> None:
    password = tmp_path / "pw"
    password.write_text("s3cret-password\n")
    assert "created user alice (site administrator)" in cli.ok(
        "user", "add", "alice", "--admin", "--password-file", str(password)
    )
    cli.ok("user", "add", "bob", "--no-password")
    rows = json.loads(cli.ok("user", "list", "--json"))
    assert [(r["name"], r["admin"], r["active"]) for r in rows] == [
        ("alice", True, True),
        ("bob", False, True),
    ]
    assert "alice" in cli.ok("user", "list")
    assert (
        cli.refused("user", "add", "alice", "--no-password")
        == "forge-ci: user 'alice' already exists"
    )
    assert "invalid user name 'Bad_Name'" in cli.refused("user", "add", "Bad_Name", "--no-password")
    assert "does not exist" in cli.refused(
        "user", "add", "carol", "--password-file", str(tmp_path / "none")
    )
    password.write_text("short\n")
    assert "at least 8 characters" in cli.refused(
        "user", "add", "carol", "--password-file", str(password)
    )
    assert "No such option" in cli.refused("user", "add", "carol", "--password", "x")


def test_keys(cli: Cli, tmp_path: Path) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    private = make_key(tmp_path)
    out = cli.ok("key", "add", "alice", f"{private}.pub")
    assert fingerprint(private) in out
    rows = json.loads(cli.ok("key", "list", "--json"))
    assert rows == [
        {
            "id": 1,
            "user": "alice",
            "type": "ssh-ed25519",
            "bits": 256,
            "fingerprint": fingerprint(private),
            "comment": "id@test",
        }
    ]
    assert json.loads(cli.ok("key", "list", "alice", "--json")) == rows
    assert "already registered" in cli.refused("key", "add", "alice", f"{private}.pub")
    weak = make_key(tmp_path, "rsa", 1024)
    assert "too weak" in cli.refused("key", "add", "alice", f"{weak}.pub")
    garbage = tmp_path / "garbage.pub"
    garbage.write_text("not a key at all\n")
    assert "unsupported key type 'not'" in cli.refused("key", "add", "alice", str(garbage))
    assert "unknown user 'nobody'" in cli.refused("key", "add", "nobody", f"{private}.pub")
    assert "unknown user 'nobody'" in cli.refused("key", "list", "nobody")
    assert "removed key" in cli.ok("key", "remove", fingerprint(private))
    assert json.loads(cli.ok("key", "list", "--json")) == []
    assert "no key" in cli.refused("key", "remove", fingerprint(private))


def test_repositories(cli: Cli) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("user", "add", "bob", "--no-password")
    out = cli.ok("repo", "create", "alice/demo")
    assert (
        "created repository alice/demo" in out and "ssh://git@127.0.0.1:2222/alice/demo.git" in out
    )
    path = cli.data_dir / "repositories" / "alice" / "demo.git"
    assert pygit2.Repository(str(path)).is_bare
    rows = json.loads(cli.ok("repo", "list", "--json"))
    assert rows == [
        {
            "name": "alice/demo",
            "default_branch": "main",
            "push_workflows": False,
            "scheduled_workflows": False,
            "role": "owner",
        }
    ]
    assert "already exists" in cli.refused("repo", "create", "alice/demo")
    assert "invalid repository name" in cli.refused("repo", "create", "alice/-bad")
    assert "expected OWNER/NAME" in cli.refused("repo", "create", "demo")
    assert "unknown user 'carol'" in cli.refused("repo", "create", "carol/demo")
    assert "bob now has write access" in cli.ok("repo", "grant", "alice/demo", "bob", "write")
    assert "bob now has read access" in cli.ok("repo", "grant", "alice/demo", "bob")
    assert "invalid role 'boss'" in cli.refused("repo", "grant", "alice/demo", "bob", "boss")
    assert "unknown user 'carol'" in cli.refused("repo", "grant", "alice/demo", "carol")
    assert "repository alice/nope not found" in cli.refused("repo", "grant", "alice/nope", "bob")
    assert "no longer has access" in cli.ok("repo", "revoke", "alice/demo", "bob")
    assert "bob has no role" in cli.refused("repo", "revoke", "alice/demo", "bob")


def test_the_console_script_prompts_for_a_password_and_maps_errors(
    tmp_path: Path, sqlite_db_url: str
) -> None:
    """The installed entry point, as an operator runs it: password on stdin, never in argv."""
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(tmp_path / "data"),
        "FORGE_CI_DATABASE_URL": sqlite_db_url,
        "PYTHONPATH": str(REPO_ROOT),
    }
    run = lambda *args, stdin="": subprocess.run(  # noqa: E731
        [sys.executable, "-m", "forge_ci", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run("init").returncode == 0
    result = run("user", "add", "alice", stdin="long-password\nlong-password\n")
    assert result.returncode == 0, result.stderr
    assert "created user alice" in result.stdout
    result = run("user", "add", "bob", stdin="long-password\nother-password\n")
    assert result.returncode == 2
    result = run("repo", "create", "bob/x")
    assert (result.returncode, result.stderr) == (2, "forge-ci: unknown user 'bob'\n")


def test_hooks_are_installed_by_init_and_on_demand(cli: Cli) -> None:
    hooks = cli.data_dir / "hooks"
    assert sorted(p.name for p in hooks.iterdir()) == ["pre-receive"]
    (hooks / "pre-receive").chmod(0o644)
    (hooks / "reference-transaction").write_text("#!/bin/sh\n")  # an earlier version's
    out = cli.ok("hooks", "install")
    assert f"installed hook {hooks / 'pre-receive'}" in out
    assert sorted(p.name for p in hooks.iterdir()) == ["pre-receive"]
    assert os.access(hooks / "pre-receive", os.X_OK)


def test_push_events_are_listed(cli: Cli) -> None:
    from forge_ci.db import Database
    from forge_ci.pushes.intents import PushContext, record_intents
    from forge_ci.refs import Update
    from forge_ci.settings import load_settings

    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    assert json.loads(cli.ok("events", "list", "alice/demo", "--json")) == []
    assert "(none)" in cli.ok("events", "list", "alice/demo")
    settings = load_settings(
        env={"FORGE_CI_DATA_DIR": str(cli.data_dir), "FORGE_CI_DATABASE_URL": cli.database_url}
    )
    database = Database(settings)
    new = "c0ffee" + "0" * 34
    with database.session() as session:
        context = PushContext(1, 1, "s1", "alice/demo")
        record_intents(session, context, [Update("0" * 40, new, "refs/heads/main")])
    database.dispose()

    [row] = json.loads(cli.ok("events", "list", "alice/demo", "--json"))
    assert row.pop("created_at").endswith("+00:00")
    assert row == {
        "id": 1,
        "ref": "refs/heads/main",
        "old_sha": "0" * 40,
        "new_sha": new,
        "pusher": "alice",
        "state": "prepared",
    }
    table = cli.ok("events", "list", "alice/demo")
    assert "prepared" in table and "refs/heads/main" in table and "c0ffee000000" in table
    assert "repository alice/nope not found" in cli.refused("events", "list", "alice/nope")

    # An operator's verdict on an event stuck in "prepared" (docs/ssh.md, "Recovery").
    refusal = cli.refused("events", "resolve", "alice/demo", "1", "--pushed")
    assert "new commit c0ffee000000 is missing" in refusal and "--not-pushed" in refusal
    out = cli.ok("events", "resolve", "alice/demo", "1", "--not-pushed")
    assert out.strip() == (
        "push event 1 of alice/demo is aborted: refs/heads/main was at (absent), now (deleted)"
    )
    assert "is already aborted" in cli.refused("events", "resolve", "alice/demo", "1", "--pushed")


def test_repo_mirror_from_a_bundle_clone(cli: Cli, tmp_path: Path) -> None:
    import subprocess

    bundle = action_bundle("checkout")
    upstream = tmp_path / "checkout.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(upstream)], check=True)
    out = cli.ok("repo", "mirror", "actions/checkout", "--from", f"file://{upstream}")
    assert "created user actions" in out
    assert f"created actions/checkout from file://{upstream}: 3 added, 0 moved, 0 deleted" in out
    assert "  added refs/tags/v4" in out and "  added refs/tags/v6" in out
    subprocess.run(
        ["git", f"--git-dir={upstream}", "tag", "-d", "v4"], check=True, capture_output=True
    )
    out = cli.ok("repo", "mirror", "actions/checkout", "--from", f"file://{upstream}")
    assert "refreshed actions/checkout" in out and "0 deleted" in out
    out = cli.ok("repo", "mirror", "actions/checkout", "--from", f"file://{upstream}", "--prune")
    assert "1 deleted" in out and "  deleted refs/tags/v4" in out
    assert "is not a git URL" in cli.refused("repo", "mirror", "actions/x", "--from", "ftp://x")
    assert "cannot mirror actions/y" in cli.refused(
        "repo", "mirror", "actions/y", "--from", f"file://{tmp_path}/none"
    )
