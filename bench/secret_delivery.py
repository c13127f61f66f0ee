"""Just-in-time secret delivery: the latency of ``POST attempts/<id>/secrets`` for one step,
with the real store (sealed values, the key file read per request), on both databases.

    python bench/secret_delivery.py [--steps 200]

For 1 secret and for 16 secrets of 16 KiB (the 256 KiB an attempt may receive), each step is
reported running and its secrets fetched; the peer is a heartbeat of the same attempt (the
cheapest locked attempt request). Prints the medians and the ratio to the heartbeat.
PostgreSQL runs when FORGE_CI_BENCH_POSTGRES_URL (or FORGE_CI_TEST_POSTGRES_URL) is set.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import pygit2

from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.protocol import (
    ClaimRequest,
    HeartbeatRequest,
    SecretsRequest,
    StartRequest,
    StepRequest,
)
from forge_ci.secrets.store import set_secret
from forge_ci.settings import Settings
from forge_ci_testing.seeding import bench_settings, plan_job, postgres_url, seed, step

CI = ".github/workflows/ci.yml"


def _prepare(settings: Settings, secrets: int, value_bytes: int, steps: int) -> str:
    env = {f"E{n}": {"secret": f"S{n}"} for n in range(secrets)}
    job = plan_job("j")
    job["steps"] = [step(f"s{n}", env) for n in range(steps)]
    token = seed(settings, 1, 1, 1, jobs_per_run=1, job=job)[0]
    git = pygit2.Repository(str(repository_path(settings.repositories_dir, "bench", "repo0")))
    signature = pygit2.Signature("bench", "bench@example.com")
    oid = git.create_commit(None, signature, signature, "x", git.TreeBuilder().write(), [])
    git.references.create("refs/heads/main", oid)
    database = Database(settings)
    try:
        with database.session() as session:
            for n in range(secrets):
                set_secret(
                    session,
                    settings,
                    Actor.operator(),
                    "bench/repo0",
                    f"S{n}",
                    branch="main",
                    workflow_path=CI,
                    value=f"{n:x}" * value_bytes,
                    version="0",
                )
            session.commit()
    finally:
        database.dispose()
    return token


def measure(kind: str, secrets: int, value_bytes: int, steps: int) -> tuple[float, float]:
    """Median seconds of one delivery and of one heartbeat."""
    with bench_settings(kind) as settings:
        token = _prepare(settings, secrets, value_bytes, steps)
        database = Database(settings)
        try:
            coordinator = Coordinator(database.session, settings)
            attempt_token = new_token()
            claimed = coordinator.claim(token, ClaimRequest(new_request_id(), attempt_token, 0))
            assignment = claimed.assignment
            assert assignment is not None
            attempt = assignment.attempt_id
            execution = uuid.uuid4().hex
            coordinator.start(attempt_token, attempt, StartRequest(execution))
            deliveries, heartbeats = [], []
            for n in range(steps):
                coordinator.step(
                    attempt_token,
                    attempt,
                    StepRequest(execution, f"s{n}", "running", "", -1, False),
                )
                began = time.perf_counter()
                env, _ = coordinator.secrets(
                    attempt_token, attempt, SecretsRequest(execution, f"s{n}")
                )
                deliveries.append(time.perf_counter() - began)
                assert len(env) == secrets
                began = time.perf_counter()
                coordinator.heartbeat(attempt_token, attempt, HeartbeatRequest(execution))
                heartbeats.append(time.perf_counter() - began)
                coordinator.step(
                    attempt_token,
                    attempt,
                    StepRequest(execution, f"s{n}", "completed", "success", 0, False),
                )
        finally:
            database.dispose()
    return statistics.median(deliveries), statistics.median(heartbeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    options = parser.parse_args()
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        # 16 x 16 KiB reach the 256 KiB cap in one step: only one step can get them.
        for secrets, size, steps in ((1, 32, options.steps), (16, 16_384 // 2, 1)):
            delivery, heartbeat = measure(kind, secrets, size, steps)
            print(
                f"{kind:<8} {secrets:>2} secret(s) of {size * 2:>5} B  delivery "
                f"{delivery * 1000:6.2f} ms  heartbeat {heartbeat * 1000:6.2f} ms  "
                f"ratio {delivery / heartbeat:5.2f}  ({steps} steps)"
            )


if __name__ == "__main__":
    main()
