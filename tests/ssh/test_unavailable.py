"""When the database or Redis is gone: a push without a durable record is refused with the
reason and changes nothing; a push without Redis is accepted and processed once Redis is back."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from forge_ci.db import Database
from forge_ci.settings import Settings, TestFault
from ssh.server import SshServer
from tests.conftest import RedisServer
from tests.ssh.conftest import MakeClient, start_server
from tests.ssh.helpers import REPO_ROOT, events, refs
from tests.ssh.test_crash import push_in_background, wait_for


def break_database(settings: Settings, server: SshServer, request: pytest.FixtureRequest) -> None:
    """Make the database unreachable for everyone, as a dropped or vanished database is."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        # Pooled connections would go on writing to the unlinked file; a directory where the
        # file was means nothing can open (or quietly recreate) the database.
        server.database.dispose()
        path = Path(str(url.database))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.mkdir()
    else:
        admin = request.getfixturevalue("postgres_databases").admin
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{url.database}" WITH (FORCE)'))


def test_a_push_while_the_database_is_down_is_refused_with_the_reason(
    server: SshServer,
    world: Settings,
    database: Database,
    client_for: MakeClient,
    request: pytest.FixtureRequest,
) -> None:
    # LogLevel INFO: OpenSSH prints the server's pre-authentication banner only then.
    alice = client_for("alice", server.address[1], log_level="INFO")
    work = alice.work_tree()
    alice.push(work, "main")
    alice.commit(work, "second")
    before = refs(world)
    database.dispose()
    break_database(world, server, request)

    result = alice.push(work, "main", check=False)
    assert result.returncode != 0
    assert "forge-ci: the database is unavailable, so no key can be checked" in result.stderr
    assert refs(world) == before


def test_a_database_lost_in_the_middle_of_a_push_refuses_it(
    world: Settings,
    database: Database,
    client_for: MakeClient,
    request: pytest.FixtureRequest,
) -> None:
    settings = dataclasses.replace(world, test_faults=(TestFault("pause-before-record"),))
    server, thread = start_server(settings)
    try:
        alice = client_for("alice", server.address[1])
        work = alice.work_tree()
        push = push_in_background(alice, work, "main")
        marker = settings.run_dir / "fault-pause-before-record"
        wait_for(marker.exists, "the push to reach its intents")
        database.dispose()
        break_database(world, server, request)
        marker.unlink()
        _out, err = push.communicate(timeout=120)
    finally:
        server.close(grace=10)
        thread.join(10)
    assert push.returncode != 0
    assert (
        "forge-ci: this push cannot be recorded because the database is unavailable; "
        "no ref was changed" in err
    )
    assert refs(world) == {}


@pytest.fixture
def redis_world(world: Settings, redis_url: str) -> Settings:
    return dataclasses.replace(world, redis_url=redis_url)


def worker_process(settings: Settings, log: Path, *args: str) -> subprocess.Popen[str]:
    """``forge-ci worker`` as a process, its output in ``log`` (a pipe could fill and stall it)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
        "FORGE_CI_REDIS_URL": settings.redis_url,
    }
    with open(log, "wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "forge_ci", "worker", *args],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )


def test_pushes_are_enqueued_and_processed_by_the_worker(
    redis_world: Settings, database: Database, client_for: MakeClient
) -> None:
    import redis
    from rq import Queue

    from forge_ci.queueing import PUSH_EVENTS_QUEUE

    server, thread = start_server(redis_world)
    try:
        alice = client_for("alice", server.address[1])
        alice.push(alice.work_tree(), "main")
    finally:
        server.close(grace=10)
        thread.join(10)
    [(event_id, *_, state)] = events(database)
    assert state == "confirmed"
    connection = redis.Redis.from_url(redis_world.redis_url)
    assert Queue(PUSH_EVENTS_QUEUE, connection=connection).job_ids == [f"push-event-{event_id}"]
    connection.close()

    log = redis_world.data_dir / "worker.log"
    worker = worker_process(redis_world, log, "--burst")
    assert worker.wait(timeout=120) == 0, log.read_text()
    assert [row[4] for row in events(database)] == ["received"]


def test_a_push_while_redis_is_down_is_processed_once_redis_is_back(
    redis_world: Settings,
    redis_server: RedisServer,
    database: Database,
    client_for: MakeClient,
) -> None:
    server, thread = start_server(redis_world)
    redis_server.stop()
    try:
        alice = client_for("alice", server.address[1])
        result = alice.push(alice.work_tree(), "main")
        assert "main" in result.stdout
    finally:
        server.close(grace=10)
        thread.join(10)
    assert [row[4] for row in events(database)] == ["confirmed"]

    # A worker started while Redis is still down keeps trying; its scan enqueues the event
    # as soon as Redis is back (a new, empty Redis: nothing of the failed enqueue survives).
    log = redis_world.data_dir / "worker.log"
    worker = worker_process(redis_world, log, "--scan-interval", "1")
    try:
        wait_for(lambda: "Redis unavailable, retrying" in log.read_text(), "a retry")
        assert worker.poll() is None, log.read_text()
        assert [row[4] for row in events(database)] == ["confirmed"]
        redis_server.start()
        wait_for(lambda: [row[4] for row in events(database)] == ["received"], "the event")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()
