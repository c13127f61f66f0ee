"""Claims per second and claim latency with N concurrent providers, on both databases.

    python bench/claims.py [--providers 8] [--jobs 400] [--repositories 5]

Each provider is a forked process with its own engine that claims until the queue is empty
(no waiting). Prints throughput and the latency distribution of successful claims. PostgreSQL
runs when FORGE_CI_BENCH_POSTGRES_URL (or FORGE_CI_TEST_POSTGRES_URL) is set.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import Database
from forge_ci.protocol import ClaimRequest
from forge_ci.settings import Settings
from forge_ci_testing.seeding import bench_settings, postgres_url, seed


def _claimer(args: tuple[Settings, str]) -> list[float]:
    settings, token = args
    database = Database(settings)
    latencies = []
    try:
        while True:
            began = time.perf_counter()
            assignment = claims.claim(
                database.session,
                token,
                ClaimRequest(new_request_id(), new_token(), 0),
                lock_dir=settings.locks_dir,
            )
            if assignment is None:
                return latencies
            latencies.append(time.perf_counter() - began)
    finally:
        database.dispose()


def run(kind: str, providers: int, jobs: int, repositories: int) -> None:
    with bench_settings(kind) as settings:
        tokens = seed(settings, repositories, jobs, providers)
        began = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(providers) as pool:
            results = pool.map(_claimer, [(settings, t) for t in tokens], chunksize=1)
        elapsed = time.perf_counter() - began
    latencies = sorted(x for result in results for x in result)
    assert len(latencies) == jobs, f"{len(latencies)} claims for {jobs} jobs"
    p50 = statistics.median(latencies) * 1000
    p95 = latencies[int(len(latencies) * 0.95) - 1] * 1000
    print(
        f"{kind:<8} {providers:>3} providers  {jobs} jobs  {jobs / elapsed:7.1f} claims/s  "
        f"latency p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  max {latencies[-1] * 1000:6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--repositories", type=int, default=5)
    options = parser.parse_args()
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        for providers in options.providers:
            run(kind, providers, options.jobs, options.repositories)
    if "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
