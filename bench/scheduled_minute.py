"""What one scheduled minute costs the worker: repositories x workflow files, both databases.

    python bench/scheduled_minute.py [--repositories 50] [--files 8] [--minutes 20]

Every repository has scheduled workflows on and ``--files`` workflow files on its default branch,
one of which runs every 5 minutes (``*/5``); the others run at 03:00 on Mondays. The scheduler
takes ``--minutes`` consecutive minutes; minutes where nothing fires measure the reading cost
(git, the blob-keyed parse cache), minutes where every repository fires measure run creation.
The baseline is the first, cold minute (every file parsed); a warm quiet minute should cost a
small fraction of it. PostgreSQL runs when FORGE_CI_BENCH_POSTGRES_URL (or ..._TEST_...) is set.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

import pygit2
from pygit2.enums import FileMode

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.repos import create_repository, set_scheduled_workflows
from forge_ci.runs import scheduled
from forge_ci.runs.scheduled import fire_minute
from forge_ci.settings import Settings
from forge_ci_testing.seeding import bench_settings, postgres_url

WORKFLOW = """\
name: Job {n}
on:
  schedule:
    - cron: '{cron}'
  push:
    branches: [main]
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: make check-{n}
      - run: make lint-{n}
"""


def seed(settings: Settings, database: Database, repositories: int, files: int) -> None:
    operator = Actor.operator()
    with database.session() as session:
        create_user(session, operator, "bench", None)
        for index in range(repositories):
            create_repository(session, settings, operator, f"bench/r{index}")
        session.commit()
        for index in range(repositories):
            path = repository_path(settings.repositories_dir, "bench", f"r{index}")
            git = pygit2.Repository(str(path))
            tree = pygit2.Index()
            for n in range(files):
                cron = "*/5 * * * *" if n == 0 else "0 3 * * MON"
                text = WORKFLOW.format(n=f"{index}-{n}", cron=cron).encode()
                blob = git.create_blob(text)
                tree.add(pygit2.IndexEntry(f".github/workflows/w{n}.yml", blob, FileMode.BLOB))
            signature = pygit2.Signature("B", "b@example.com")
            git.create_commit(
                "refs/heads/main", signature, signature, "seed", tree.write_tree(git), []
            )
            set_scheduled_workflows(session, operator, f"bench/r{index}", True)
        session.commit()


def run(kind: str, repositories: int, files: int, minutes: int) -> None:
    with bench_settings(kind) as settings:
        database = Database(settings)
        try:
            seed(settings, database, repositories, files)
            scheduled._SCHEDULED = scheduled.BlobAnswers(scheduled._scheduled_workflow)  # cold
            start = datetime(2026, 12, 1, 12, 1, tzinfo=UTC)
            quiet: list[float] = []
            firing: list[float] = []
            cold = 0.0
            created = 0
            for offset in range(minutes):
                minute = start + timedelta(minutes=offset)
                began = time.perf_counter()
                with database.session(read_only=True) as session:
                    decided = fire_minute(session, settings, minute)
                elapsed = time.perf_counter() - began
                created += sum(1 for d in decided if d.outcome == "run_created")
                if offset == 0:
                    cold = elapsed
                elif decided:
                    firing.append(elapsed)
                else:
                    quiet.append(elapsed)
        finally:
            database.dispose()
    warm = statistics.median(quiet)
    print(
        f"{kind:<8} {repositories} repositories x {files} files: cold minute "
        f"{cold * 1000:7.1f} ms; warm quiet minute median {warm * 1000:7.1f} ms "
        f"({warm / cold:.2f} of cold); firing minute median "
        f"{statistics.median(firing) * 1000:7.1f} ms for {repositories} runs "
        f"({statistics.median(firing) / repositories * 1000:.1f} ms a run); {created} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repositories", type=int, default=50)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--minutes", type=int, default=20)
    options = parser.parse_args()
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        run(kind, options.repositories, options.files, options.minutes)
    if "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
