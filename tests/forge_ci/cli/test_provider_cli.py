"""``forge-ci provider ...`` and ``forge-ci run logs``: tokens from files, exit statuses."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_ci.coordinator.credentials import new_token
from forge_ci.db import Database
from tests.conftest import make_settings
from tests.forge_ci.cli.test_operator_cli import Cli
from tests.forge_ci.coordinator.world import World, plan_job


@pytest.fixture
def cli(tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path / "data", empty_db_url, capsys)
    runner.ok("init")
    return runner


@pytest.fixture
def world(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    settings = make_settings(cli.data_dir, cli.database_url)
    database = Database(settings)
    created = World(database, settings)
    monkeypatch.setattr("forge_ci.runs.scheduling.utcnow", created.clock)
    yield created
    database.dispose()


def token_file(tmp_path: Path, token: str | None = None) -> tuple[Path, str]:
    token = token or new_token()
    path = tmp_path / f"token-{token[:6]}"
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return path, token


def test_create_list_and_manage_providers(cli: Cli, world: World, tmp_path: Path) -> None:
    path, token = token_file(tmp_path)
    out = cli.ok(
        "provider",
        "create",
        "--name",
        "dind",
        "--token-file",
        str(path),
        "--labels",
        " Linux,self-hosted ,linux",
        "--repositories",
        "alice/app,bob/lib",
    )
    assert "created provider dind" in out and token not in out
    rows = {r["name"]: r for r in json.loads(cli.ok("provider", "list", "--json"))}
    assert rows["dind"]["labels"] == "linux,self-hosted"
    assert rows["dind"]["repositories"] == "alice/app,bob/lib"
    assert rows["dind"]["scope"] == "selected"
    assert token not in json.dumps(rows)
    assert "paused" in cli.ok("provider", "pause", "dind")
    assert "resumed" in cli.ok("provider", "resume", "dind")
    assert "gpu" in cli.ok("provider", "labels", "dind", "--labels", "self-hosted,linux,gpu")
    out = cli.ok("provider", "access", "dind", "--scope", "all")
    assert "repositories *" in out
    assert "revoked" in cli.ok("provider", "revoke", "dind")
    assert "revoked; it can no longer be changed" in cli.refused("provider", "resume", "dind")


def test_refusals_name_the_problem(cli: Cli, world: World, tmp_path: Path) -> None:
    path, _ = token_file(tmp_path)
    base = ["provider", "create", "--name", "x", "--token-file", str(path)]
    assert "exactly one of linux or windows" in cli.refused(
        *base, "--labels", "self-hosted,linux,windows"
    )
    assert "must include self-hosted" in cli.refused(*base, "--labels", "linux")
    assert "at most 8 labels" in cli.refused(
        *base, "--labels", "self-hosted,linux," + ",".join(f"l{i}" for i in range(7))
    )
    assert "invalid label" in cli.refused(*base, "--labels", "self-hosted,linux,a b")
    assert "do not list repositories" in cli.refused(
        *base, "--labels", "self-hosted,linux", "--scope", "all", "--repositories", "alice/app"
    )
    assert "repository nobody/here not found" in cli.refused(
        *base, "--labels", "self-hosted,linux", "--repositories", "nobody/here"
    )
    bad = tmp_path / "bad"
    bad.write_text("NOT-A-TOKEN\n")
    assert "64 lowercase hexadecimal" in cli.refused(
        "provider",
        "create",
        "--name",
        "y",
        "--token-file",
        str(bad),
        "--labels",
        "self-hosted,linux",
    )
    assert "does not exist" in cli.refused(
        "provider",
        "create",
        "--name",
        "y",
        "--token-file",
        str(tmp_path / "missing"),
        "--labels",
        "self-hosted,linux",
    )
    # p1 exists (the world's provider): its token cannot be reused by another provider.
    cli.ok(
        "provider",
        "create",
        "--name",
        "z",
        "--token-file",
        str(path),
        "--labels",
        "self-hosted,linux",
    )
    assert "already belongs to another provider" in cli.refused(
        "provider",
        "create",
        "--name",
        "w",
        "--token-file",
        str(path),
        "--labels",
        "self-hosted,linux",
    )
    assert "already exists" in cli.refused(
        "provider",
        "create",
        "--name",
        "z",
        "--token-file",
        str(token_file(tmp_path)[0]),
        "--labels",
        "self-hosted,linux",
    )


def test_ensure_is_idempotent_and_additive(cli: Cli, world: World, tmp_path: Path) -> None:
    path, _ = token_file(tmp_path)
    args = ["provider", "ensure", "--name", "local", "--token-file", str(path)]
    assert "created provider local" in cli.ok(*args, "--labels", "self-hosted,linux")
    assert "updated provider local" in cli.ok(*args, "--labels", "self-hosted,linux")
    cli.ok("provider", "labels", "local", "--labels", "self-hosted,linux,docker")
    cli.ok(*args, "--labels", "self-hosted,linux", "--repositories", "alice/app")
    row = {r["name"]: r for r in json.loads(cli.ok("provider", "list", "--json"))}["local"]
    assert row["labels"] == "docker,linux,self-hosted"  # an operator's edit is kept
    assert row["repositories"] == "alice/app"
    rotated, token = token_file(tmp_path)
    cli.ok(
        "provider",
        "ensure",
        "--name",
        "local",
        "--token-file",
        str(rotated),
        "--labels",
        "self-hosted,linux",
        "--scope",
        "all",
    )
    world.queue_run()
    assert world.claim(provider_token=token) is not None  # the file's token is the one
    cli.ok("provider", "revoke", "local")
    assert "is revoked" in cli.refused(*args, "--labels", "self-hosted,linux")


def _finish(world: World, conclusion: str) -> None:
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    world.log(claimed, 1, "compiling\n::add-mask::x\n  ::error::boom\rnext", step_id="compile")
    world.log(claimed, 2, f" line\nsecret {claimed.token}\npartial", step_id="compile")
    for wire_step in claimed.assignment.steps:
        world.step(claimed, wire_step.id, "running")
        world.step(
            claimed, wire_step.id, "completed", conclusion, 0 if conclusion == "success" else 1
        )
    world.complete(claimed, conclusion)


def test_run_logs_prints_prefixed_defused_lines(cli: Cli, world: World) -> None:
    world.queue_run(plan_job("build"))
    _finish(world, "success")
    out = cli.ok("run", "logs", "alice/app", "1")
    lines = out.splitlines()
    assert lines[:6] == [
        "build | compiling",
        "build | ::add-mask::x",
        "build |   ::error::boom",
        "build | next line",
        "build | secret ***",
        "build | partial",
    ]
    assert all(line.startswith("build | ") for line in lines)
    assert not any(line.lstrip().startswith("::") for line in lines)


def test_run_logs_follow_exits_with_the_verdict(cli: Cli, world: World) -> None:
    world.queue_run(plan_job("build"))

    def later() -> None:
        time.sleep(0.5)
        _finish(world, "success")

    thread = threading.Thread(target=later)
    thread.start()
    code, out, err = cli("run", "logs", "alice/app", "1", "--follow", "--interval", "0.1")
    thread.join()
    assert code == 0, err
    assert "build | secret ***" in out and "succeeded" in err
    world.queue_run(plan_job("build"))
    _finish(world, "failure")
    code, out, err = cli("run", "logs", "alice/app", "2", "--follow", "--interval", "0.1")
    assert code == 1
    assert "did not succeed: failure" in err
    assert "run #9 not found" in cli.refused("run", "logs", "alice/app", "9")
