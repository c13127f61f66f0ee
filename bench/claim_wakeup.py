"""How soon a waiting (long-poll) claim receives a job queued while it waits.

    python bench/claim_wakeup.py [--rounds 20]

The runner protocol's goal: an idle provider receives a new job within about 100 ms of it
becoming queued. Each round starts a claim that waits (in a thread, like a web worker), queues
one run through the ORM (whose commit publishes the Redis wake-up), and times from that commit
to the claim's return with its assignment. Two ways of noticing: the database poll alone (no
Redis, a queue-signature query every 100 ms) and a Redis subscription (a private
``redis-server`` on a Unix socket; the poll then runs every 250 ms only as a safety net). Prints
the median, p95 and max per database, and the ratio of the median to the 100 ms goal.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.service import Coordinator
from forge_ci.coordinator.wakeups import WakeupListener, install_publisher
from forge_ci.db import Database
from forge_ci.protocol import ClaimRequest
from forge_ci_testing.seeding import bench_settings, postgres_url, queue_run, seed

GOAL = 0.100
WAIT_SECONDS = 10


@contextmanager
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="forge-ci-bench-redis-") as folder:
        socket = Path(folder) / "redis.sock"
        process = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"]
            + ["--save", "", "--appendonly", "no", "--dir", folder],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not socket.exists():
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("redis-server did not start")
                time.sleep(0.02)
            yield f"unix://{socket}"
        finally:
            process.terminate()
            process.wait(10)


def one_round(coordinator: Coordinator, database: Database, token: str) -> float:
    result: dict[str, object] = {}

    def wait() -> None:
        claimed = coordinator.claim(
            token, ClaimRequest(new_request_id(), new_token(), WAIT_SECONDS)
        )
        result["assignment"] = claimed.assignment
        result["returned"] = time.perf_counter()

    thread = threading.Thread(target=wait)
    thread.start()
    # The claim found nothing and waits; queue at a random phase of its poll.
    time.sleep(0.3 + random.uniform(0, 0.25))
    queue_run(database)
    queued = time.perf_counter()
    thread.join(WAIT_SECONDS + 5)
    if result.get("assignment") is None:
        raise SystemExit("a waiting claim did not receive the queued job")
    return float(result["returned"]) - queued  # type: ignore[arg-type]


def measure(kind: str, redis_url: str | None, rounds: int) -> None:
    with bench_settings(kind) as settings:
        token = seed(settings, 1, 0, 1)[0]
        database = Database(settings)
        listener = WakeupListener(redis_url)
        try:
            if redis_url:
                install_publisher(redis_url)
                listener.start()
                deadline = time.monotonic() + 10
                while not listener.connected and time.monotonic() < deadline:
                    time.sleep(0.02)
            coordinator = Coordinator(database.session, settings, wakeups=listener)
            delays = sorted(one_round(coordinator, database, token) for _ in range(rounds))
        finally:
            listener.stop()
            database.dispose()
    median = statistics.median(delays)
    p95 = delays[max(0, int(len(delays) * 0.95) - 1)]
    how = "redis wake-up" if redis_url else "database poll"
    print(
        f"{kind:<8} {how:<14} {rounds} rounds  median {median * 1000:6.1f} ms  "
        f"p95 {p95 * 1000:6.1f} ms  max {delays[-1] * 1000:6.1f} ms  "
        f"median/goal(100 ms) {median / GOAL:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    with redis_server() as redis_url:
        for kind in kinds:
            measure(kind, None, options.rounds)
            measure(kind, redis_url, options.rounds)
    if "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
