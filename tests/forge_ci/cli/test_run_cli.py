"""``forge-ci run ...`` and ``forge-ci repo push-workflows``: output shapes and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from tests.forge_ci.cli.test_operator_cli import Cli

CI = ".github/workflows/ci.yml"
PIPELINE = """\
name: CI
on: workflow_dispatch
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
  test:
    needs: build
    runs-on: [self-hosted, linux]
    steps:
      - run: make test
"""


@pytest.fixture
def cli(tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path / "data", empty_db_url, capsys)
    runner.ok("init")
    return runner


def _commit(cli: Cli, files: dict[str, str]) -> str:
    git = pygit2.Repository(str(cli.data_dir / "repositories" / "alice" / "demo.git"))
    index = pygit2.Index()
    for path, text in files.items():
        index.add(pygit2.IndexEntry(path, git.create_blob(text.encode()), FileMode.BLOB))
    signature = pygit2.Signature("Alice", "alice@example.com")
    oid = git.create_commit(
        "refs/heads/main", signature, signature, "ci", index.write_tree(git), []
    )
    return str(oid)


def test_dispatch_list_show_cancel_and_rerun(cli: Cli) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    sha = _commit(
        cli,
        {
            CI: PIPELINE,
            ".github/workflows/push.yml": PIPELINE.replace("on: workflow_dispatch", "on: push"),
        },
    )
    assert json.loads(cli.ok("run", "list", "alice/demo", "--json")) == []
    assert cli.ok("run", "list", "alice/demo").strip() == "(none)"

    out = cli.ok("run", "dispatch", "alice/demo", "--branch", "main", "--workflow", CI)
    assert out.strip() == f"created run #1 of alice/demo ({CI} at {sha[:12]}): queued"
    shown = json.loads(cli.ok("run", "show", "alice/demo", "1", "--json"))
    assert {
        k: shown[k] for k in ("number", "state", "conclusion", "sha", "workflow_path", "event_name")
    } == {
        "number": 1,
        "state": "queued",
        "conclusion": None,
        "sha": sha,
        "workflow_path": CI,
        "event_name": "workflow_dispatch",
    }
    assert [
        {k: job[k] for k in ("key", "name", "state", "conclusion", "needs")}
        for job in shown["jobs"]
    ] == [
        {"key": "build", "name": "build", "state": "queued", "conclusion": None, "needs": []},
        {"key": "test", "name": "test", "state": "waiting", "conclusion": None, "needs": ["build"]},
    ]
    text = cli.ok("run", "show", "alice/demo", "1")
    assert "run #1 of alice/demo: queued" in text and "waiting" in text
    listed = json.loads(cli.ok("run", "list", "alice/demo", "--json"))
    assert [(r["number"], r["state"]) for r in listed] == [(1, "queued")]
    assert "workflow_dispatch" in cli.ok("run", "list", "alice/demo")

    assert "only a completed run can be rerun" in cli.refused("run", "rerun", "alice/demo", "1")
    assert "cancelled" in cli.ok("run", "cancel", "alice/demo", "1")
    shown = json.loads(cli.ok("run", "show", "alice/demo", "1", "--json"))
    assert (shown["state"], shown["conclusion"]) == ("completed", "cancelled")
    assert [job["conclusion"] for job in shown["jobs"]] == ["cancelled", "cancelled"]
    assert "nothing to cancel" in cli.refused("run", "cancel", "alice/demo", "1")

    assert "created run #2 of alice/demo (rerun of #1)" in cli.ok(
        "run", "rerun", "alice/demo", "1", "--failed"
    )
    shown = json.loads(cli.ok("run", "show", "alice/demo", "2", "--json"))
    assert (shown["rerun_of"], shown["sha"]) == (1, sha)

    assert "does not declare workflow_dispatch" in cli.refused(
        "run",
        "dispatch",
        "alice/demo",
        "--branch",
        "main",
        "--workflow",
        ".github/workflows/push.yml",
    )
    assert "branch nope does not exist" in cli.refused(
        "run", "dispatch", "alice/demo", "--branch", "nope", "--workflow", CI
    )
    assert "give a branch name" in cli.refused(
        "run", "dispatch", "alice/demo", "--branch", "refs/tags/v1", "--workflow", CI
    )
    assert "Missing option '--branch'" in cli.refused(
        "run", "dispatch", "alice/demo", "--workflow", CI
    )
    assert "run #7 not found in alice/demo" in cli.refused("run", "show", "alice/demo", "7")
    assert "repository alice/nope not found" in cli.refused("run", "list", "alice/nope")


def test_push_workflows_switch(cli: Cli) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    assert "earlier pushes are not replayed" in cli.ok("repo", "push-workflows", "alice/demo", "on")
    assert json.loads(cli.ok("repo", "list", "--json"))[0]["push_workflows"] is True
    assert "not cancelled" in cli.ok("repo", "push-workflows", "alice/demo", "off")
    assert json.loads(cli.ok("repo", "list", "--json"))[0]["push_workflows"] is False
    assert "'maybe' is not one of 'on', 'off'" in cli.refused(
        "repo", "push-workflows", "alice/demo", "maybe"
    )
    assert "repository alice/nope not found" in cli.refused(
        "repo", "push-workflows", "alice/nope", "on"
    )


def test_run_show_says_why_a_queued_job_waits_as_the_run_page_does(
    cli: Cli, tmp_path: Path
) -> None:
    """The REASON column was empty for queued jobs: it now says what the run page says."""
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    _commit(cli, {CI: PIPELINE.replace("[self-hosted, linux]", "[self-hosted, linux, gpu]", 1)})
    token = tmp_path / "token"
    token.write_text("a" * 64 + "\n")
    cli.ok("provider", "create", "--name", "p1", "--token-file", str(token), "--labels",
           "self-hosted,linux", "--scope", "all")  # fmt: skip
    cli.ok("run", "dispatch", "alice/demo", "--branch", "main", "--workflow", CI)
    text = cli.ok("run", "show", "alice/demo", "1")
    build = next(line for line in text.splitlines() if line.startswith("build "))
    assert "has every label this job needs (gpu, linux, self-hosted); none has gpu" in build
    assert "runs-on: self-hosted" in build and "forge-ci provider labels" in build
    shown = json.loads(cli.ok("run", "show", "alice/demo", "1", "--json"))
    build_json, test_json = shown["jobs"]
    assert build_json["blocker"]["code"] == "no_matching_labels"
    assert build_json["reason"] == build_json["blocker"]["message"]
    assert test_json["blocker"] is None  # waiting for build, not queued


INPUTS = """\
on:
  workflow_dispatch:
    inputs:
      tag:
        required: true
      dry-run:
        type: boolean
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
"""


def test_dispatch_takes_inputs_and_refuses_bad_ones_with_exit_2(cli: Cli) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    _commit(cli, {CI: INPUTS})
    base = ("run", "dispatch", "alice/demo", "--branch", "main", "--workflow", CI)
    assert "input 'tag' is required" in cli.refused(*base)
    assert "unknown input 'tga'" in cli.refused(*base, "--input", "tga=v1")
    assert "input 'dry-run' is a boolean" in cli.refused(
        *base, "--input", "tag=v1", "--input", "dry-run=yes"
    )
    assert "give NAME=VALUE, not 'tag'" in cli.refused(*base, "--input", "tag")
    assert "the input 'tag' is given twice" in cli.refused(
        *base, "--input", "tag=a", "--input", "tag=b"
    )
    assert json.loads(cli.ok("run", "list", "alice/demo", "--json")) == []
    out = cli.ok(*base, "--input", "tag=v1=final", "--input", "dry-run=true")
    assert out.startswith("created run #1 of alice/demo")
    shown = json.loads(cli.ok("run", "show", "alice/demo", "1", "--json"))
    assert shown["context"]["inputs"] == {"tag": "v1=final", "dry-run": True}
    assert shown["context"]["event"]["inputs"] == {"tag": "v1=final", "dry-run": "true"}


def test_scheduled_workflows_switch(cli: Cli) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("user", "add", "bob", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    cli.ok("repo", "grant", "alice/demo", "bob", "write")
    assert json.loads(cli.ok("repo", "list", "--json"))[0]["scheduled_workflows"] is False
    assert "bob has write access to alice/demo; scheduled runs must be requested by an owner" in (
        cli.refused("repo", "scheduled-workflows", "alice/demo", "on", "--as", "bob")
    )
    assert "unknown user 'nobody'" in cli.refused(
        "repo", "scheduled-workflows", "alice/demo", "on", "--as", "nobody"
    )
    out = cli.ok("repo", "scheduled-workflows", "alice/demo", "on")
    assert "are on, requested by alice" in out and "are not replayed" in out
    assert json.loads(cli.ok("repo", "list", "--json"))[0]["scheduled_workflows"] is True
    assert json.loads(cli.ok("repo", "schedules", "alice/demo", "--json")) == []
    assert "not cancelled" in cli.ok("repo", "scheduled-workflows", "alice/demo", "off")
    assert json.loads(cli.ok("repo", "list", "--json"))[0]["scheduled_workflows"] is False
    assert "repository alice/nope not found" in cli.refused(
        "repo", "scheduled-workflows", "alice/nope", "on"
    )
    assert "repository alice/nope not found" in cli.refused("repo", "schedules", "alice/nope")


MIXED = """\
name: CI
on: [workflow_dispatch, release]
permissions:
  id-token: write
jobs:
  test:
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest]
    runs-on: ${{ matrix.os }}
    environment:
      name: staging
      url: https://staging.example
    steps:
      - run: make test
"""


def test_run_show_lists_notices_environments_and_that_no_windows_provider_exists(
    cli: Cli, tmp_path: Path
) -> None:
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/demo")
    _commit(cli, {CI: MIXED})
    token = tmp_path / "token"
    token.write_text("b" * 64 + "\n")
    cli.ok("provider", "create", "--name", "p1", "--token-file", str(token), "--labels",
           "self-hosted,linux,x64,ubuntu-latest", "--scope", "all")  # fmt: skip
    cli.ok("run", "dispatch", "alice/demo", "--branch", "main", "--workflow", CI)
    text = cli.ok("run", "show", "alice/demo", "1")
    assert "notice:   line 2: release never fires on forge-ci" in text
    assert (
        "notice:   line 4: this workflow asked for id-token: write; forge-ci grants no such token"
    ) in text
    assert "line 10: runs-on: windows-latest: no forge-ci provider runs Windows or macOS" in text
    assert (
        "environment: test (windows-latest) deploys to staging (https://staging.example); "
        "protection rules are not enforced"
    ) in text
    shown = json.loads(cli.ok("run", "show", "alice/demo", "1", "--json"))
    linux, windows = shown["jobs"]
    assert linux["runs_on"] == ["self-hosted", "linux", "x64", "ubuntu-latest"]
    assert linux["blocker"]["code"] != "no_such_provider"
    # Refused to run anywhere it cannot: the Windows leg waits, and says why.
    assert windows["runs_on"] == ["windows-latest"] and windows["state"] == "queued"
    assert windows["blocker"]["code"] == "no_such_provider"
    assert "No provider with the labels windows-latest exists" in windows["reason"]
    assert windows["environment"] == {"name": "staging", "url": "https://staging.example"}
    assert [n["message"] for n in shown["notices"]][:2] == [
        "release never fires on forge-ci",
        "this workflow asked for id-token: write; forge-ci grants no such token",
    ]
