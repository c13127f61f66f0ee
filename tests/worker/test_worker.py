"""The worker's side on both databases: the job is idempotent, the scan recovers and re-enqueues."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from collections.abc import Iterator

import pygit2
import pytest
import redis
from rq import Queue
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.locks import repository_lock
from forge_ci.models import PushEvent
from forge_ci.pushes.events import claim_event, release_claim
from forge_ci.pushes.intents import PushContext, record_intents
from forge_ci.pushes.settling import settle_push, settle_repository
from forge_ci.queueing import PUSH_EVENTS_QUEUE, JobQueue
from forge_ci.refs import Update
from forge_ci.repos import create_repository
from forge_ci.runs.events import EventOutcome
from forge_ci.settings import Settings
from worker import jobs
from worker.main import scan

ZERO = "0" * 40


@pytest.fixture
def repo(session: Session, settings: Settings) -> tuple[int, int, pygit2.Repository]:
    """(repository id, alice's id, the bare repository)"""
    alice = create_user(session, Actor.operator(), "alice", None)
    repository = create_repository(session, settings, Actor.operator(), "alice/demo")
    session.commit()
    git = pygit2.Repository(str(repository_path(settings.repositories_dir, "alice", "demo")))
    return repository.id, alice.id, git


def commit(git: pygit2.Repository, message: str) -> str:
    signature = pygit2.Signature("T", "t@example.com", 1700000000, 0)
    return str(
        git.create_commit(None, signature, signature, message, git.TreeBuilder().write(), [])
    )


def intent(
    database: Database, repo: tuple[int, int, pygit2.Repository], session_id: str, ref: str
) -> tuple[int, str]:
    """A prepared intent for a new commit on ``ref``; the ref is not moved."""
    repository_id, pusher_id, git = repo
    new = commit(git, session_id)
    with database.session() as s:
        [event_id] = record_intents(
            s,
            PushContext(repository_id, pusher_id, session_id, "alice/demo"),
            [Update(ZERO, new, ref)],
        )
    return event_id, new


def state(database: Database, event_id: int) -> str:
    with database.session() as s:
        event = s.get(PushEvent, event_id)
        assert event is not None
        return event.state


@pytest.fixture
def job_database(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The job reads its settings from the environment, as in a worker process."""
    monkeypatch.setenv("FORGE_CI_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("FORGE_CI_DATABASE_URL", settings.database_url)
    monkeypatch.setattr(jobs, "_process_database", None)
    yield
    if jobs._process_database is not None:
        jobs._process_database[1].dispose()


Repo = tuple[int, int, pygit2.Repository]


def test_processing_a_push_event_is_idempotent(
    settings: Settings, database: Database, repo: Repo, job_database: None
) -> None:
    repository_id, _, git = repo
    event_id, new = intent(database, repo, "s1", "refs/heads/main")
    outcome = jobs.process_push_event(event_id)
    assert isinstance(outcome, EventOutcome) and outcome.result is None  # not confirmed yet
    git.references.create("refs/heads/main", pygit2.Oid(hex=new))
    with database.session() as s:
        settle_repository(s, settings, repository_id)
    # A delivery while another work horse holds the event plans nothing (issue #14, finding 5).
    with database.session() as s:
        assert claim_event(s, event_id, "elsewhere:1")
    held = jobs.process_push_event(event_id)
    assert isinstance(held, EventOutcome) and held.result is None
    assert held.detail.startswith("being processed by elsewhere:1 (until ")
    assert state(database, event_id) == "confirmed"
    with database.session() as s:
        assert release_claim(s, event_id, "elsewhere:1")  # as its worker does when it dies
    first = jobs.process_push_event(event_id)
    assert isinstance(first, EventOutcome) and first.result == "disabled"  # push workflows off
    assert not first.repeated
    # A second delivery does nothing and says so: it does not even wait for the repository.
    with repository_lock(settings.locks_dir, repository_id, "alice/demo", 1):
        again = jobs.process_push_event(event_id)
    assert again == dataclasses.replace(first, repeated=True)
    stale = jobs.process_push_event(424242)  # nor does a stale id
    assert isinstance(stale, EventOutcome) and stale.result is None
    assert state(database, event_id) == "received"


@pytest.fixture
def queue(settings: Settings, redis_url: str) -> Iterator[JobQueue]:
    value = JobQueue(dataclasses.replace(settings, redis_url=redis_url))
    yield value
    value.close()


def queued(redis_url: str) -> list[str]:
    connection = redis.Redis.from_url(redis_url)
    try:
        return list(Queue(PUSH_EVENTS_QUEUE, connection=connection).job_ids)
    finally:
        connection.close()


def test_the_scan_settles_crash_leftovers_and_enqueues_confirmed_events(
    settings: Settings,
    database: Database,
    repo: tuple[int, int, pygit2.Repository],
    queue: JobQueue,
    redis_url: str,
) -> None:
    repository_id, pusher_id, git = repo
    # A push that crashed after git moved the ref, before anyone confirmed it.
    moved, moved_to = intent(database, repo, "s1", "refs/heads/main")
    git.references.create("refs/heads/main", pygit2.Oid(hex=moved_to))
    # A push that crashed before git moved anything.
    stuck, _ = intent(database, repo, "s2", "refs/heads/other")
    # A push that completed normally but whose enqueue was lost with Redis.
    done, done_to = intent(database, repo, "s3", "refs/heads/done")
    git.references.create("refs/heads/done", pygit2.Oid(hex=done_to))
    with database.session() as s:
        context = PushContext(repository_id, pusher_id, "s3", "alice/demo")
        assert settle_push(s, settings, context).confirmed == [done]

    assert sorted(scan(settings, database, queue)) == sorted([moved, done])
    assert (state(database, moved), state(database, stuck), state(database, done)) == (
        "confirmed",
        "aborted",
        "confirmed",
    )
    assert str(git.references[f"refs/forge-ci/push-events/{moved}"].target) == moved_to
    assert sorted(queued(redis_url)) == sorted([f"push-event-{moved}", f"push-event-{done}"])
    # Scanning again while the jobs wait adds nothing; after Redis lost them, they come back.
    scan(settings, database, queue)
    assert len(queued(redis_url)) == 2
    redis.Redis.from_url(redis_url).flushall()
    scan(settings, database, queue)
    assert len(queued(redis_url)) == 2


def test_the_scan_skips_busy_repositories_and_reports_inspections(
    settings: Settings,
    database: Database,
    repo: tuple[int, int, pygit2.Repository],
    queue: JobQueue,
    caplog: pytest.LogCaptureFixture,
) -> None:
    repository_id, _, git = repo
    event_id, _ = intent(database, repo, "s1", "refs/heads/main")
    with repository_lock(settings.locks_dir, repository_id, "alice/demo", 1):
        assert scan(settings, database, queue) == []  # a push holds it: it settles itself
    assert state(database, event_id) == "prepared"

    git.references.create("refs/heads/main", pygit2.Oid(hex=commit(git, "by hand")))
    with caplog.at_level(logging.ERROR, logger="worker.main"):
        assert scan(settings, database, queue) == []
    assert f"push event {event_id}" in caplog.text and "needs inspection" in caplog.text
    assert state(database, event_id) == "prepared"


def test_the_worker_runs_the_scheduler_and_fires_the_current_minute(
    settings: Settings, database: Database, repo: Repo, redis_url: str
) -> None:
    """``forge-ci worker --burst`` takes the current minute's scheduled runs too."""
    from pygit2.enums import FileMode
    from sqlalchemy import select

    from forge_ci.models import Run
    from forge_ci.repos import set_scheduled_workflows
    from worker.main import run as run_worker

    _, _, git = repo
    text = (
        "on:\n  schedule:\n    - cron: '* * * * *'\njobs:\n  a:\n    runs-on: self-hosted\n"
        "    steps:\n      - run: make\n"
    )
    index = pygit2.Index()
    index.add(pygit2.IndexEntry(".github/workflows/cron.yml", git.create_blob(text), FileMode.BLOB))
    signature = pygit2.Signature("T", "t@example.com", 1700000000, 0)
    git.create_commit("refs/heads/main", signature, signature, "c", index.write_tree(git), [])
    with database.session() as s:
        set_scheduled_workflows(s, Actor.operator(), "alice/demo", True)
        s.commit()
    run_worker(dataclasses.replace(settings, redis_url=redis_url), burst=True)
    with database.session(read_only=True) as s:
        runs = list(s.scalars(select(Run)))
    assert [(r.event_name, r.requested_by_name) for r in runs] == [("schedule", "alice")]


def _signal_self_during(monkeypatch: pytest.MonkeyPatch, method: str) -> list[str]:
    """Make RQ's ``method`` of the worker end with a SIGTERM to this process, and its idle wait
    on Redis return at once; the returned list records every idle wait RQ started."""
    from worker.main import _Worker

    original = getattr(_Worker, method)

    def then_sigterm(self: _Worker, *args: object, **kwargs: object) -> object:
        result = original(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return result

    waits: list[str] = []

    def idle(self: _Worker, timeout: object, max_idle_time: object = None) -> None:
        waits.append("dequeue")
        return None  # as if idle for max_idle_time

    monkeypatch.setattr(_Worker, method, then_sigterm)
    monkeypatch.setattr(_Worker, "dequeue_job_and_maintain_ttl", idle)
    return waits


@pytest.mark.usefixtures("own_signal_handlers")
def test_a_sigterm_before_rq_took_over_the_signals_stops_the_worker_without_waiting(
    settings: Settings, database: Database, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between the loop's last look at its stop flag and RQ's own handlers: the
    signal reaches the loop's handler, and RQ must not then wait on Redis for the whole scan
    interval (30 s here; `forge-ci up` kills a worker that takes 10 s to stop)."""
    from worker.main import run as run_worker

    waits = _signal_self_during(monkeypatch, "bootstrap")
    run_worker(dataclasses.replace(settings, redis_url=redis_url), scan_interval=30)
    assert waits == []  # stopped on request before any wait for a job


@pytest.mark.usefixtures("own_signal_handlers")
def test_a_sigterm_just_after_rq_returned_stops_the_worker_cleanly(
    settings: Settings, database: Database, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ's handler is still installed for a moment after RQ returns and raises StopRequested
    wherever the signal lands; that is a stop, not a crash of the worker."""
    from worker.main import run as run_worker

    waits = _signal_self_during(monkeypatch, "teardown")
    run_worker(dataclasses.replace(settings, redis_url=redis_url), scan_interval=30)
    assert waits == ["dequeue"]  # one round of RQ, then stopped at its signal


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("own_signal_handlers")
def test_rqs_scheduler_stopped_before_it_took_over_the_signals_still_stops(
    settings: Settings, database: Database, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ forks its scheduler from the worker, so the scheduler runs the worker loop's signal
    handler until it installs its own; RQ's SIGTERM to it in that moment must end it, or the
    worker waits for it for ever (this test then times out)."""
    import time

    from rq.scheduler import RQScheduler

    from worker.main import run as run_worker

    original = RQScheduler._install_signal_handlers

    def late(self: RQScheduler) -> None:
        time.sleep(1)  # in the forked scheduler: the stop comes first, for certain
        original(self)

    monkeypatch.setattr(RQScheduler, "_install_signal_handlers", late)
    waits = _signal_self_during(monkeypatch, "bootstrap")
    run_worker(dataclasses.replace(settings, redis_url=redis_url), scan_interval=30)
    assert waits == []
