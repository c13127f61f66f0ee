"""``forge-ci secret ...`` and ``forge-ci var ...``: values from a file or standard input only,
versions, JSON listing without values, key rotation, and a dispatch refused for a secret."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forge_ci.cli.test_operator_cli import REPO_ROOT, Cli
from tests.forge_ci.cli.test_run_cli import _commit

PUBLISH = ".github/workflows/publish.yml"
VALUE = '{"token": "cli-secret-value-0123456789"}'
WORKFLOW = """\
on: workflow_dispatch
jobs:
  publish:
    runs-on: [self-hosted, linux]
    steps:
      - env:
          CREDENTIALS: ${{ secrets.MOONCAKES_TOKEN }}
        run: test -n "$CREDENTIALS"
"""


@pytest.fixture
def cli(tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path / "data", empty_db_url, capsys)
    runner.ok("init")
    runner.ok("user", "add", "alice", "--no-password")
    runner.ok("repo", "create", "alice/demo")
    _commit(runner, {PUBLISH: WORKFLOW, ".github/workflows/other.yml": WORKFLOW})
    return runner


def test_init_creates_a_private_key_file(cli: Cli) -> None:
    key = cli.data_dir / "secrets.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("forge-ci-secrets-key v1 ")
    before = key.read_bytes()
    cli.ok("init")
    assert key.read_bytes() == before  # never replaced: that would lose every value


def test_set_list_update_delete_and_rotate(cli: Cli, tmp_path: Path) -> None:
    body = tmp_path / "credentials.json"
    body.write_text(VALUE)
    common = ["--repo", "alice/demo", "--branch", "main", "--workflow", PUBLISH]
    out = cli.ok(
        "secret", "set", "mooncakes_token", *common, "--body-file", str(body), "--version", "0"
    )
    assert "MOONCAKES_TOKEN of alice/demo saved at version 1" in out
    listed = cli.ok("secret", "list", "--repo", "alice/demo", "--json")
    assert VALUE not in listed and "cli-secret-value" not in listed
    rows = json.loads(listed)
    assert [(r["name"], r["branch"], r["workflow"], r["version"]) for r in rows] == [
        ("MOONCAKES_TOKEN", "main", PUBLISH, "1")
    ]
    # Stale version, no value for a new secret, a bad file: exit 2 naming the problem.
    assert "at version 1, not 3" in cli.refused(
        "secret", "set", "MOONCAKES_TOKEN", *common, "--version", "3"
    )
    assert "needs a value" in cli.refused("secret", "set", "OTHER", *common, "--version", "0")
    assert "does not exist" in cli.refused(
        "secret", "set", "OTHER", *common, "--body-file", str(tmp_path / "nope"), "--version", "0"
    )
    body.write_bytes(b"\xff\xfe")
    assert "not valid UTF-8" in cli.refused(
        "secret", "set", "OTHER", *common, "--body-file", str(body), "--version", "0"
    )
    # Update of the scope only.
    cli.ok(
        "secret",
        "set",
        "MOONCAKES_TOKEN",
        "--repo",
        "alice/demo",
        "--branch",
        "main",
        "--workflow",
        ".github/workflows/other.yml",
        "--version",
        "1",
    )
    assert "re-sealed 1 secret(s)" in cli.ok("secret", "rotate-key")
    audit = cli.ok("secret", "audit", "--repo", "alice/demo", "--json")
    assert [r["action"] for r in json.loads(audit)] == ["reseal", "update", "create"]
    assert "cli-secret-value" not in audit
    assert "deleted (version 3)" in cli.ok(
        "secret", "delete", "MOONCAKES_TOKEN", "--repo", "alice/demo", "--version", "2"
    )
    assert json.loads(cli.ok("secret", "list", "--repo", "alice/demo", "--json")) == []


def test_a_value_from_standard_input(cli: Cli, tmp_path: Path) -> None:
    """A real process: the value arrives on stdin, and never on the command line."""
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(cli.data_dir),
        "FORGE_CI_DATABASE_URL": cli.database_url,
    }
    argv = [
        sys.executable,
        "-m",
        "forge_ci",
        "secret",
        "set",
        "STDIN_TOKEN",
        "--repo",
        "alice/demo",
        "--branch",
        "main",
        "--workflow",
        PUBLISH,
        "--body-file",
        "-",
        "--version",
        "0",
    ]
    done = subprocess.run(
        argv, input=VALUE.encode(), env=env, cwd=REPO_ROOT, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert VALUE.encode() not in b" ".join(a.encode() for a in argv)
    assert "STDIN_TOKEN" in cli.ok("secret", "list", "--repo", "alice/demo")


def test_a_dispatch_needing_a_missing_or_disallowed_secret_is_refused(
    cli: Cli, tmp_path: Path
) -> None:
    dispatch = ["run", "dispatch", "alice/demo", "--branch", "main", "--workflow"]
    line = cli.refused(*dispatch, PUBLISH)
    assert "secret MOONCAKES_TOKEN does not exist" in line
    body = tmp_path / "v"
    body.write_text(VALUE)
    cli.ok(
        "secret",
        "set",
        "MOONCAKES_TOKEN",
        "--repo",
        "alice/demo",
        "--branch",
        "main",
        "--workflow",
        PUBLISH,
        "--body-file",
        str(body),
        "--version",
        "0",
    )
    assert "may only be used by .github/workflows/publish.yml" in cli.refused(
        *dispatch, ".github/workflows/other.yml"
    )
    assert "run #1 of alice/demo" in cli.ok(*dispatch, PUBLISH)


def test_variables(cli: Cli, tmp_path: Path) -> None:
    body = tmp_path / "v"
    body.write_text("eu-west")
    cli.ok(
        "var", "set", "REGION", "--repo", "alice/demo", "--body-file", str(body), "--version", "0"
    )
    rows = json.loads(cli.ok("var", "list", "--repo", "alice/demo", "--json"))
    assert [(r["name"], r["value"], r["branch"], r["version"]) for r in rows] == [
        ("REGION", "eu-west", None, "1")
    ]
    assert "both a branch and a workflow" in cli.refused(
        "var",
        "set",
        "X",
        "--repo",
        "alice/demo",
        "--branch",
        "main",
        "--body-file",
        str(body),
        "--version",
        "0",
    )
