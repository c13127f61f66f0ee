"""50 claimers in separate processes over 1,000 queued jobs: none claimed twice, none left.

Jobs are bulk-inserted (runs spread over five repositories) so the test measures claims, not
run creation. Each claimer is a forked process with its own engine, claiming until it is told
there is no work.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import Database
from forge_ci.models import Attempt, Job, QueueCount, QueuedJob, Repository, Run, RunSequence, User
from forge_ci.models.queue import rebuild_queue
from forge_ci.protocol import ClaimRequest
from forge_ci.settings import Settings
from forge_ci_testing.seeding import run_row
from tests.forge_ci.coordinator.world import OPERATOR, World, plan_job

CLAIMERS = 50
JOBS = 1000
RUNS = 50
REPOSITORIES = ("alice/app", "bob/lib", "alice/one", "alice/two", "alice/three")


def _claim_until_empty(args: tuple[Settings, str]) -> list[int]:
    settings, token = args
    database = Database(settings)  # after the fork: this process's own engine
    claimed = []
    try:
        while True:
            request = ClaimRequest(new_request_id(), new_token(), 0)
            assignment = claims.claim(database.session, token, request, lock_dir=settings.locks_dir)
            if assignment is None:
                return claimed
            claimed.append(assignment.job_id)
    finally:
        database.dispose()


def _bulk_queue(world: World) -> None:
    from forge_ci.repos import create_repository

    with world.session() as session:
        for name in REPOSITORIES[2:]:
            create_repository(session, world.settings, OPERATOR, name)
        session.commit()
        repositories = {
            f"{owner}/{name}": repo_id
            for repo_id, owner, name in session.execute(
                select(Repository.id, User.name, Repository.name).join(
                    User, User.id == Repository.owner_id
                )
            )
        }
        alice = session.scalar(select(User.id).where(User.name == "alice"))
        per_run = JOBS // RUNS
        plan = {"version": 1, "jobs": [plan_job(f"j{i}") for i in range(per_run)]}
        now = world.clock()
        numbers: Counter[int] = Counter()
        run_rows = []
        for index in range(RUNS):
            repository_id = repositories[REPOSITORIES[index % len(REPOSITORIES)]]
            numbers[repository_id] += 1
            run_rows.append(
                run_row(
                    repository_id,
                    numbers[repository_id],
                    alice,
                    plan,
                    user_name="alice",
                    created_at=now,
                )
            )
        session.execute(insert(Run), run_rows)
        session.execute(
            insert(RunSequence),
            [{"repository_id": r, "last_number": n} for r, n in numbers.items()],
        )
        run_ids = session.scalars(select(Run.id).order_by(Run.id)).all()
        job_rows = [
            {
                "run_id": run_id,
                "position": position,
                "plan": plan["jobs"][position],
                "key": f"j{position}",
                "job_id": f"j{position}",
                "name": f"j{position}",
                "needs": [],
                "runs_on": ["self-hosted", "linux"],
                "state": "queued",
                "created_at": now,
                "queued_at": now + timedelta(milliseconds=run_index * per_run + position),
            }
            for run_index, run_id in enumerate(run_ids)
            for position in range(per_run)
        ]
        session.execute(insert(Job), job_rows)
        rebuild_queue(session.connection())  # bulk inserts bypass the ORM's bookkeeping
        session.commit()


@pytest.mark.slow
@pytest.mark.timeout(900)  # leave room for slow, shared CI hosts
def test_concurrent_claimers_never_share_a_job_and_leave_none_behind(world: World) -> None:
    _bulk_queue(world)
    tokens = [world.add_provider(f"c{i}", scope="all") for i in range(CLAIMERS)]
    world.database.dispose()  # children must not inherit pooled connections
    began = time.monotonic()
    context = multiprocessing.get_context("fork")
    with context.Pool(CLAIMERS) as pool:
        results = pool.map(_claim_until_empty, [(world.settings, t) for t in tokens], chunksize=1)
    elapsed = time.monotonic() - began
    claimed = [job for result in results for job in result]
    assert len(claimed) == JOBS, f"{len(claimed)} claims for {JOBS} jobs"
    assert len(set(claimed)) == JOBS, "a job was claimed twice"
    with world.session() as session:
        assert session.scalar(select(Job.id).where(Job.state == "queued")) is None
        per_job = Counter(session.scalars(select(Attempt.job_id)).all())
        assert len(per_job) == JOBS and set(per_job.values()) == {1}
        # The claim queue followed every claim: no entry left, every count back to zero.
        assert session.scalar(select(QueuedJob.job_id)) is None
        assert set(session.scalars(select(QueueCount.queued))) == {0}
    busy = sum(1 for result in results if result)
    print(f"\n{JOBS} claims by {CLAIMERS} processes ({busy} got work) in {elapsed:.1f} s")
    assert busy > 1
