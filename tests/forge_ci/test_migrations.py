"""Migrations from empty on both databases, and refusal of unmigrated or newer schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from forge_ci.db import create_db_engine
from forge_ci.errors import SchemaNotCurrent
from forge_ci.migrations import (
    _head_from_files,
    check_schema,
    current_revision,
    head_revision,
    upgrade,
)
from forge_ci.models import Base

REPO_ROOT = Path(__file__).resolve().parents[2]

_CHECK_PROBE = """
import json, sys
from forge_ci.db import create_db_engine
from forge_ci.errors import SchemaNotCurrent
from forge_ci.migrations import check_schema
try:
    check_schema(create_db_engine(sys.argv[1]))
    refused = None
except SchemaNotCurrent as exc:
    refused = str(exc)
print(json.dumps({"refused": refused, "alembic": "alembic" in sys.modules}))
"""


def _check_in_a_process(url: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", _CHECK_PROBE, url],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


def test_a_current_schema_is_recognised_without_alembic(empty_db_url: str) -> None:
    """The head read from the revision files is alembic's; a current database needs no alembic.

    The refusal: an unmigrated database is refused, by alembic's reading, with the fix.
    """
    assert _head_from_files() == head_revision()
    unmigrated = _check_in_a_process(empty_db_url)
    assert unmigrated["alembic"] is True
    assert "no forge-ci schema yet" in str(unmigrated["refused"])
    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    assert _check_in_a_process(empty_db_url) == {"refused": None, "alembic": False}


def test_upgrade_from_empty_creates_every_table(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        tables = set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
        upgrade(engine)  # idempotent
        check_schema(engine)
    finally:
        engine.dispose()


def test_the_models_and_the_migrations_agree(empty_db_url: str) -> None:
    """A model changed without a migration fails here (alembic autogenerate finds a diff)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_an_unmigrated_database_is_refused_with_the_fix(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        with pytest.raises(SchemaNotCurrent, match="run `forge-ci db upgrade`"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_a_newer_schema_is_refused(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
        with pytest.raises(SchemaNotCurrent, match="newer than this forge-ci"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_an_older_schema_is_refused(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine, "0001_baseline")
        if head_revision() == "0001_baseline":
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM alembic_version"))
            with pytest.raises(SchemaNotCurrent, match="no forge-ci schema yet"):
                check_schema(engine)
        else:
            with pytest.raises(SchemaNotCurrent, match="older than this forge-ci"):
                check_schema(engine)
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout(sqlite_db_url: str) -> None:
    engine = create_db_engine(sqlite_db_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        engine.dispose()


def _alice_app(conn: Any) -> tuple[int, int]:
    """The user alice and her repository alice/app, by Core statements (any schema revision
    since 0001): their ids."""
    from sqlalchemy import insert

    from forge_ci.models import Repository, User

    users, repositories = User.__table__, Repository.__table__
    user = conn.execute(insert(users).values(name="alice").returning(users.c.id)).scalar_one()
    repository = conn.execute(
        insert(repositories).values(owner_id=user, name="app").returning(repositories.c.id)
    ).scalar_one()
    return user, repository


def test_the_claim_queue_is_filled_from_the_jobs_queued_before_it(empty_db_url: str) -> None:
    """0007_claims: jobs queued at upgrade time are in job_queue and counted; others are not."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import insert, select

    from forge_ci.migrations import _config
    from forge_ci.models import Job, QueueCount, QueuedJob, Run
    from forge_ci.models.queue import label_key
    from forge_ci_testing.seeding import run_row

    engine = create_db_engine(empty_db_url)
    try:
        before = ScriptDirectory.from_config(_config(engine)).get_revision("0007_claims")
        upgrade(engine, str(before.down_revision))
        with engine.begin() as conn:  # Core statements: the models' bookkeeping does not run
            user, repository = _alice_app(conn)
            run = conn.execute(
                insert(Run.__table__)
                .values(**run_row(repository, 1, user, {"version": 1, "jobs": []}))
                .returning(Run.__table__.c.id)
            ).scalar_one()
            now = run_row(repository, 1, user, {})["created_at"]
            jobs = [
                ("queued", [" Linux", "self-hosted"]),
                ("queued", ["self-hosted", "linux"]),
                ("waiting", ["self-hosted", "linux"]),
                ("running", ["self-hosted", "linux"]),
            ]
            conn.execute(
                insert(Job.__table__),
                [
                    {
                        "run_id": run,
                        "position": i,
                        "key": f"j{i}",
                        "job_id": f"j{i}",
                        "name": f"j{i}",
                        "needs": [],
                        "runs_on": runs_on,
                        "state": state,
                        "created_at": now,
                        "queued_at": now,
                    }
                    for i, (state, runs_on) in enumerate(jobs)
                ],
            )
        upgrade(engine)
        with engine.connect() as conn:
            queued = conn.execute(select(Job.id).where(Job.state == "queued")).scalars().all()
            assert sorted(conn.execute(select(QueuedJob.job_id)).scalars()) == sorted(queued)
            assert set(conn.execute(select(QueuedJob.labels)).scalars()) == {
                label_key(["linux", "self-hosted"])
            }
            counts = conn.execute(
                select(QueueCount.repository_id, QueueCount.labels, QueueCount.queued)
            ).all()
            assert [tuple(row) for row in counts] == [
                (repository, label_key(["linux", "self-hosted"]), 2)
            ]
    finally:
        engine.dispose()


def test_each_repository_is_last_served_as_its_attempts_say(empty_db_url: str) -> None:
    """0010_served: a repository's fairness key starts as its latest attempt's claim time (none
    for a repository never served), and the index it was read by is gone."""
    from datetime import UTC, datetime, timedelta

    from alembic.script import ScriptDirectory
    from sqlalchemy import insert, select

    from forge_ci.migrations import _config
    from forge_ci.models import Attempt, Job, Provider, Repository, Run, RunSequence, User
    from forge_ci_testing.seeding import run_row

    engine = create_db_engine(empty_db_url)
    claimed = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    try:
        before = ScriptDirectory.from_config(_config(engine)).get_revision("0010_served")
        upgrade(engine, str(before.down_revision))
        users, repositories = User.__table__, Repository.__table__
        with engine.begin() as conn:  # Core statements, and only the columns 0009 has
            user = conn.execute(
                insert(users).values(name="alice").returning(users.c.id)
            ).scalar_one()
            served, idle = (
                conn.execute(
                    insert(repositories)
                    .values(owner_id=user, name=name)
                    .returning(repositories.c.id)
                ).scalar_one()
                for name in ("app", "lib")
            )
            conn.execute(
                insert(RunSequence.__table__),
                [{"repository_id": r, "last_number": 1} for r in (served, idle)],
            )
            provider = conn.execute(
                insert(Provider.__table__)
                .values(name="p1", token_hash="0" * 64, labels="linux")
                .returning(Provider.__table__.c.id)
            ).scalar_one()
            run = conn.execute(
                insert(Run.__table__)
                .values(**run_row(served, 1, user, {"version": 1, "jobs": []}))
                .returning(Run.__table__.c.id)
            ).scalar_one()
            job = conn.execute(
                insert(Job.__table__)
                .values(
                    run_id=run,
                    position=0,
                    key="j",
                    job_id="j",
                    name="j",
                    needs=[],
                    runs_on=["linux"],
                    state="running",
                    created_at=claimed,
                )
                .returning(Job.__table__.c.id)
            ).scalar_one()
            conn.execute(
                insert(Attempt.__table__),
                [
                    {
                        "job_id": job,
                        "number": number,
                        "provider_id": provider,
                        "repository_id": served,
                        "request_id": f"{number:032x}",
                        "token_hash": f"{number:064x}",
                        "timeout_minutes": 5,
                        "state": "completed" if number == 1 else "leased",
                        "conclusion": "lost" if number == 1 else None,
                        "claimed_at": claimed + timedelta(minutes=number),
                        "lease_expires_at": claimed + timedelta(minutes=number + 1),
                    }
                    for number in (2, 1)
                ],
            )
        upgrade(engine)
        with engine.connect() as conn:
            keys = dict(
                conn.execute(select(RunSequence.repository_id, RunSequence.served_at)).all()
            )
        assert keys == {served: claimed + timedelta(minutes=2), idle: None}
        assert "ix_attempts_repository_id_claimed_at" not in {
            index["name"] for index in inspect(engine).get_indexes("attempts")
        }
    finally:
        engine.dispose()


def test_each_job_gets_its_own_entry_of_its_runs_plan(empty_db_url: str) -> None:
    """0011_job_plans: every job's row holds its entry of its run's plan (a job whose run's
    plan has none at its position holds JSON null); later jobs must name theirs. (The column
    is added without rebuilding jobs: test_the_claim_queue_is_filled_from_the_jobs_queued_
    before_it fails when a rebuild cascades to the queue entries.)"""
    from alembic.script import ScriptDirectory
    from sqlalchemy import insert, select
    from sqlalchemy.exc import DBAPIError

    from forge_ci.migrations import _config
    from forge_ci.models import Job, Run
    from forge_ci_testing.seeding import plan_job, run_row

    engine = create_db_engine(empty_db_url)
    entries = [plan_job("build"), {**plan_job("test"), "needs": ["build"]}]
    try:
        before = ScriptDirectory.from_config(_config(engine)).get_revision("0011_job_plans")
        upgrade(engine, str(before.down_revision))
        jobs = Job.__table__
        with engine.begin() as conn:  # Core statements, and only the columns 0010 has
            user, repository = _alice_app(conn)
            runs = [
                conn.execute(
                    insert(Run.__table__)
                    .values(**run_row(repository, number, user, {"version": 1, "jobs": plan}))
                    .returning(Run.__table__.c.id)
                ).scalar_one()
                for number, plan in ((1, entries), (2, entries[:1]))
            ]
            row = run_row(repository, 1, user, {})
            conn.execute(
                insert(jobs),
                [
                    {
                        "run_id": run,
                        "position": position,
                        "key": f"{run}-{position}",
                        "job_id": "j",
                        "name": "j",
                        "needs": [],
                        "runs_on": ["linux"],
                        "state": "waiting",
                        "created_at": row["created_at"],
                    }
                    for run, position in ((runs[0], 0), (runs[0], 1), (runs[1], 0), (runs[1], 1))
                ],
            )
        upgrade(engine)
        with engine.connect() as conn:
            found = conn.execute(
                select(jobs.c.run_id, jobs.c.position, jobs.c.plan).order_by(jobs.c.id)
            ).all()
        assert [tuple(job) for job in found] == [
            (runs[0], 0, entries[0]),
            (runs[0], 1, entries[1]),
            (runs[1], 0, entries[0]),
            (runs[1], 1, None),  # no entry at its position: nothing made up
        ]
        # A later job without its copy is refused (SQLite: its column default, JSON null, is).
        with pytest.raises(DBAPIError, match="jobs.plan"):
            with engine.begin() as conn:
                conn.execute(
                    insert(jobs).values(
                        run_id=runs[1],
                        position=2,
                        key="later",
                        job_id="j",
                        name="j",
                        needs=[],
                        runs_on=[],
                        state="waiting",
                        created_at=row["created_at"],
                    )
                )
    finally:
        engine.dispose()
