"""Claims per second against the database's own floor, by queue depth and claimers, both databases.

    python bench/claims.py [--claimers 1 8 32] [--depths 100 1000 10000] [--claims 256] [--rounds 3]

For each queue depth D and number of claimers N, one throwaway database is seeded with
D + 2 x rounds x (claims + N) queued jobs (runs spread over five repositories) and N provider
tokens;
then N forked processes (each with its own engine, warmed up by one claim: ``_WARM_UP``; the
clock starts when every claimer is warmed up and ends with the last claim) make
``claims`` claims between them through
forge-ci (``claims.claim``: authentication, replay lookup, fairness, label matching,
authorization and secret rechecks, state machine, assignment), and then N processes make as
many *raw* claims on the same database: the minimal correct claim transaction in plain SQL
through the bare driver (authenticate the provider, take the oldest queued job so that no
other claimer can, mark it running, insert its attempt; SQLite ``BEGIN IMMEDIATE`` +
``UPDATE ... RETURNING``, PostgreSQL ``FOR UPDATE SKIP LOCKED``). The queue never drops below
D while measuring. Each cell alternates the two ``--rounds`` times (default 3) on its database
(forge-ci's queue bookkeeping rebuilt after each raw round, whose claims only mark jobs running)
and shows the round with the median ratio, then every round's ratio (sorted): on this shared virtual
machine the same claims' CPU time varied from 1.0 to 2.7 ms within minutes, so one pair of runs
can be far off; "steal" is the share of the machine's CPU time the hypervisor gave to other
guests during that round (forge_ci_testing/machine.py). "cpu" is the claimers' own CPU time
per claim (the client side; on a busy machine wall-clock rates mostly measure waiting for a
CPU). The goal (issue #21):
forge-ci at least 1/3 of the floor with 1 and 8 claimers, flat in queue depth, no collapse
at 32 claimers. PostgreSQL runs when
FORGE_CI_BENCH_POSTGRES_URL (or FORGE_CI_TEST_POSTGRES_URL) is set.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import make_url

from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import SQLITE_BUSY_TIMEOUT_MS, Database
from forge_ci.models.queue import rebuild_queue
from forge_ci.protocol import ClaimRequest
from forge_ci.settings import Settings
from forge_ci_testing.machine import StealMeter
from forge_ci_testing.seeding import bench_settings, postgres_url, seed

GOAL = 1 / 3
#: One claimer's latencies and CPU seconds, and the clock when it started and ended.
Measured = tuple[list[float], float, float, float]
#: Each claimer process, forge-ci's and the raw one alike, makes one claim before its clock
#: starts: its connections opened, its statements compiled and cached, as in a long-running
#: coordinator (the raw claimer's connection was always opened before its clock; forge-ci's
#: first claim paid connecting and compiling, which with 8 claimers of 16 claims each was
#: most of its CPU).
_WARM_UP = 1

_ATTEMPT = (
    "INSERT INTO attempts (revision, job_id, number, provider_id, repository_id, request_id,"
    " token_hash, state, timeout_minutes, claimed_at, lease_expires_at,"
    " cancelled_by_provider_change, acknowledged_sequence, log_bytes, log_limit_reached,"
    " log_records, log_mask, mask_count)"
    " VALUES (1, {p}, 1, {p}, {p}, {p}, {p}, 'leased', 60, {p}, {p}, FALSE, 0, 0, FALSE, 0,"
    " '***', 0)"
)
_SQLITE_TAKE = (
    "UPDATE jobs SET state = 'running', started_at = ?, revision = revision + 1 WHERE id ="
    " (SELECT id FROM jobs WHERE state = 'queued' ORDER BY queued_at, id LIMIT 1)"
    " RETURNING id, run_id"
)
_POSTGRES_TAKE = (
    "SELECT jobs.id, jobs.run_id FROM jobs WHERE state = 'queued' ORDER BY queued_at, id"
    " LIMIT 1 FOR UPDATE SKIP LOCKED"
)


#: Set in each measurement's parent before it forks its claimers: every claimer waits here
#: after its warm-up, so the clock measures claims, not processes starting and connecting.
_START: Any = None


def _timed(claim_one: Callable[[], None], count: int, latencies: list[float]) -> Measured:
    """``count`` claims after every claimer is warmed up: latencies, CPU, start and end."""
    _START.wait()
    cpu = time.process_time()
    start = time.perf_counter()
    for _ in range(count):
        began = time.perf_counter()
        claim_one()
        latencies.append(time.perf_counter() - began)
    return latencies, time.process_time() - cpu, start, time.perf_counter()


def _forge_claimer(args: tuple[Settings, str, int]) -> Measured:
    settings, token, count = args
    database = Database(settings)
    latencies: list[float] = []

    def claim_one() -> None:
        assignment = claims.claim(
            database.session,
            token,
            ClaimRequest(new_request_id(), new_token(), 0),
            lock_dir=settings.locks_dir,
            engine=database.engine,  # as the coordinator: its engine known once
        )
        assert assignment is not None, "the queue ran dry"

    try:
        for _ in range(_WARM_UP):
            claim_one()
        return _timed(claim_one, count, latencies)
    finally:
        database.dispose()


def _raw_sqlite(url: str) -> tuple[Any, Callable[[Any, str], None]]:
    connection = sqlite3.connect(
        str(make_url(url).database), timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None
    )
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA foreign_keys=ON")
    insert = _ATTEMPT.format(p="?")

    def claim_one(db: Any, token: str) -> None:
        now = datetime.now(UTC).replace(tzinfo=None)
        db.execute("BEGIN IMMEDIATE")
        digest = hashlib.sha256(token.encode()).hexdigest()
        (provider_id,) = db.execute(
            "SELECT id FROM providers WHERE token_hash = ? AND state = 'active'", (digest,)
        ).fetchone()
        job_id, run_id = db.execute(_SQLITE_TAKE, (now,)).fetchone()
        (repository_id,) = db.execute(
            "SELECT repository_id FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        db.execute(
            insert,
            (
                job_id,
                provider_id,
                repository_id,
                uuid.uuid4().hex,
                new_token_hash(),
                now,
                now + timedelta(seconds=60),
            ),
        )
        db.execute("COMMIT")

    return connection, claim_one


def _raw_postgres(url: str) -> tuple[Any, Callable[[Any, str], None]]:
    import psycopg

    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = psycopg.connect(plain)
    insert = _ATTEMPT.format(p="%s")

    def claim_one(db: Any, token: str) -> None:
        now = datetime.now(UTC).replace(tzinfo=None)
        with db.transaction():
            digest = hashlib.sha256(token.encode()).hexdigest()
            (provider_id,) = db.execute(
                "SELECT id FROM providers WHERE token_hash = %s AND state = 'active' FOR KEY SHARE",
                (digest,),
            ).fetchone()
            job_id, run_id = db.execute(_POSTGRES_TAKE).fetchone()
            db.execute(
                "UPDATE jobs SET state = 'running', started_at = %s, revision = revision + 1"
                " WHERE id = %s",
                (now, job_id),
            )
            (repository_id,) = db.execute(
                "SELECT repository_id FROM runs WHERE id = %s", (run_id,)
            ).fetchone()
            db.execute(
                insert,
                (
                    job_id,
                    provider_id,
                    repository_id,
                    uuid.uuid4().hex,
                    new_token_hash(),
                    now,
                    now + timedelta(seconds=60),
                ),
            )

    return connection, claim_one


def new_token_hash() -> str:
    return hashlib.sha256(new_token().encode()).hexdigest()


def _raw_claimer(args: tuple[Settings, str, int]) -> Measured:
    settings, token, count = args
    url = settings.database_url
    opener = _raw_sqlite if url.startswith("sqlite") else _raw_postgres
    connection, claim_one = opener(url)
    latencies: list[float] = []
    try:
        for _ in range(_WARM_UP):
            claim_one(connection, token)
        return _timed(lambda: claim_one(connection, token), count, latencies)
    finally:
        connection.close()


def _measure(
    worker: Callable[[tuple[Settings, str, int]], Measured],
    settings: Settings,
    tokens: list[str],
    claims_total: int,
) -> tuple[float, float, float]:
    """Claims per second, p95 latency and client CPU per claim (both in ms) of
    ``claims_total`` claims by len(tokens) claimers."""
    global _START
    each = claims_total // len(tokens)
    context = multiprocessing.get_context("fork")
    _START = context.Barrier(len(tokens))
    with context.Pool(len(tokens)) as pool:
        results = pool.map(worker, [(settings, t, each) for t in tokens], chunksize=1)
    # From the moment every claimer was ready to the last claim's end.
    elapsed = max(end for *_, end in results) - min(start for *_, start, _ in results)
    latencies = sorted(x for result, *_ in results for x in result)
    assert len(latencies) == each * len(tokens)
    cpu = sum(spent for _, spent, *_ in results) / len(latencies) * 1000
    return len(latencies) / elapsed, latencies[int(len(latencies) * 0.95) - 1] * 1000, cpu


def _requeue(settings: Settings) -> None:
    """Bring forge-ci's queue bookkeeping up to date after raw claims (which only mark jobs
    running), before the next round's forge-ci claimers."""
    database = Database(settings)
    try:
        with database.session() as session:
            rebuild_queue(session.connection())
            session.commit()
    finally:
        database.dispose()


def run(
    kind: str, claimers: int, depth: int, claims_total: int, rounds: int
) -> tuple[float, float]:
    """One cell: ``rounds`` alternations of forge-ci's claimers and the raw ones on one
    database; prints the round with the median ratio (and every round's ratio) and returns its
    rates."""
    claims_total -= claims_total % claimers
    with bench_settings(kind) as settings:
        consumed = 2 * rounds * (claims_total + _WARM_UP * claimers)
        tokens = seed(settings, 5, depth + consumed + 20, claimers)
        results = []
        for round_ in range(rounds):
            if round_:
                _requeue(settings)
            meter = StealMeter()
            forge = _measure(_forge_claimer, settings, tokens, claims_total)
            raw = _measure(_raw_claimer, settings, tokens, claims_total)
            results.append((forge[0] / raw[0], forge, raw, meter.share()))
    results.sort(key=lambda result: result[0])
    ratio, (forge, forge_p95, forge_cpu), (raw, raw_p95, raw_cpu), steal = results[
        len(results) // 2
    ]
    verdict = "met" if ratio >= GOAL else "NOT met"
    spread = f" [rounds {', '.join(f'{r:.2f}' for r, *_ in results)}]" if rounds > 1 else ""
    print(
        f"{kind:<8} {claimers:>3} claimers  depth {depth:>6}  forge-ci {forge:7.1f}/s "
        f"(p95 {forge_p95:6.1f} ms, cpu {forge_cpu:5.2f} ms)  raw SQL {raw:7.1f}/s "
        f"(p95 {raw_p95:6.1f} ms, cpu {raw_cpu:5.2f} ms)  "
        f"ratio {ratio:5.2f}{spread} (goal >= {GOAL:.2f}: {verdict}; steal {steal:.0%})",
        flush=True,
    )
    return forge, raw


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--claimers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--depths", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--claims", type=int, default=256, help="claims measured per cell")
    parser.add_argument("--kinds", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="alternations of forge-ci and raw claimers per cell (the median ratio is shown)",
    )
    options = parser.parse_args()
    kinds = [k for k in options.kinds if k == "sqlite" or postgres_url()]
    for kind in kinds:
        for claimers in options.claimers:
            rates = [
                run(kind, claimers, depth, options.claims, options.rounds)[0]
                for depth in options.depths
            ]
            print(
                f"{kind:<8} {claimers:>3} claimers  deepest/shallowest queue: "
                f"{rates[-1] / rates[0]:4.2f} (goal: flat, about 1)",
                flush=True,
            )
    if "postgres" in options.kinds and "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
