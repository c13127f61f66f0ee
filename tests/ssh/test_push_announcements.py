"""``git push`` tells the pusher which runs it started: real OpenSSH pushes, a real worker.

The server here reaches the test's Redis, so its enqueue wakes a running ``forge-ci worker``
at once; the push waits (briefly, reading only) for the worker's decisions and prints them as
``remote:`` lines. Without a worker the push still ends within the bound, saying where to look.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.repos import set_push_workflows
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient, start_server
from tests.ssh.helpers import REPO_ROOT

CI = """\
on:
  push:
    paths: ['src/**']
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
"""
BROKEN = "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    stepz: []\n"
INERT = "on: release\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    steps:\n      - run: x\n"


@pytest.fixture
def report_wait(world: Settings) -> float:
    """How long a push waits for the worker's decisions: the default unless a test says."""
    return world.push_report_wait


@pytest.fixture
def queued_server(
    world: Settings, database: Database, redis_url: str, report_wait: float
) -> Iterator[SshServer]:
    """``forge-ci ssh`` that enqueues on the test's Redis, for alice/demo with push workflows."""
    with database.session() as session:
        set_push_workflows(session, Actor.operator(), "alice/demo", True)
        session.commit()
    settings = dataclasses.replace(world, redis_url=redis_url, push_report_wait=report_wait)
    server, thread = start_server(settings)
    yield server
    server.close(grace=10)
    thread.join(10)


@pytest.fixture
def worker(world: Settings, redis_url: str) -> Iterator[None]:
    """A running ``forge-ci worker`` (not burst), ready once RQ lists it."""
    import redis
    from rq import Worker

    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(world.data_dir),
        "FORGE_CI_DATABASE_URL": world.database_url,
        "FORGE_CI_REDIS_URL": redis_url,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "forge_ci", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        connection = redis.Redis.from_url(redis_url)
        deadline = time.monotonic() + 60
        while not Worker.all(connection=connection):
            assert process.poll() is None, "the worker exited"
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        process.wait(30)


def _push(client: GitClient, work: Path, files: dict[str, str]) -> tuple[str, float]:
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", "change", cwd=work)
    started = time.monotonic()
    result = client.push(work, "main")
    return result.stderr, time.monotonic() - started


def _remote_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("remote: forge-ci:")]


# The worker decides within tens of milliseconds when the machine is idle; a loaded one (a test
# run beside others) can take seconds, which would print "being processed" instead.
@pytest.mark.parametrize("report_wait", [30.0])
def test_a_push_prints_the_run_it_started_or_that_no_workflow_matched(
    queued_server: SshServer, world: Settings, client_for: MakeClient, worker: None
) -> None:
    alice = client_for("alice", queued_server.address[1])
    work = alice.work_tree()
    pipelines = f"{world.public_url}/alice/demo/pipelines"
    stderr, _ = _push(alice, work, {".github/workflows/ci.yml": CI, "src/a.py": "1\n"})
    assert _remote_lines(stderr) == [f"remote: forge-ci: run #1 of ci.yml: {pipelines}/1"]
    stderr, _ = _push(alice, work, {"docs/a.md": "words\n"})
    assert _remote_lines(stderr) == ["remote: forge-ci: no workflow matched the push to main"]
    stderr, _ = _push(alice, work, {".github/workflows/broken.yml": BROKEN, "src/a.py": "2\n"})
    invalid, created = _remote_lines(stderr)
    assert invalid.startswith("remote: forge-ci: broken.yml is invalid (")  # N problems
    assert invalid.endswith(f"): {pipelines}")
    assert created == f"remote: forge-ci: run #2 of ci.yml: {pipelines}/2"
    # A file with no trigger forge-ci can fire says so in one line; a tag push runs too.
    stderr, _ = _push(alice, work, {".github/workflows/broken.yml": INERT, "src/a.py": "3\n"})
    assert _remote_lines(stderr) == [
        "remote: forge-ci: broken.yml is inert: release never fires on forge-ci",
        f"remote: forge-ci: run #3 of ci.yml: {pipelines}/3",
    ]
    alice.git("tag", "-a", "v1", "-m", "v1", cwd=work)
    tagged = alice.push(work, "refs/tags/v1").stderr
    assert _remote_lines(tagged) == [
        "remote: forge-ci: broken.yml is inert: release never fires on forge-ci",
        f"remote: forge-ci: run #4 of ci.yml: {pipelines}/4",
    ]


def test_a_push_whose_worker_is_not_running_ends_promptly_saying_where_to_look(
    queued_server: SshServer, world: Settings, client_for: MakeClient
) -> None:
    alice = client_for("alice", queued_server.address[1])
    work = alice.work_tree()
    stderr, elapsed = _push(alice, work, {".github/workflows/ci.yml": CI, "src/a.py": "1\n"})
    assert _remote_lines(stderr) == [
        "remote: forge-ci: the push to main is being processed; its runs will appear at "
        f"{world.public_url}/alice/demo/pipelines"
    ]
    assert (
        elapsed < world.push_report_wait + 5
    )  # bounded: git itself takes well under a second here


def test_a_push_with_push_workflows_off_prints_nothing_and_does_not_wait(
    server: SshServer, client_for: MakeClient
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    stderr, _ = _push(alice, work, {".github/workflows/ci.yml": CI, "src/a.py": "1\n"})
    assert _remote_lines(stderr) == []
