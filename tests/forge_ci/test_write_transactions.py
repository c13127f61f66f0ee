"""Every write use case succeeds while other processes commit all the time.

A running forge always has a process committing (the worker, the lease sweeper, log ingestion).
On SQLite in WAL mode, a deferred transaction that read and then writes after such a commit is
refused at once with "database is locked": the busy timeout does not help with a snapshot
conflict. Here three processes commit every millisecond while each use case runs, as the CLI,
the web and the SSH server call it (a fresh session, then commit), with every SELECT slowed
down so that a commit almost surely lands between a transaction's first read and its first
write. The harness is shown to be sharp: the same load defeats a deferred read-then-write.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import FileMode
from sqlalchemy import Column, Float, Integer, MetaData, Table, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from forge_ci.accounts import add_key, create_user, remove_key
from forge_ci.authz import Actor, Role
from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import (
    create_provider,
    ensure_provider,
    pause_provider,
    resume_provider,
    revoke_provider,
    set_provider_access,
    set_provider_labels,
)
from forge_ci.coordinator.sweeper import Sweeper
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import utcnow
from forge_ci.protocol import ClaimRequest
from forge_ci.repos import create_repository, grant, revoke, set_push_workflows
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.rerun import rerun_run
from forge_ci.settings import Settings
from forge_ci_testing.keys import fingerprint, make_key

OPERATOR = Actor.operator()
WORKFLOW = ".github/workflows/ci.yml"
CI_YAML = (
    "on: workflow_dispatch\n"
    "jobs:\n"
    "  build:\n"
    "    runs-on: [self-hosted, linux]\n"
    "    steps:\n"
    "      - run: echo hi\n"
)
NOISE_PROCESSES = 3
SLOW_SELECT_SECONDS = 0.003


# --- the load ----------------------------------------------------------------------------------


def _noise(url: str, stop: Any, started: Any) -> None:
    """Commit one row every millisecond until told to stop (at most 120 s)."""
    database = Database(_Url(url))
    deadline = time.monotonic() + 120
    first = True
    while not stop.is_set() and time.monotonic() < deadline:
        with database.session() as session:
            session.execute(text("INSERT INTO write_noise (at) VALUES (:at)"), {"at": time.time()})
            session.commit()
        if first:
            started.release()
            first = False
        time.sleep(0.001)
    database.dispose()


@dataclass(frozen=True)
class _Url:
    """The one setting :class:`Database` reads."""

    database_url: str


@pytest.fixture
def busy(settings: Settings, database: Database) -> Iterator[None]:
    """Other processes commit continuously while the test runs."""
    noise = Table(
        "write_noise", MetaData(), Column("id", Integer, primary_key=True), Column("at", Float)
    )
    with database.engine.begin() as connection:
        noise.create(connection)
    context = multiprocessing.get_context("spawn")
    stop, started = context.Event(), context.Semaphore(0)
    processes = [
        context.Process(target=_noise, args=(settings.database_url, stop, started), daemon=True)
        for _ in range(NOISE_PROCESSES)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        assert started.acquire(timeout=60), "a noise writer did not start"
    try:
        yield
    finally:
        stop.set()
        for process in processes:
            process.join(30)
            assert process.exitcode == 0


def _slow_selects(database: Database) -> None:
    """Widen every transaction's read-then-write window (a timing fault, nothing mocked)."""

    def _slow(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            time.sleep(SLOW_SELECT_SECONDS)

    for engine in database.engines:
        event.listen(engine, "before_cursor_execute", _slow)


# --- the world the use cases act on ------------------------------------------------------------


@dataclass
class World:
    settings: Settings
    database: Database
    key_path: Path
    provider_token: str

    def do(self, use_case: Callable[[Session], object]) -> None:
        """Call a use case as a front door does: a fresh session, then commit."""
        with self.database.session() as session:
            use_case(session)
            session.commit()

    def number_of_last_run(self) -> int:
        with self.database.session(read_only=True) as session:
            value = session.scalar(text("SELECT max(number) FROM runs"))
            return int(value)


@pytest.fixture
def world(settings: Settings, database: Database, tmp_path: Path) -> World:
    with database.session() as session:
        create_user(session, OPERATOR, "alice", None)
        create_user(session, OPERATOR, "bob", None)
        create_repository(session, settings, OPERATOR, "alice/demo")
        session.commit()
    _commit_workflow(repository_path(settings.repositories_dir, "alice", "demo"))
    token = new_token()
    with database.session() as session:
        create_provider(session, OPERATOR, "p1", token, "self-hosted,linux", "all")
        set_push_workflows(session, OPERATOR, "alice/demo", True)
        session.commit()
    return World(settings, database, make_key(tmp_path), token)


def _commit_workflow(path: Path) -> None:
    git = pygit2.Repository(str(path))
    blob = git.create_blob(CI_YAML.encode())
    builder = git.TreeBuilder()
    inner = git.TreeBuilder()
    workflows = git.TreeBuilder()
    workflows.insert("ci.yml", blob, FileMode.BLOB)
    inner.insert("workflows", workflows.write(), FileMode.TREE)
    builder.insert(".github", inner.write(), FileMode.TREE)
    signature = pygit2.Signature("Alice", "alice@example.com")
    git.create_commit("refs/heads/main", signature, signature, "ci", builder.write(), [])


# --- the use cases -----------------------------------------------------------------------------


def _accounts(world: World) -> None:
    world.do(lambda s: create_user(s, OPERATOR, "carol", None))
    public_key = world.key_path.with_suffix(".pub").read_text()
    world.do(lambda s: add_key(s, OPERATOR, "carol", public_key))
    world.do(lambda s: remove_key(s, OPERATOR, fingerprint(world.key_path)))


def _repositories(world: World) -> None:
    world.do(lambda s: create_repository(s, world.settings, OPERATOR, "bob/lib"))
    world.do(lambda s: grant(s, OPERATOR, "alice/demo", "bob", Role.WRITE))
    world.do(lambda s: revoke(s, OPERATOR, "alice/demo", "bob"))
    world.do(lambda s: set_push_workflows(s, OPERATOR, "alice/demo", False))


def _providers(world: World) -> None:
    token = new_token()
    world.do(lambda s: create_provider(s, OPERATOR, "p2", token, "self-hosted,linux", "selected"))
    world.do(
        lambda s: ensure_provider(s, OPERATOR, "p2", token, "self-hosted,linux,gpu", "selected")
    )
    world.do(lambda s: set_provider_labels(s, OPERATOR, "p2", "self-hosted,linux"))
    world.do(lambda s: set_provider_access(s, OPERATOR, "p2", "selected", ["alice/demo"]))
    world.do(lambda s: pause_provider(s, OPERATOR, "p2"))
    world.do(lambda s: resume_provider(s, OPERATOR, "p2"))
    world.do(lambda s: revoke_provider(s, OPERATOR, "p2"))


def _runs(world: World) -> None:
    dispatch = lambda s: dispatch_run(  # noqa: E731
        s, world.settings, OPERATOR, "alice/demo", "main", WORKFLOW
    )
    world.do(dispatch)
    world.do(lambda s: cancel_run(s, OPERATOR, "alice/demo", world.number_of_last_run()))
    world.do(lambda s: rerun_run(s, world.settings, OPERATOR, "alice/demo", 1))


def _claims_and_sweeps(world: World) -> None:
    world.do(lambda s: dispatch_run(s, world.settings, OPERATOR, "alice/demo", "main", WORKFLOW))
    request = ClaimRequest(request_id=new_request_id(), attempt_token=new_token())
    assignment = claims.claim(
        world.database.session,
        world.provider_token,
        request,
        lock_dir=world.settings.locks_dir,
    )
    assert assignment is not None
    Sweeper(world.database.session).run_once()
    # The lease runs out: the sweeper's pass writes the attempt lost.
    later = lambda: utcnow() + timedelta(hours=1)  # noqa: E731
    assert Sweeper(world.database.session, clock=later).run_once() >= 1


USE_CASES = {
    "accounts": _accounts,
    "repositories": _repositories,
    "providers": _providers,
    "runs": _runs,
    "claims-and-sweeps": _claims_and_sweeps,
}


@pytest.mark.parametrize("name", sorted(USE_CASES))
def test_write_use_cases_succeed_beside_writers_that_commit_all_the_time(
    name: str, world: World, busy: None
) -> None:
    _slow_selects(world.database)
    USE_CASES[name](world)


@pytest.mark.parametrize("db_kind", ["sqlite"])  # PostgreSQL has no such snapshot conflict
def test_the_load_defeats_a_deferred_read_then_write(settings: Settings, busy: None) -> None:
    """Without the write lock up front, the same load refuses the write at once."""
    path = make_url(settings.database_url).database
    assert path is not None
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    refused = 0
    for _ in range(5):
        connection.execute("BEGIN")
        connection.execute("SELECT count(*) FROM write_noise").fetchone()
        time.sleep(0.02)
        try:
            connection.execute("INSERT INTO write_noise (at) VALUES (0)")
            connection.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            assert "database is locked" in str(exc)
            refused += 1
            connection.execute("ROLLBACK")
    connection.close()
    assert refused == 5


def test_a_read_only_session_refuses_to_write(database: Database) -> None:
    with database.session(read_only=True) as session:
        assert session.scalar(text("SELECT count(*) FROM users")) == 0
        with pytest.raises(Exception, match="(?i)read-?only"):
            session.execute(text("INSERT INTO users (name) VALUES ('mallory')"))
    with database.session(read_only=True) as session:
        assert session.scalar(text("SELECT count(*) FROM users")) == 0


@pytest.mark.parametrize("db_kind", ["sqlite"])  # the BEGIN IMMEDIATE of forge_ci.db's SQLite rules
def test_a_writer_refused_the_lock_gets_sqlalchemys_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write transaction's BEGIN runs on the driver's connection; when the lock is held
    past the busy timeout, the caller still gets SQLAlchemy's OperationalError, which names
    the statement, and the engine's next writer begins once the lock is free."""
    monkeypatch.setattr("forge_ci.db.SQLITE_BUSY_TIMEOUT_MS", 50)
    database = Database(settings)
    path = make_url(settings.database_url).database
    assert path is not None
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with database.session() as session:
            with pytest.raises(OperationalError, match="database is locked") as refused:
                session.execute(text("SELECT count(*) FROM users"))
        assert refused.value.statement == "BEGIN IMMEDIATE"
        holder.execute("ROLLBACK")
        _writes_and_reads(database, "carol")
    finally:
        holder.close()
        database.dispose()


def _writes_and_reads(database: Database, name: str) -> None:
    """The engine's next writer commits a user and its next reader finds them."""
    with database.session() as session:
        create_user(session, OPERATOR, name, None)
        session.commit()
    with database.session(read_only=True) as session:
        found = session.scalar(
            text("SELECT count(*) FROM users WHERE name = :name"), {"name": name}
        )
        assert found == 1


@pytest.mark.parametrize("db_kind", ["sqlite"])  # the BEGIN of forge_ci.db's SQLite rules
def test_a_connection_closed_under_the_pool_is_invalidated_at_its_begin(
    settings: Settings,
) -> None:
    """The BEGIN on the driver's connection finds it closed: the error says the connection
    was invalidated, as SQLAlchemy's own execution says, and the pool's next connection is a
    new one that works."""
    database = Database(settings)
    try:
        connection = database.engine.connect()
        connection.connection.driver_connection.close()  # type: ignore[union-attr]
        with pytest.raises(DBAPIError, match="closed database") as refused:
            connection.begin()
        assert refused.value.statement.startswith("BEGIN")
        assert refused.value.connection_invalidated
        assert connection.invalidated
        connection.close()
        _writes_and_reads(database, "dave")
    finally:
        database.dispose()
