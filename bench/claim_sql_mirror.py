"""forge-ci's SQLite claim statements made by N claimers with almost no Python: a ceiling.

    python bench/claim_sql_mirror.py [--claimers 1 8] [--depth 1000] [--claims 4096] [--rounds 3]
        [--leave-out served steps]

bench/claim_sql_ceiling.py replays one claimer's recorded statements, which bounds one claimer
only: a replay cannot run concurrently (each recorded claim names the rows it took). This bench
makes claims concurrently with forge-ci's own statements (the same compiled SQL, from
``coordinator.direct_claim_sql``), in the same order and under the same claims' file lock, with
the same early look outside the write lock and the same ``PRAGMA data_version`` test for
whether it is still true, but with only the Python that feeds them: the first candidate by
fairness, its head taken, the job moved, its queue entry and count, the served stamp, the
attempt, the variables read, one step row per plan step, the commit. No authentication beyond
the look's own, no authorization or secret recheck, no state table, no assignment, no ORM or
pool. Its rate bounds what forge-ci could reach with these statements with any amount of
Python removed: with 8 claimers on SQLite the bound includes what the statements cost each
other (every connection reads again the pages another one committed since its last read).

Each round runs forge-ci's claimers, these, and bench/claims.py's raw-SQL floor, one after
the other on one database, with the same number of claimers, and prints their rates and the
ratios to the floor against issue #21's goal (1/3). ``--leave-out`` skips the served stamp
or the pending step rows: what writing less would gain.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import claims as claims_bench  # bench/claims.py: bench/ is on sys.path when run as a script
from sqlalchemy.engine import make_url

from forge_ci.coordinator import direct_claim_sql as sql
from forge_ci.coordinator.claim_lock import sqlite_claim_lock
from forge_ci.coordinator.credentials import new_token, token_hash
from forge_ci.coordinator.driver_sql import Prepared
from forge_ci.db import SQLITE_BUSY_TIMEOUT_MS, create_db_engine
from forge_ci.secrets.policy import variables_statement
from forge_ci.settings import Settings
from forge_ci_testing.seeding import bench_settings, seed

#: What the mirror leaves out (``--leave-out``), set before its claimers are forked: what writing
#: less would gain, for a guarantee the product would give up with it.
_LEAVE_OUT: frozenset[str] = frozenset()


def _statements(url: str) -> dict[str, Prepared]:
    engine = create_db_engine(url)
    try:
        dialect = engine.dialect
        return {
            "look": Prepared(sql.look_statement(True), dialect),
            "take": Prepared(sql.take_statement("sqlite", 1), dialect),
            "move_job": Prepared(sql.move_job(), dialect),
            "move_run": Prepared(sql.move_run(), dialect),
            "leave": Prepared(sql.leave_statement(0), dialect),
            "count": Prepared(sql.leave_statement(1), dialect),
            "served": Prepared(sql.mark_served(), dialect),
            "attempt": Prepared(sql.insert_attempt(), dialect),
            "variables": Prepared(variables_statement(True), dialect),
            "step": Prepared(sql.insert_step(), dialect, many=True),
        }
    finally:
        engine.dispose()


def _mirror_claimer(args: tuple[Settings, str, int]) -> claims_bench.Measured:
    """One process of claims made with forge-ci's statements and only the Python they need."""
    settings, token, count = args
    url = settings.database_url
    connection = sqlite3.connect(
        str(make_url(url).database), timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None
    )
    for pragma in ("journal_mode=WAL", "foreign_keys=ON", "synchronous=NORMAL"):
        connection.execute(f"PRAGMA {pragma}")
    cursor = connection.cursor()
    s = _statements(url)
    look, take = s["look"], s["take"]
    looked = look.row._fields
    at = {name: looked.index(name) for name in ("repository_id", "labels", "served", "head_at")}
    version_at = looked.index("data_version")
    provider_at = looked.index("id")
    taken = {name: i for i, name in enumerate(take.row._fields)}
    provider_hash = token_hash(token)
    lease = timedelta(minutes=5)

    def look_now(request_id: str, digest: str) -> list[Any]:
        values = {"provider_hash": provider_hash, "request_id": request_id, "digest": digest}
        return cursor.execute(look.sql, look.parameters(values)).fetchall()

    def claim_one() -> None:
        request_id, attempt_token = uuid.uuid4().hex, new_token()
        digest = hashlib.sha256(attempt_token.encode()).hexdigest()
        rows = look_now(request_id, digest)
        with sqlite_claim_lock(settings.locks_dir):
            cursor.execute("BEGIN IMMEDIATE")
            (version,) = cursor.execute("PRAGMA data_version").fetchone()
            if version != rows[0][version_at]:
                rows = look_now(request_id, digest)
            heads = [row for row in rows if row[at["head_at"]] is not None]
            # Fairness as forge-ci orders it (served, oldest head, repository); the stored texts
            # sort as the times they hold.
            first = min(
                heads,
                key=lambda r: (r[at["served"]] or "", r[at["head_at"]], r[at["repository_id"]]),
            )
            row = cursor.execute(
                take.sql,
                take.parameters(
                    {"repository_id": first[at["repository_id"]], "labels_0": first[at["labels"]]}
                ),
            ).fetchone()
            now = datetime.now(UTC)
            job_id, run_id = row[taken["job_id"]], row[taken["run_id"]]
            repository_id = row[taken["run_repository_id"]]
            moves = {
                "job_pk": job_id,
                "run_pk": run_id,
                "repository_pk": repository_id,
                "moved_at": now,
            }
            cursor.execute(s["move_job"].sql, s["move_job"].parameters(moves))
            if row[taken["run_state"]] == "queued":
                cursor.execute(s["move_run"].sql, s["move_run"].parameters(moves))
            cursor.execute(s["leave"].sql, s["leave"].parameters({"job_id": job_id}))
            entry = {"entry_repository": repository_id, "entry_labels": row[taken["queue_labels"]]}
            cursor.execute(s["count"].sql, s["count"].parameters(entry))
            if "served" not in _LEAVE_OUT:
                cursor.execute(s["served"].sql, s["served"].parameters(moves))
            attempt = {
                "job_id": job_id,
                "number": (row[taken["last_number"]] or 0) + 1,
                "provider_id": rows[0][provider_at],
                "repository_id": repository_id,
                "request_id": request_id,
                "token_hash": digest,
                "state": "leased",
                "timeout_minutes": 360,
                "claimed_at": now,
                "lease_expires_at": now + lease,
                "next_check_at": now + lease,
                "log_mask": "***",
                "job_token_hash": digest[::-1],
            }
            (attempt_id,) = cursor.execute(
                s["attempt"].sql, s["attempt"].parameters(attempt)
            ).fetchone()
            ref = row[taken["run_ref"]]
            variables = {
                "repository_id": repository_id,
                "branch": ref.removeprefix("refs/heads/"),
                "workflow_path": row[taken["run_workflow_path"]],
            }
            cursor.execute(s["variables"].sql, s["variables"].parameters(variables)).fetchall()
            plan = json.loads(row[taken["plan_job"]])
            steps = [
                s["step"].parameters(
                    {
                        "attempt_id": attempt_id,
                        "position": position,
                        "step_id": str(step["id"]),
                        "name": step.get("name") or str(step["id"]),
                        "state": "pending",
                    }
                )
                for position, step in enumerate(plan.get("steps", []))
            ]
            if "steps" not in _LEAVE_OUT:
                cursor.executemany(s["step"].sql, steps)
            cursor.execute("COMMIT")

    latencies: list[float] = []
    try:
        for _ in range(claims_bench._WARM_UP):
            claim_one()
        return claims_bench._timed(claim_one, count, latencies)
    finally:
        connection.close()


def _check(settings: Settings) -> None:
    """The mirror kept what forge-ci keeps: the queue in step with the jobs, and every job
    that left it with an attempt."""
    connection = sqlite3.connect(str(make_url(settings.database_url).database))
    try:
        queued = connection.execute("SELECT count(*) FROM jobs WHERE state = 'queued'").fetchone()
        entries = connection.execute("SELECT count(*) FROM job_queue").fetchone()
        (counted,) = connection.execute("SELECT sum(queued) FROM job_queue_counts").fetchone()
        assert queued == entries == (counted,), (queued, entries, counted)
        (orphans,) = connection.execute(
            "SELECT count(*) FROM jobs WHERE state = 'running'"
            " AND NOT EXISTS (SELECT 1 FROM attempts WHERE attempts.job_id = jobs.id)"
        ).fetchone()
        assert orphans == 0, f"{orphans} running jobs without an attempt"
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--claimers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=4096, help="claims measured per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--leave-out",
        nargs="*",
        default=[],
        choices=["served", "steps"],
        help="statements the mirror skips: the served stamp (fairness), the pending step rows",
    )
    options = parser.parse_args()
    goal = claims_bench.GOAL
    global _LEAVE_OUT
    _LEAVE_OUT = frozenset(options.leave_out)
    if _LEAVE_OUT:
        print(f"the statements alone leave out: {', '.join(sorted(_LEAVE_OUT))}")
    for claimers in options.claimers:
        total = options.claims - options.claims % claimers
        with bench_settings("sqlite") as settings:
            consumed = 3 * options.rounds * (total + claims_bench._WARM_UP * claimers)
            tokens = seed(settings, 5, options.depth + consumed + 20, claimers)
            rounds = []
            for round_ in range(options.rounds):
                forge = claims_bench._measure(claims_bench._forge_claimer, settings, tokens, total)
                mirror = claims_bench._measure(_mirror_claimer, settings, tokens, total)
                _check(settings)
                raw = claims_bench._measure(claims_bench._raw_claimer, settings, tokens, total)
                claims_bench._requeue(settings)  # the raw claims keep no queue bookkeeping
                rounds.append((forge, mirror, raw))
                print(
                    f"sqlite {claimers:>2} claimers, round {round_ + 1}: forge-ci "
                    f"{forge[0]:7.1f}/s (cpu {forge[2]:4.2f} ms), its statements alone "
                    f"{mirror[0]:7.1f}/s (cpu {mirror[2]:4.2f} ms), raw floor {raw[0]:7.1f}/s "
                    f"(cpu {raw[2]:4.2f} ms): ratios {forge[0] / raw[0]:4.2f} and "
                    f"{mirror[0] / raw[0]:4.2f} (goal >= {goal:.2f})",
                    flush=True,
                )
        forge, mirror, raw = sorted(rounds, key=lambda r: r[1][0] / r[2][0])[len(rounds) // 2]
        # Wall time a claim (the claimers' rate): at the goal, with the statements alone, and
        # what forge-ci spends beyond its statements.
        at_goal, alone, spent = (1e6 / (goal * raw[0]), 1e6 / mirror[0], 1e6 / forge[0])
        print(
            f"sqlite {claimers:>2} claimers (the median round): the statements alone reach "
            f"{mirror[0] / raw[0]:.2f} of the floor; at the goal a claim may take "
            f"{at_goal:.0f} us, which leaves {at_goal - alone:.0f} us for everything but the "
            f"statements (forge-ci spends {spent - alone:.0f} us)",
            flush=True,
        )


if __name__ == "__main__":
    main()
