"""How fast forge-ci's own claim statements are on SQLite, without forge-ci's Python: a ceiling.

    python bench/claim_sql_ceiling.py [--claims 2000] [--depth 1000]

bench/claims.py sets forge-ci's claims against the raw-SQL floor (the minimal claim: five
statements). This bench asks how much of the gap is the statements themselves: it records every
statement, parameter set, commit and rollback forge-ci sends to SQLite while making ``claims``
claims (one claimer, a recording ``sqlite3.Connection`` under SQLAlchemy), then replays exactly
that log through the bare driver on a copy of the database as it was before the claims, and
times the replay. The replay does the same work in SQLite (the same rows, indexes, pages and
commits) with no Python but a loop, so its rate is the most any Python-side change could give
these statements; the ratio of the replay to the floor bounds what forge-ci can reach without
writing less. It prints forge-ci, the replay and the raw floor (bench/claims.py's), each
measured in this process after a warm-up, and the ratios to the floor against issue #21's goal
(1/3).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import claims as claims_bench  # bench/claims.py: bench/ is on sys.path when run as a script
from sqlalchemy.engine import make_url

from forge_ci.coordinator import claims
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import SQLITE_BUSY_TIMEOUT_MS, Database
from forge_ci.protocol import ClaimRequest
from forge_ci_testing.seeding import bench_settings, seed

#: The recorded log: (connection number, operation, SQL, parameters). Operations: "execute",
#: "executemany", "commit", "rollback", and "mark" (the measured claims start after it).
Log = list[tuple[int, str, str, Any]]
_WARM_UP = 20


def _recording_factory(log: Log) -> type[sqlite3.Connection]:
    class RecordingCursor(sqlite3.Cursor):
        def execute(self, sql: str, parameters: Any = (), /) -> RecordingCursor:
            log.append((id(self.connection), "execute", sql, parameters))
            return super().execute(sql, parameters)  # type: ignore[return-value]

        def executemany(self, sql: str, parameters: Any, /) -> RecordingCursor:
            rows = list(parameters)
            log.append((id(self.connection), "executemany", sql, rows))
            return super().executemany(sql, rows)  # type: ignore[return-value]

    class RecordingConnection(sqlite3.Connection):
        def cursor(self, factory: Any = RecordingCursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, parameters: Any = (), /) -> Any:
            return self.cursor().execute(sql, parameters)

        def commit(self) -> None:
            log.append((id(self), "commit", "", None))
            super().commit()

        def rollback(self) -> None:
            log.append((id(self), "rollback", "", None))
            super().rollback()

    return RecordingConnection


def _record(settings: Any, token: str, count: int) -> tuple[Log, float]:
    """forge-ci's ``count`` claims (after a warm-up) with every SQLite call logged: the log and
    the claims' rate."""
    log: Log = []
    path = str(make_url(settings.database_url).database)
    factory = _recording_factory(log)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(
            path,
            timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
            factory=factory,
            check_same_thread=False,
        )

    database = Database(settings, creator=connect)

    def claim_one() -> None:
        request = ClaimRequest(new_request_id(), new_token(), 0)
        taken = claims.claim(database.session, token, request, lock_dir=settings.locks_dir)
        assert taken is not None, "the queue ran dry"

    try:
        for _ in range(_WARM_UP):
            claim_one()
        log.append((0, "mark", "", None))
        began = time.perf_counter()
        for _ in range(count):
            claim_one()
        return log, count / (time.perf_counter() - began)
    finally:
        database.dispose()


def _replay(path: str, log: Log, count: int) -> float:
    """The log replayed through the bare driver on ``path``: the measured part's claims/s."""
    connections: dict[int, sqlite3.Connection] = {}
    cursors: dict[int, sqlite3.Cursor] = {}

    def open_for(key: int) -> sqlite3.Cursor:
        connection = sqlite3.connect(
            path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None
        )
        connections[key] = connection
        cursors[key] = connection.cursor()
        return cursors[key]

    mark = next(i for i, entry in enumerate(log) if entry[1] == "mark")
    steps: list[Callable[[], Any]] = []
    for key, operation, sql, parameters in log:
        if operation == "mark":
            continue
        cursor = cursors.get(key) or open_for(key)
        connection = connections[key]
        if operation == "execute":
            steps.append(lambda c=cursor, s=sql, p=parameters: c.execute(s, p).fetchall())
        elif operation == "executemany":
            steps.append(lambda c=cursor, s=sql, p=parameters: c.executemany(s, p))
        elif operation == "commit":
            steps.append(connection.commit)
        else:
            steps.append(connection.rollback)
    try:
        for step in steps[:mark]:
            step()
        measured = steps[mark:]
        began = time.perf_counter()
        for step in measured:
            step()
        return count / (time.perf_counter() - began)
    finally:
        for connection in connections.values():
            connection.close()


def _same_outcome(original: Path, replayed: Path) -> None:
    """The replay did what forge-ci did: the same attempts, steps and queue, row for row."""
    queries = (
        "SELECT id, job_id, number, request_id, token_hash, state FROM attempts ORDER BY id",
        "SELECT attempt_id, position, step_id, state FROM attempt_steps ORDER BY 1, 2",
        "SELECT id, state, revision FROM jobs ORDER BY id",
        "SELECT repository_id, labels, queued FROM job_queue_counts ORDER BY 1, 2",
    )
    with sqlite3.connect(original) as a, sqlite3.connect(replayed) as b:
        for query in queries:
            assert a.execute(query).fetchall() == b.execute(query).fetchall(), query
    a.close()
    b.close()


def _floor(settings: Any, token: str, count: int) -> float:
    connection, claim_one = claims_bench._raw_sqlite(settings.database_url)
    try:
        for _ in range(_WARM_UP):
            claim_one(connection, token)
        began = time.perf_counter()
        for _ in range(count):
            claim_one(connection, token)
        return count / (time.perf_counter() - began)
    finally:
        connection.close()


def _snapshot(path: Path) -> Path:
    """A copy of the database as it is now (its WAL checkpointed into the file first)."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    copy = path.with_name("before-claims.db")
    shutil.copyfile(path, copy)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=1000)
    options = parser.parse_args()
    count = options.claims
    with bench_settings("sqlite") as settings:
        (token,) = seed(settings, 5, options.depth + 2 * (count + 2 * _WARM_UP) + 20, 1)
        before = _snapshot(Path(str(make_url(settings.database_url).database)))
        log, forge = _record(settings, token, count)
        replay = _replay(str(before), log, count)
        _same_outcome(Path(str(make_url(settings.database_url).database)), before)
        floor = _floor(settings, token, count)
    mark = next(i for i, entry in enumerate(log) if entry[1] == "mark")
    per_claim = sum(1 for entry in log[mark:] if entry[1].startswith("execute")) / count
    print(f"sqlite, 1 claimer, queue depth {options.depth}, {count} claims")
    print(f"  forge-ci                         {forge:8.1f}/s   ratio {forge / floor:5.2f}")
    print(
        f"  forge-ci's statements, replayed  {replay:8.1f}/s   ratio {replay / floor:5.2f}"
        f"   (about {per_claim:.0f} statements a claim, no Python but a loop)"
    )
    print(f"  raw-SQL floor (bench/claims.py)  {floor:8.1f}/s")
    goal = claims_bench.GOAL
    verdict = "can" if replay / floor >= goal else "cannot"
    print(
        f"  goal >= {goal:.2f} of the floor: the statements alone {verdict} reach it; forge-ci "
        f"is at {forge / replay:.2f} of its own statements' speed"
    )


if __name__ == "__main__":
    main()
