"""What resolving ``uses:`` actions adds to creating a run (issue #15), and what an action
archive costs.

A throwaway forge (SQLite, or PostgreSQL with FORGE_CI_BENCH_POSTGRES_URL) with the real
setup-python and github-script mirrored from the shared bundles. Timed, each as the median of
``--rounds`` runs:

- dispatching a run of a workflow with only run steps (the baseline);
- the same workflow using actions/setup-python@v5 and actions/github-script@v7 from the forge;
- the same two fetched from an upstream source (a ``file://`` clone): the first, cold fetch
  into the action cache, and warm ones;
- building the tar of setup-python's tree (the action archive a job downloads).

Prints the figures and the ratio of each run creation to the baseline.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.coordinator.action_sources import ActionTarget, build_action_archive
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.repos import create_repository
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.mirrors import mirror_repository
from forge_ci_testing.seeding import bench_settings, postgres_url

SHARED = Path(__file__).resolve().parent.parent / ".." / "shared" / "actions"
OPERATOR = Actor.operator()
CI = ".github/workflows/ci.yml"
PLAIN = "on: workflow_dispatch\njobs:\n  a:\n    runs-on: self-hosted\n    steps:\n{steps}"
RUN = "      - run: echo hi\n"
USES = (
    "      - uses: actions/setup-python@v5\n        with:\n          python-version: '3.11'\n"
    "      - uses: actions/github-script@v7\n        with:\n          script: return 1\n"
)


def _commit(path: Path, text: str) -> None:
    git = pygit2.Repository(str(path))
    index = pygit2.Index()
    index.add(pygit2.IndexEntry(CI, git.create_blob(text.encode()), pygit2.enums.FileMode.BLOB))
    signature = pygit2.Signature("B", "b@example.com")
    parents = (
        [git.references["refs/heads/main"].target] if "refs/heads/main" in git.references else []
    )
    oid = git.create_commit(None, signature, signature, "b", index.write_tree(git), parents)
    git.references.create("refs/heads/main", oid, force=True)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    kinds = ["sqlite"] + (["postgresql"] if postgres_url() else [])
    upstreams = Path(tempfile.mkdtemp(prefix="bench-actions-"))
    for name in ("setup-python", "github-script"):
        subprocess.run(
            [
                "git",
                "clone",
                "-q",
                "--bare",
                str(SHARED / f"{name}.bundle"),
                str(upstreams / "actions" / name),
            ],
            check=True,
        )
    for kind in kinds:
        with bench_settings(kind) as settings:
            database = Database(settings)
            with database.session() as session:
                alice = Actor.for_user(create_user(session, OPERATOR, "alice", None))
                create_repository(session, settings, OPERATOR, "alice/app")
                for name in ("setup-python", "github-script"):
                    url = f"file://{upstreams / 'actions' / name}"
                    mirror_repository(session, settings, OPERATOR, f"actions/{name}", url)
                session.commit()
            app = repository_path(settings.repositories_dir, "alice", "app")

            def dispatch(
                text: str,
                use: object = settings,
                app: Path = app,
                database: Database = database,
                alice: Actor = alice,
            ) -> float:
                _commit(app, text)
                with database.session() as session:
                    started = time.perf_counter()
                    run = dispatch_run(session, use, alice, "alice/app", "main", CI)  # type: ignore[arg-type]
                    session.commit()
                    elapsed = time.perf_counter() - started
                    assert run.id
                return elapsed

            plain = [dispatch(PLAIN.format(steps=RUN)) for _ in range(args.rounds)]
            forge = [dispatch(PLAIN.format(steps=RUN + USES)) for _ in range(args.rounds)]
            # Upstream: the same actions under other names, so the forge does not have them.
            upstream_uses = USES.replace("actions/", "upstream/")
            (upstreams / "upstream").symlink_to(upstreams / "actions")
            remote = dataclasses.replace(settings, action_sources=(f"file://{upstreams}",))
            cold = dispatch(PLAIN.format(steps=RUN + upstream_uses), remote)
            warm = [
                dispatch(PLAIN.format(steps=RUN + upstream_uses), remote)
                for _ in range(args.rounds)
            ]
            (upstreams / "upstream").unlink()
            with database.session() as session:
                from sqlalchemy import select

                from forge_ci.models import Run

                run = session.scalars(select(Run).order_by(Run.id.desc())).first()
                assert run is not None and run.actions
                key = run.actions["references"]["upstream/setup-python@v5"]
                entry = run.actions["actions"][key]
            cache = settings.action_cache_dir / entry["source"]["cache"]
            target = ActionTarget(cache, entry["commit"], "", entry["pin_ref"], entry["reference"])
            archives = []
            size = 0
            for _ in range(args.rounds):
                started = time.perf_counter()
                archive = build_action_archive(target)
                archives.append(time.perf_counter() - started)
                size = archive.size
                archive.file.close()
            base = _median_ms(plain)
            print(f"[{kind}] run creation, median of {args.rounds}:")
            print(f"  run steps only                      {base:8.1f} ms  (baseline)")
            print(
                f"  + setup-python, github-script forge {_median_ms(forge):8.1f} ms  "
                f"x{_median_ms(forge) / base:.2f}"
            )
            print(
                f"  + the two from upstream, cold       {cold * 1000:8.1f} ms  "
                f"x{cold * 1000 / base:.2f}"
            )
            print(
                f"  + the two from upstream, warm       {_median_ms(warm):8.1f} ms  "
                f"x{_median_ms(warm) / base:.2f}"
            )
            print(
                f"  setup-python archive ({size / 1024 / 1024:.1f} MiB)      "
                f"{_median_ms(archives):8.1f} ms"
            )
            database.dispose()


if __name__ == "__main__":
    main()
