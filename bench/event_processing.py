"""The worker side of a many-ref push: ``python bench/event_processing.py [--events 1000]
[--workflows] [--workers 2] [--database-url URL] [--checkout DIR]``.

A pool of ``forge-ci worker --processes N --scan-interval 1`` runs while the benchmark plays a
non-atomic push of N refs: it confirms the events 100 at a time (as the hooks do, one commit
each) and, once all are confirmed, enqueues them all, as the push does after its lock. So the
workers' scans and the push's enqueue offer the same events at once, as on the red team's
10,000-ref push (issue #14, finding 5). Without ``--workflows`` the repository's push
workflows are off (every event is decided "disabled": the cost of a delivery); with it, each
event creates one run of one workflow file.

Prints the wall time from the first confirmation until every event was received, the work
horses' job time (RQ's "completed ... in" lines, summed), how many jobs ran, and how many
events were delivered or planned more than once. ``--checkout DIR`` runs everything with the
``forge_ci`` of another source tree (``git archive <commit> | tar -x -C DIR``) for a before /
after comparison. Figures only: nothing asserts.

SQLite, or PostgreSQL with ``--database-url`` (a server where the user may create databases).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = "on: push\njobs:\n  a:\n    runs-on: self-hosted\n    steps:\n      - run: make\n"
BATCH = 100


def run(events: int, workflows: bool, workers: int, kind: str) -> None:
    # Imported here: with --checkout, from the other tree (PYTHONPATH, see main()).
    import pygit2
    from pygit2.enums import FileMode
    from sqlalchemy import func, select

    from forge_ci.accounts import create_user
    from forge_ci.authz import Actor
    from forge_ci.db import Database
    from forge_ci.gitstore import repository_path
    from forge_ci.models import PushEvent, utcnow
    from forge_ci.queueing import JobQueue
    from forge_ci.repos import create_repository, set_push_workflows
    from forge_ci_testing.redis import RedisServer
    from forge_ci_testing.seeding import bench_settings
    from hooks.install import install_hooks

    operator = Actor.operator()
    with bench_settings(kind) as settings, tempfile.TemporaryDirectory() as folder:
        install_hooks(settings)
        database = Database(settings)
        with database.session() as session:
            alice = create_user(session, operator, "alice", None)
            repository = create_repository(session, settings, operator, "alice/bench")
            session.commit()
            set_push_workflows(session, operator, "alice/bench", workflows)
            session.commit()
            repository_id, pusher_id = repository.id, alice.id
        git = pygit2.Repository(str(repository_path(settings.repositories_dir, "alice", "bench")))
        index = pygit2.Index()
        index.add(
            pygit2.IndexEntry(".github/workflows/ci.yml", git.create_blob(WORKFLOW), FileMode.BLOB)
        )
        signature = pygit2.Signature("A", "a@example.com", 1700000000, 0)
        sha = str(git.create_commit(None, signature, signature, "ci", index.write_tree(git), []))
        redis = RedisServer(Path(folder))
        redis.start()
        log = Path(folder) / "workers.log"
        env = {
            **os.environ,
            "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT),
            "FORGE_CI_DATA_DIR": str(settings.data_dir),
            "FORGE_CI_DATABASE_URL": settings.database_url,
            "FORGE_CI_REDIS_URL": redis.url,
        }
        env.pop("FORGE_CI_CONFIG", None)
        command = [sys.executable, "-m", "forge_ci", "worker", "--processes", str(workers)]
        with open(log, "wb") as output:
            pool = subprocess.Popen(  # not in this checkout: -m would import its forge_ci
                [*command, "--scan-interval", "1"],
                env=env,
                stdout=output,
                stderr=output,
                cwd=folder,
            )
        queue = JobQueue(dataclasses.replace(settings, redis_url=redis.url))
        try:
            while log.read_text().count("Listening on forge-ci-push-events") < workers:
                if pool.poll() is not None:
                    sys.exit(f"the workers exited: {log.read_text()[-2000:]}")
                time.sleep(0.2)  # every worker is up and scanning
            started = time.monotonic()
            ids: list[int] = []
            session_id = secrets.token_hex(8)
            for first in range(0, events, BATCH):
                with database.session() as session:
                    batch = [
                        PushEvent(
                            repository_id=repository_id,
                            pusher_id=pusher_id,
                            push_session=session_id,
                            ref=f"refs/heads/b{i}",
                            old_sha="0" * 40,
                            new_sha=sha,
                            state="confirmed",
                            created_at=utcnow() + timedelta(seconds=1),
                            settled_at=utcnow(),
                        )
                        for i in range(first, min(first + BATCH, events))
                    ]
                    session.add_all(batch)
                    session.commit()
                    ids += [event.id for event in batch]
                time.sleep(0.5)  # the hooks take about that long for 100 refs
            if "fresh" in inspect.signature(queue.enqueue_push_events).parameters:
                queue.enqueue_push_events(ids, fresh=True)  # type: ignore[call-arg]
            else:
                from forge_ci.pushes.events import still_offered  # type: ignore[attr-defined]

                queue.enqueue_push_events(ids, still_offered(database))
            while True:
                with database.session(read_only=True) as session:
                    left = session.scalar(
                        select(func.count())
                        .select_from(PushEvent)
                        .where(PushEvent.state != "received")
                    )
                if not left:
                    break
                time.sleep(0.2)
            wall = time.monotonic() - started
        finally:
            queue.close()
            pool.send_signal(signal.SIGTERM)
            pool.wait(120)
            redis.stop()
            database.dispose()
        report(log.read_text(), events, wall, kind, workflows, workers)


def report(text: str, events: int, wall: float, kind: str, workflows: bool, workers: int) -> None:
    deliveries = Counter(int(n) for n in re.findall(r": push event (\d+) \(push-event-", text))
    planned = Counter(
        int(n) for n in re.findall(r"push event (\d+): (?!already processed)\w+ \(", text)
    )
    seconds = [
        float(h) * 3600 + float(m) * 60 + float(s)
        for h, m, s in re.findall(r"job in (\d+):(\d+):([\d.]+)s", text)
    ]
    twice = sum(1 for n in deliveries.values() if n > 1)
    print(
        f"{kind}, {events} events, workflows {'on' if workflows else 'off'}, {workers} workers: "
        f"wall {wall:.1f} s ({1000 * wall / events:.1f} ms/event); "
        f"job time {sum(seconds):.1f} s in {len(seconds)} jobs "
        f"({1000 * sum(seconds) / max(len(seconds), 1):.1f} ms/job); "
        f"delivered more than once: {twice} events ({sum(deliveries.values()) - events} extra "
        f"jobs); planned more than once: {sum(1 for n in planned.values() if n > 1)}"
    )
    failures = text.count("exception raised while executing")
    if failures:
        print(f"jobs that raised (timeouts among them): {failures}")
    again = sorted(n for n, count in deliveries.items() if count > 1)
    if again and os.environ.get("BENCH_SHOW_REPEATS"):
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if "exception raised while executing" in line:
                print("\n".join(lines[number : number + 40]))
                break
        pattern = re.compile(rf"(push event {again[0]}\b|push-event-{again[0]}\b)")
        print("\n".join(line for line in text.splitlines() if pattern.search(line)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--workflows", action="store_true", help="one run per event")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database-url", help="PostgreSQL server (a database is made)")
    parser.add_argument("--checkout", type=Path, help="run the forge_ci of this source tree")
    args = parser.parse_args()
    tree = str(args.checkout.resolve()) if args.checkout is not None else None
    if tree is not None and os.environ.get("PYTHONPATH") != tree:
        env = {**os.environ, "PYTHONPATH": tree}
        argv = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]]
        sys.exit(subprocess.call(argv, env=env))
    kind = "sqlite"
    if args.database_url:
        os.environ["FORGE_CI_BENCH_POSTGRES_URL"] = args.database_url
        kind = "postgres"
    run(args.events, args.workflows, args.workers, kind)


if __name__ == "__main__":
    main()
