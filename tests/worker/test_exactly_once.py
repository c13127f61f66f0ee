"""Every push event is processed exactly once by a pool of real workers (issue #14, finding 5).

Two worker processes scanning every second, and two more enqueuers standing in for pushes,
all offer the same confirmed events at once; a work horse is killed with SIGKILL while it
holds an event. Every event is planned once (the workers' log says so), has one run, and the
killed one is processed afterwards, once.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import FileMode
from sqlalchemy import func, select

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.locks import repository_lock
from forge_ci.models import PushEvent, PushEventWorkflow, Run
from forge_ci.pushes.events import still_offered
from forge_ci.queueing import JobQueue
from forge_ci.repos import create_repository, set_push_workflows
from forge_ci.settings import Settings
from tests.conftest import REPO_ROOT

OPERATOR = Actor.operator()
ZERO = "0" * 40
EVENTS = 30
WORKFLOW = "on: push\njobs:\n  a:\n    runs-on: self-hosted\n    steps:\n      - run: make\n"


def repository_with_events(
    database: Database, settings: Settings, name: str, count: int
) -> tuple[int, list[int]]:
    """alice/<name> with push workflows on, a commit with one workflow, and ``count`` confirmed
    events of new branches at it, as a push leaves them; (repository id, event ids)."""
    with database.session() as session:
        repository = create_repository(session, settings, OPERATOR, f"alice/{name}")
        session.commit()
        set_push_workflows(session, OPERATOR, f"alice/{name}", True)
        session.commit()
        repository_id, pusher_id = repository.id, repository.owner_id
    git = pygit2.Repository(str(repository_path(settings.repositories_dir, "alice", name)))
    index = pygit2.Index()
    path = ".github/workflows/ci.yml"
    index.add(pygit2.IndexEntry(path, git.create_blob(WORKFLOW), FileMode.BLOB))
    signature = pygit2.Signature("A", "a@example.com", 1700000000, 0)
    sha = str(git.create_commit(None, signature, signature, "ci", index.write_tree(git), []))
    with database.session() as session:
        events = [
            PushEvent(
                repository_id=repository_id,
                pusher_id=pusher_id,
                push_session=secrets.token_hex(8),
                ref=f"refs/heads/b{i}",
                old_sha=ZERO,
                new_sha=sha,
                state="confirmed",
            )
            for i in range(count)
        ]
        session.add_all(events)
        session.commit()
        return repository_id, [event.id for event in events]


def until(what: str, check: Callable[[], object], seconds: float = 120) -> object:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]


def test_a_pool_processes_every_event_once_even_when_a_work_horse_is_killed(
    settings: Settings, database: Database, redis_url: str
) -> None:
    with database.session() as session:
        create_user(session, OPERATOR, "alice", None)
        session.commit()
    # The event the work horse is killed on comes first, so that a worker takes it at once.
    slow_repo, [slow] = repository_with_events(database, settings, "slow", 1)
    _, ids = repository_with_events(database, settings, "many", EVENTS)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
        "FORGE_CI_REDIS_URL": redis_url,
    }
    log = settings.data_dir / "pool.log"
    command = [sys.executable, "-m", "forge_ci", "worker", "--processes", "2"]
    lock = repository_lock(settings.locks_dir, slow_repo, "alice/slow", 1)
    lock.__enter__()  # the slow event's work horse waits for it, holding its claim
    locked = True
    with open(log, "wb") as output:
        pool = subprocess.Popen(
            [*command, "--scan-interval", "1"], env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        # Pushes enqueue their events while both workers' scans do.
        pushers = [JobQueue(dataclasses.replace(settings, redis_url=redis_url)) for _ in "ab"]

        def push(queue: JobQueue) -> None:
            for _ in range(3):
                queue.enqueue_push_events([slow, *ids], still_offered(database))
                time.sleep(0.1)

        threads = [threading.Thread(target=push, args=(queue,)) for queue in pushers]
        for thread in threads:
            thread.start()

        def holder() -> str | None:
            with database.session(read_only=True) as s:
                event = s.get(PushEvent, slow)
                assert event is not None
                return event.claimed_by if event.claimed_until is not None else None

        first = str(until("the slow event's claim", holder))
        horse = int(first.rsplit(":", 1)[1])
        assert parent_of(parent_of(horse)) == pool.pid  # a work horse of one of the pool's workers
        os.kill(horse, signal.SIGKILL)
        lock.__exit__(None, None, None)
        locked = False
        for thread in threads:
            thread.join(60)
        for queue in pushers:
            queue.close()

        def pending() -> int:
            with database.session(read_only=True) as s:
                return (
                    s.scalar(
                        select(func.count())
                        .select_from(PushEvent)
                        .where(PushEvent.state != "received")
                    )
                    or 0
                )

        until("every event received", lambda: pending() == 0)
        with database.session(read_only=True) as s:
            outcomes = Counter(
                s.scalars(
                    select(PushEventWorkflow.push_event_id).where(
                        PushEventWorkflow.run_id.is_not(None)
                    )
                )
            )
            runs = s.scalar(select(func.count()).select_from(Run))
            event = s.get(PushEvent, slow)
            assert event is not None
            last = event.claimed_by
    finally:
        if locked:
            lock.__exit__(None, None, None)
        pool.send_signal(signal.SIGTERM)
        try:
            pool.wait(60)
        except subprocess.TimeoutExpired:
            pool.kill()
            pool.wait(10)
    text = log.read_text()
    # Every ref update has one run, and every event was planned once: no duplicate deliveries.
    assert outcomes == Counter({event_id: 1 for event_id in [slow, *ids]})
    assert runs == EVENTS + 1
    planned = Counter(int(n) for n in re.findall(r"push event (\d+): processed \(", text))
    assert planned == Counter({event_id: 1 for event_id in [slow, *ids]}), text[-3000:]
    assert "already processed" not in text and "being processed" not in text
    # The killed work horse's event was given back by its worker and taken by another horse.
    assert f"Work horse killed for job push-event-{slow}" in text
    assert last is not None and last != first
