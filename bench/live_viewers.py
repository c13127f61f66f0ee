"""Server CPU of people watching a running run: N viewers polling ``/updates`` every 2 s.

    python bench/live_viewers.py [--viewers 50] [--seconds 20] [--jobs 16,64,256]

The goal (issue #21): a poll that finds nothing changed costs about what a trivial view does,
and 50 viewers of a running 256-job run cost under 0.1 CPU-s per second of the server.

For each job count a run of that many jobs (a matrix, 4 steps each) is dispatched and driven
through the coordinator as a runner would: a quarter completed, a few running, the rest queued
(some for a label no provider has, so queue blockers are computed on every poll). Then
``forge-ci web`` (gunicorn, as in production) serves it and ``--viewers`` signed-in clients,
each on its own keep-alive connection, poll like ``web/static/pipelines.js`` for
``--seconds``:

- ``etag``: the page's way: the last ETag in ``If-None-Match`` (nothing changes: 304s);
- ``full``: without it, every poll a whole answer (what the page did before);
- ``floor``: ``/-/health``, a trivial JSON view, polled the same way.

Then the size of a changed poll's answer (one step of one job ended since the last answer)
against the whole run's. Prints the server's CPU seconds per second (its processes' user +
system time from /proc, so Linux only), the requests answered and the ratio to the floor.
SQLite always; PostgreSQL when FORGE_CI_BENCH_POSTGRES_URL (or FORGE_CI_TEST_POSTGRES_URL) is
set. Figures only.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass

from web_pages import (
    PASSWORD,
    READER,
    REPO,
    Client,
    Runner,
    free_port,
    server_cpu_seconds,
    start_server,
    stop_server,
)

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.protocol import ClaimRequest, HeartbeatRequest, StartRequest
from forge_ci.repos import create_repository, grant
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.settings import Settings
from forge_ci_testing.seeding import OPERATOR, bench_settings, postgres_url

POLL_SECONDS = 2.0
GOAL_CPU = 0.1
PATH = ".github/workflows/matrix.yml"


ARCHES = ["amd64", "arm64", "ppc64el", "riscv64"]
#: The provider serves every architecture but riscv64: a quarter of the jobs wait for a label.
LABELS = ",".join(["self-hosted", "linux", *ARCHES[:-1]])


def workflow(jobs: int) -> str:
    """One matrix job of ``jobs`` legs (a multiple of 4): shards x the four architectures."""
    shards = ", ".join(str(n) for n in range(1, jobs // len(ARCHES) + 1))
    return f"""\
name: Matrix
on: [workflow_dispatch]
jobs:
  test:
    name: test ${{{{ matrix.arch }}}} ${{{{ matrix.shard }}}}
    strategy:
      fail-fast: false
      matrix:
        arch: [{", ".join(ARCHES)}]
        shard: [{shards}]
    runs-on: [self-hosted, "${{{{ matrix.arch }}}}"]
    steps:
      - {{id: checkout, run: git checkout}}
      - {{id: setup, run: ./setup.sh}}
      - {{id: main, run: make test}}
      - {{id: upload, run: ./upload.sh}}
"""


def commit(settings: Settings, text: str) -> None:
    import pygit2
    from pygit2.enums import FileMode

    git = pygit2.Repository(str(repository_path(settings.repositories_dir, "bench", "app")))
    index = pygit2.Index()
    index.add(pygit2.IndexEntry(PATH, git.create_blob(text.encode()), FileMode.BLOB))
    signature = pygit2.Signature("Bench", "bench@example.com")
    oid = git.create_commit(None, signature, signature, "matrix", index.write_tree(git), [])
    git.references.create("refs/heads/main", oid, force=True)


def build(settings: Settings, jobs: int) -> tuple[int, list[Runner]]:
    database = Database(settings)
    try:
        with database.session() as session:
            owner = create_user(session, OPERATOR, "bench", None)
            create_user(session, OPERATOR, READER, PASSWORD)
            create_repository(session, settings, OPERATOR, REPO)
            grant(session, OPERATOR, REPO, READER, Role.READ)
            session.commit()
            actor = Actor.for_user(owner)
        commit(settings, workflow(jobs))
        with database.session() as session:
            number = dispatch_run(session, settings, actor, REPO, "main", PATH).number
        provider = new_token()
        with database.session() as session:
            create_provider(session, OPERATOR, "p", provider, LABELS, "all")
            session.commit()
        coordinator = Coordinator(database.session, settings)
        partly = []
        for index in range(jobs // 4 + 4):
            token = new_token()
            result = coordinator.claim(provider, ClaimRequest(new_request_id(), token, 0))
            if result.assignment is None:
                break
            runner = Runner(coordinator, result.assignment, token, uuid.uuid4().hex)
            start = StartRequest(runner.execution_id)
            coordinator.start(token, result.assignment.attempt_id, start)
            if index < jobs // 4:
                runner.run("success")
            else:
                runner.run_partly()
                partly.append(runner)
        return number, partly
    finally:
        database.dispose()


def changed_poll_bytes(port: int, path: str, runner: Runner) -> tuple[int, int]:
    """The bytes of a whole answer, and of the next poll's after one step of one job ended
    (sent like the page: the ETag in If-None-Match and the answer's base as ``since``)."""
    runner.coordinator.heartbeat(
        runner.token, runner.assignment.attempt_id, HeartbeatRequest(runner.execution_id)
    )
    client = Client(port)
    client.sign_in(READER, PASSWORD)
    status, whole, _, response = client.request("GET", path)
    assert status == 200, f"GET {path}: {status}"
    tag = response.headers.get("ETag", "")
    base = json.loads(whole).get("base", "")
    runner.step(runner.assignment.steps[2].id, "completed", "success", 0)
    status, changed, _, _ = client.request(
        "GET", f"{path}?since={base}" if base else path, headers={"If-None-Match": tag}
    )
    assert status == 200, f"GET {path} after a change: {status}"
    client.close()
    return len(whole), len(changed)


@dataclass
class Result:
    cpu_per_second: float
    answered: int
    not_modified: int


def watch(port: int, server: int, path: str, viewers: int, seconds: float, etag: bool) -> Result:
    clients = []
    tags = []
    for _ in range(viewers):
        client = Client(port)
        client.sign_in(READER, PASSWORD)
        # Each viewer has loaded the page and polled once before the measurement begins.
        _, _, _, response = client.request("GET", path)
        tags.append(response.headers.get("ETag", "") if etag else "")
        clients.append(client)
    counts = {"answered": 0, "not_modified": 0}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def viewer(client: Client, tag: str, offset: float) -> None:
        time.sleep(offset)  # spread the viewers over the poll interval, as real ones are
        while time.monotonic() < stop:
            began = time.monotonic()
            headers = {"If-None-Match": tag} if tag else {}
            status, _, _, response = client.request("GET", path, headers=headers)
            assert status in (200, 304), f"GET {path}: {status}"
            if etag and status == 200:
                tag = response.headers.get("ETag", "")
            with lock:
                counts["answered"] += 1
                counts["not_modified"] += status == 304
            time.sleep(max(0.0, POLL_SECONDS - (time.monotonic() - began)))

    threads = [
        threading.Thread(target=viewer, args=(c, tags[i], i * POLL_SECONDS / viewers))
        for i, c in enumerate(clients)
    ]
    cpu = server_cpu_seconds(server)
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    used = server_cpu_seconds(server) - cpu
    elapsed = time.monotonic() - began
    for client in clients:
        client.close()
    return Result(used / elapsed, counts["answered"], counts["not_modified"])


def run(kind: str, jobs: int, viewers: int, seconds: float) -> None:
    with bench_settings(kind) as settings:
        number, partly = build(settings, jobs)
        port = free_port()
        server = start_server(settings, port, False, settings.data_dir / "web.log")
        try:
            updates = f"/{REPO}/pipelines/{number}/updates"
            # First, while the last claimed attempt's lease is fresh (nothing renews it later).
            whole, changed = changed_poll_bytes(port, updates, partly[-1])
            floor = watch(port, server.pid, "/-/health", viewers, seconds, etag=False)
            full = watch(port, server.pid, updates, viewers, seconds, etag=False)
            etag = watch(port, server.pid, updates, viewers, seconds, etag=True)
        finally:
            stop_server(server)
    base = max(floor.cpu_per_second, 1e-6)
    print(f"{kind}: {jobs} jobs, {viewers} viewers, {seconds:g} s each")
    for label, result in (("floor", floor), ("full", full), ("etag", etag)):
        print(
            f"  {label:<6} {result.cpu_per_second:6.3f} CPU-s/s  {result.answered:5d} polls "
            f"({result.not_modified} x 304)  x{result.cpu_per_second / base:5.2f} floor"
        )
    print(
        f"  a changed poll (one step ended): {changed:,} bytes; the whole run {whole:,} bytes "
        f"(x{changed / whole:.3f})"
    )
    print(
        f"  etag vs full: x{etag.cpu_per_second / max(full.cpu_per_second, 1e-6):.2f}; "
        f"goal < {GOAL_CPU} CPU-s/s: {'met' if etag.cpu_per_second < GOAL_CPU else 'not met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--jobs", default="16,64,256", help="job counts, comma-separated")
    options = parser.parse_args()
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        for jobs in (int(n) for n in options.jobs.split(",")):
            run(kind, jobs, options.viewers, options.seconds)
    if "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
