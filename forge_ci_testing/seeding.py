"""Shared set-up for the runner-protocol benches: throwaway databases, people, queued jobs.

SQLite always; PostgreSQL when ``FORGE_CI_BENCH_POSTGRES_URL`` (or the tests'
``FORGE_CI_TEST_POSTGRES_URL``) names a server where the user may create databases.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, select, text
from sqlalchemy.engine import make_url

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.cli.setup import ensure_layout
from forge_ci.coordinator.credentials import new_token
from forge_ci.coordinator.providers import create_provider
from forge_ci.db import Database, begin_write, create_db_engine
from forge_ci.migrations import upgrade
from forge_ci.models import Job, Repository, Run, RunSequence, User, utcnow
from forge_ci.models.queue import rebuild_queue
from forge_ci.repos import create_repository
from forge_ci.runs.numbering import next_run_number
from forge_ci.settings import Settings, load_settings

OPERATOR = Actor.operator()


def postgres_url() -> str | None:
    return os.environ.get("FORGE_CI_BENCH_POSTGRES_URL") or os.environ.get(
        "FORGE_CI_TEST_POSTGRES_URL"
    )


@contextmanager
def bench_settings(kind: str) -> Iterator[Settings]:
    """Settings on a fresh, migrated database of ``kind`` (sqlite or postgres)."""
    with tempfile.TemporaryDirectory(prefix="forge-ci-bench-") as folder:
        data = Path(folder) / "data"
        data.mkdir()
        admin = None
        name = f"fci_bench_{uuid.uuid4().hex[:8]}"
        if kind == "sqlite":
            url = f"sqlite:///{data / 'forge-ci.db'}"
        else:
            base = postgres_url()
            assert base is not None
            admin = create_engine(base, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            url = make_url(base).set(database=name).render_as_string(hide_password=False)
        try:
            engine = create_db_engine(url)
            upgrade(engine)
            engine.dispose()
            settings = load_settings(
                env={
                    "FORGE_CI_DATA_DIR": str(data),
                    "FORGE_CI_DATABASE_URL": url,
                    "FORGE_CI_ACTION_SOURCES": "none",
                }
            )
            ensure_layout(settings)
            yield settings
        finally:
            if admin is not None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()


def step(step_id: str, env: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": step_id,
        "generated_id": False,
        "name": step_id,
        "uses": None,
        "run": "true",
        "shell": None,
        "working_directory": None,
        "env": env or {},
        "if": "success()",
        "continue_on_error": False,
        "timeout_minutes": None,
    }


def plan_job(key: str, env: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "key": key,
        "id": key,
        "name": key,
        "needs": [],
        "if": "success()",
        "runs_on": ["self-hosted", "linux"],
        "timeout_minutes": 60,
        "permissions": {"contents": "read"},
        "matrix": None,
        "strategy": None,
        "outputs": {},
        "steps": [step("build", env), step("test")],
    }


def run_row(
    repository_id: int,
    number: int,
    user_id: int,
    plan: dict[str, Any],
    *,
    user_name: str = "bench",
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """A queued workflow_dispatch run's row, inserted in bulk by benches and tests."""
    return {
        "repository_id": repository_id,
        "number": number,
        "workflow_path": ".github/workflows/ci.yml",
        "workflow_name": "ci",
        "event_name": "workflow_dispatch",
        "ref": "refs/heads/main",
        "sha": "a" * 40,
        "pin_ref": f"refs/forge-ci/pipelines/{uuid.uuid4().hex}",
        "workflow_source": "on: workflow_dispatch\n",
        "plan": plan,
        "plan_version": 1,
        "plan_digest": hashlib.sha256(json.dumps(plan).encode()).hexdigest(),
        "context": {"repository": "bench/repo", "sha": "a" * 40},
        "state": "queued",
        "requested_by_id": user_id,
        "requested_by_name": user_name,
        "created_at": created_at or utcnow(),
        "concurrency_blocked": False,
        "cancel_in_progress": False,
    }


def _job_row(
    run_id: int, position: int, queued_at: datetime, plan: dict[str, Any]
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "position": position,
        "plan": plan["jobs"][position],
        "key": f"j{position}",
        "job_id": f"j{position}",
        "name": f"j{position}",
        "needs": [],
        "runs_on": ["self-hosted", "linux"],
        "state": "queued",
        "created_at": queued_at,
        "queued_at": queued_at,
    }


def _plan(jobs_per_run: int, job: dict[str, Any] | None = None) -> dict[str, Any]:
    template = job or plan_job("j")
    return {"version": 1, "jobs": [{**template, "key": f"j{i}"} for i in range(jobs_per_run)]}


def seed(
    settings: Settings,
    repositories: int,
    jobs: int,
    providers: int,
    jobs_per_run: int = 20,
    job: dict[str, Any] | None = None,
) -> list[str]:
    """Repositories, ``jobs`` queued jobs (bulk-inserted; none when 0) and provider tokens."""
    database = Database(settings)
    tokens = []
    try:
        with database.session() as session:
            create_user(session, OPERATOR, "bench", None)
            for index in range(repositories):
                create_repository(session, settings, OPERATOR, f"bench/repo{index}")
            session.commit()
            for index in range(providers):
                token = new_token()
                create_provider(
                    session, OPERATOR, f"provider{index}", token, "self-hosted,linux", "all"
                )
                tokens.append(token)
            session.commit()
            if jobs == 0:
                return tokens
            repo_ids = session.scalars(select(Repository.id).order_by(Repository.id)).all()
            user_id = session.scalar(select(User.id).where(User.name == "bench"))
            assert user_id is not None
            plan = _plan(jobs_per_run, job)
            numbers: dict[int, int] = {}
            rows = []
            for index in range(max(1, jobs // jobs_per_run)):
                repo = repo_ids[index % len(repo_ids)]
                numbers[repo] = numbers.get(repo, 0) + 1
                rows.append(run_row(repo, numbers[repo], user_id, plan))
            session.execute(insert(Run), rows)
            session.execute(
                insert(RunSequence),
                [{"repository_id": r, "last_number": n} for r, n in numbers.items()],
            )
            run_ids = session.scalars(select(Run.id).order_by(Run.id)).all()
            now = utcnow()
            session.execute(
                insert(Job),
                [
                    _job_row(
                        run_id,
                        position,
                        now + timedelta(milliseconds=r * jobs_per_run + position),
                        plan,
                    )
                    for r, run_id in enumerate(run_ids)
                    for position in range(jobs_per_run)
                ],
            )
            rebuild_queue(session.connection())  # bulk inserts bypass the ORM's bookkeeping
            session.commit()
    finally:
        database.dispose()
    return tokens


def queue_run(database: Database) -> None:
    """Queue one run of one job in the first repository through the ORM (so its commit
    publishes the Redis wake-up, as the scheduler's does)."""
    with database.session() as session:
        begin_write(session)
        repository_id = session.scalar(select(Repository.id).order_by(Repository.id))
        user_id = session.scalar(select(User.id).where(User.name == "bench"))
        assert repository_id is not None and user_id is not None
        number = next_run_number(session, repository_id)
        plan = _plan(1)
        run = Run(**run_row(repository_id, number, user_id, plan))
        session.add(run)
        session.flush()
        session.add(Job(**_job_row(run.id, 0, utcnow(), plan)))
        session.commit()
