"""Run pages of a 256-job run with a 64 MiB log, served by gunicorn, on both databases.

    python bench/web_pages.py [-n 30] [--dev]

The goal (issue #8): the run page and the first log page are each served in under 200 ms.

Set-up, all through the core's use cases: a repository ``bench/app`` with a workflow of the
largest run a workflow may expand to (256 jobs, 4 steps each), dispatched by its owner::

    prepare ─► build (4 os x 4 arch) ─┬─► test (4 arch x 56 shards) ─► report ─┐
                                      ├─► docs ────────────────────────────────┤
                                      └─► package (11 targets) ────────────────┼─► publish
    lint ──────────────────────────────────────────────────────────────────────┘

``needs`` of a matrix job waits for every leg, so the graph has about 4,000 edges. A provider
with the amd64 and arm64 labels claims and runs jobs through the coordinator as a runner would
(start, steps, logs, complete): prepare, lint, the builds and about 90 more succeed (two tests
fail), 10 are running, the rest wait: riscv64 tests for a label no provider has, s390x tests for
a paused provider, the other queued jobs for a provider; report and publish wait for needs. One
failed test's attempt holds the 64 MiB log, stored through ``Coordinator.log`` in 2,048 records
of 32 KiB (the runner's chunk: ``worker.runner.uploader.CHUNK_CHARACTERS`` of ASCII text),
masked and acknowledged one by one; the cap (``log_cap_bytes``, 64 MiB) is reached exactly.
Nothing is inserted behind the use cases' back; the set-up takes about a minute on SQLite and
two on PostgreSQL.

Then ``forge-ci web`` (gunicorn, as in production; ``--dev`` for werkzeug's threaded server)
serves the database on a free port of 127.0.0.1, a reader signs in through the login form, and
one client measures the wall time of ``-n`` sequential requests (after a warm-up) of:

- the run page, ``/bench/app/pipelines/1`` (graph, jobs, queue blockers);
- its poll, ``.../pipelines/1/updates``;
- the job page of the 64 MiB log, ``.../pipelines/1/jobs/<job>``;
- the first log page, ``.../attempts/<attempt>/logs`` and one from the middle (``?after=``).

Prints min, median, p95 and max per request with p95 as a multiple of the 200 ms goal, the
server's CPU time per request (its processes' user + system time from /proc, so Linux only) and
the size of each response. On a shared machine wall times include waiting for a CPU; the
minimum and the server's CPU time show what a page costs without neighbours.
SQLite always; PostgreSQL when FORGE_CI_BENCH_POSTGRES_URL (or FORGE_CI_TEST_POSTGRES_URL) is
set. Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pygit2
from pygit2.enums import FileMode
from sqlalchemy import func, select

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import create_provider, pause_provider
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import Attempt, Job, LogRecord
from forge_ci.protocol import (
    Assignment,
    ClaimRequest,
    CompleteRequest,
    LogRequest,
    StartRequest,
    StepRequest,
)
from forge_ci.repos import create_repository, grant
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.settings import Settings
from forge_ci_testing.seeding import OPERATOR, bench_settings, postgres_url

ROOT = Path(__file__).resolve().parents[1]

GOAL_MS = 200.0
REPO = "bench/app"
READER = "reader"
PASSWORD = "bench reader password"
WORKFLOW_PATH = ".github/workflows/release.yml"
#: The runner's chunk of ASCII output (worker.runner.uploader.CHUNK_CHARACTERS).
CHUNK = 32 * 1024
LOG_BYTES = 64 * 1024 * 1024
#: Jobs the provider completes (after prepare, lint and the builds), then leaves running.
COMPLETED = 90
RUNNING = 10
WARM_UP = 3

STEPS = """\
    steps:
      - name: Check out
        id: checkout
        run: git checkout
      - name: Set up toolchain
        id: setup
        run: ./setup.sh
      - name: Run
        id: main
        run: make $TARGET
      - name: Upload results
        id: upload
        run: ./upload.sh
"""

WORKFLOW = f"""\
name: Release
on: [workflow_dispatch]
jobs:
  prepare:
    runs-on: [self-hosted, linux]
{STEPS}
  lint:
    runs-on: [self-hosted, linux]
{STEPS}
  build:
    needs: prepare
    name: build ${{{{ matrix.os }}}} ${{{{ matrix.arch }}}}
    strategy:
      matrix:
        os: [debian, alpine, fedora, arch]
        arch: [amd64, arm64, riscv64, s390x]
    runs-on: [self-hosted, linux]
{STEPS}
  docs:
    needs: build
    runs-on: [self-hosted, linux]
{STEPS}
  test:
    needs: build
    name: test ${{{{ matrix.arch }}}} shard ${{{{ matrix.shard }}}}
    strategy:
      fail-fast: false
      matrix:
        arch: [amd64, arm64, riscv64, s390x]
        shard: [{", ".join(str(n) for n in range(1, 57))}]
    runs-on: [self-hosted, linux, "${{{{ matrix.arch }}}}"]
{STEPS}
  report:
    needs: test
    runs-on: [self-hosted, linux]
{STEPS}
  package:
    needs: build
    name: package ${{{{ matrix.target }}}}
    strategy:
      matrix:
        target: [deb, rpm, apk, tar, zip, oci, snap, flatpak, wheel, sdist, docs]
    runs-on: [self-hosted, linux]
{STEPS}
  publish:
    needs: [package, report, lint, docs]
    runs-on: [self-hosted, linux]
{STEPS}
"""


# --- Set-up --------------------------------------------------------------------------------------


def log_chunks() -> list[str]:
    """Distinct 32 KiB chunks of build-like ASCII output (lines cross chunk boundaries)."""
    words = ["compiling", "src/engine/core.c", "warning:", "ok", "PASS", "0.031s", "linking"]
    text = []
    size = 0
    line = 0
    while size < 64 * CHUNK:
        line += 1
        piece = f"[{line:07d}] test_case_{line % 977} {words[line % 7]} {words[(line * 3) % 7]}"
        piece += " " + "." * (line % 40) + (" FAIL\n" if line % 1000 == 0 else " ok\n")
        text.append(piece)
        size += len(piece)
    joined = "".join(text)
    return [joined[i : i + CHUNK] for i in range(0, 64 * CHUNK, CHUNK)]


@dataclass
class Runner:
    """One claimed attempt, driven like the in-container runner drives it."""

    coordinator: Coordinator
    assignment: Assignment
    token: str
    execution_id: str
    sequence: int = 0

    def step(self, step_id: str, state: str, conclusion: str = "", exit_code: int = -1) -> None:
        self.coordinator.step(
            self.token,
            self.assignment.attempt_id,
            StepRequest(self.execution_id, step_id, state, conclusion, exit_code, False),
        )

    def log(self, text: str, step_id: str) -> None:
        self.sequence += 1
        self.coordinator.log(
            self.token,
            self.assignment.attempt_id,
            LogRequest(self.execution_id, self.sequence, step_id, "stdout", text),
        )

    def run(self, conclusion: str, chunks_per_step: dict[str, list[str]] | None = None) -> None:
        """Every step with its output; the last one ends with ``conclusion``; then complete."""
        steps = self.assignment.steps
        for index, step in enumerate(steps):
            self.step(step.id, "running")
            for text in (chunks_per_step or {}).get(step.id, [f"{step.name}: done\n"]):
                self.log(text, step.id)
            last = index == len(steps) - 1
            outcome = conclusion if last else "success"
            self.step(step.id, "completed", outcome, 0 if outcome == "success" else 1)
        self.coordinator.complete(
            self.token,
            self.assignment.attempt_id,
            CompleteRequest(self.execution_id, conclusion, self.sequence, {}),
        )

    def run_partly(self) -> None:
        """The first two steps done, the third running with some output."""
        for step in self.assignment.steps[:2]:
            self.step(step.id, "running")
            self.log(f"{step.name}: done\n", step.id)
            self.step(step.id, "completed", "success", 0)
        main = self.assignment.steps[2]
        self.step(main.id, "running")
        self.log("running the suite\n", main.id)


def commit_workflow(settings: Settings) -> None:
    owner, name = REPO.split("/")
    git = pygit2.Repository(str(repository_path(settings.repositories_dir, owner, name)))
    index = pygit2.Index()
    index.add(pygit2.IndexEntry(WORKFLOW_PATH, git.create_blob(WORKFLOW.encode()), FileMode.BLOB))
    tree = index.write_tree(git)
    signature = pygit2.Signature("Bench", "bench@example.com")
    git.create_commit("refs/heads/main", signature, signature, "release workflow", tree, [])


@dataclass
class Target:
    """What the bench requests: run #number, and the job and attempt with the big log."""

    number: int
    job_id: int
    attempt_id: int
    middle_cursor: int
    summary: str


def build_state(settings: Settings) -> Target:
    database = Database(settings)
    try:
        with database.session() as session:
            owner = create_user(session, OPERATOR, "bench", None)
            create_user(session, OPERATOR, READER, PASSWORD)
            create_repository(session, settings, OPERATOR, REPO)
            grant(session, OPERATOR, REPO, READER, Role.READ)
            session.commit()
            actor = Actor.for_user(owner)
        commit_workflow(settings)
        with database.session() as session:
            number = dispatch_run(session, settings, actor, REPO, "main", WORKFLOW_PATH).number
        provider = new_token()
        with database.session() as session:
            create_provider(
                session, OPERATOR, "amd", provider, "self-hosted,linux,amd64,arm64", "all"
            )
            create_provider(
                session, OPERATOR, "mainframe", new_token(), "self-hosted,linux,s390x", "all"
            )
            pause_provider(session, OPERATOR, "mainframe")
            session.commit()
        coordinator = Coordinator(database.session, settings)

        def claim() -> Runner:
            token = new_token()
            result = coordinator.claim(provider, ClaimRequest(new_request_id(), token, 0))
            assert result.assignment is not None, "nothing to claim"
            runner = Runner(coordinator, result.assignment, token, uuid.uuid4().hex)
            coordinator.start(
                token, runner.assignment.attempt_id, StartRequest(runner.execution_id)
            )
            return runner

        for _ in range(2 + 16):  # prepare, lint, then the 16 builds
            claim().run("success")
        chunks = log_chunks()
        big: Runner | None = None
        failed = 0
        for _ in range(COMPLETED):
            runner = claim()
            if big is None and runner.assignment.job_key.startswith("test"):
                big = runner
                count = LOG_BYTES // CHUNK
                pieces = [chunks[i % len(chunks)] for i in range(count)]
                big.run(
                    "failure",
                    {
                        "checkout": pieces[:1],
                        "setup": pieces[1:16],
                        "main": pieces[16:-1],
                        "upload": pieces[-1:],
                    },
                )
            elif failed < 1 and runner.assignment.job_key.startswith("test"):
                failed += 1
                runner.run("failure")
            else:
                runner.run("success")
        for _ in range(RUNNING):
            claim().run_partly()
        assert big is not None
        with database.session() as session:
            jobs = session.execute(select(Job.state, Job.conclusion, Job.id)).all()
            records, size = session.execute(
                select(func.count(), func.sum(func.length(LogRecord.text))).where(
                    LogRecord.attempt_id == big.assignment.attempt_id
                )
            ).one()
            middle = session.scalar(
                select(LogRecord.position)
                .where(LogRecord.attempt_id == big.assignment.attempt_id)
                .order_by(LogRecord.position)
                .offset(records // 2)
                .limit(1)
            )
            job_id = session.scalar(
                select(Attempt.job_id).where(Attempt.id == big.assignment.attempt_id)
            )
        assert job_id is not None and middle is not None
        states = Counter(conclusion or state for state, conclusion, _ in jobs)
        summary = (
            f"{len(jobs)} jobs ({', '.join(f'{n} {s}' for s, n in sorted(states.items()))}); "
            f"log of {big.assignment.job_key}: {records} records, {size / 2**20:.1f} MiB"
        )
        return Target(number, job_id, big.assignment.attempt_id, middle, summary)
    finally:
        database.dispose()


# --- Serving and measuring -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(settings: Settings, port: int, dev: bool, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_CI_")}
    env.update(
        {
            "FORGE_CI_DATA_DIR": str(settings.data_dir),
            "FORGE_CI_DATABASE_URL": settings.database_url,
            "FORGE_CI_WEB_LISTEN": f"127.0.0.1:{port}",
            "PYTHONPATH": str(ROOT),
        }
    )
    command = [sys.executable, "-m", "forge_ci", "web", *(["--dev"] if dev else [])]
    with log.open("wb") as output:
        server = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"forge-ci web exited:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"forge-ci web did not listen on port {port}:\n{log.read_text()}")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class Client:
    """A browser-like client: one keep-alive connection and the session cookie."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookie = ""
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def request(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, float, http.client.HTTPResponse]:
        headers = {**(headers or {}), **({"Cookie": self.cookie} if self.cookie else {})}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        began = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # The server closed the idle keep-alive connection: reconnect, as a browser does.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            began = time.perf_counter()
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - began
        for value in response.headers.get_all("Set-Cookie") or []:
            if value.startswith("forge_ci_session="):
                self.cookie = value.split(";", 1)[0]
        return response.status, data, elapsed, response

    def sign_in(self, name: str, password: str) -> None:
        status, page, _, _ = self.request("GET", "/-/login")
        match = re.search(rb'name="csrf_token" value="([^"]+)"', page)
        assert status == 200 and match, f"login page: {status}"
        form = {"name": name, "password": password, "csrf_token": match.group(1).decode()}
        status, _, _, response = self.request("POST", "/-/login", urlencode(form))
        assert status == 302 and response.headers["Location"] == "/", f"login: {status}"

    def close(self) -> None:
        self.conn.close()


def server_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of the server and its workers so far, from /proc (Linux)."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue  # a process that has just ended
    return total


def measure(client: Client, server: int, path: str, count: int) -> tuple[list[float], float, int]:
    """Sorted wall times (ms), the server's CPU time per request (ms) and the response size."""
    for _ in range(WARM_UP):
        client.request("GET", path)
    times = []
    size = 0
    cpu = server_cpu_seconds(server)
    for _ in range(count):
        status, data, elapsed, _ = client.request("GET", path)
        assert status == 200, f"GET {path}: {status}"
        times.append(elapsed * 1000)
        size = len(data)
    cpu = (server_cpu_seconds(server) - cpu) * 1000 / count
    return sorted(times), cpu, size


def run(kind: str, count: int, dev: bool) -> None:
    with bench_settings(kind) as settings:
        began = time.perf_counter()
        target = build_state(settings)
        print(f"{kind}: set-up {time.perf_counter() - began:.0f} s; {target.summary}")
        run_path = f"/{REPO}/pipelines/{target.number}"
        logs_path = f"{run_path}/attempts/{target.attempt_id}/logs"
        paths = [
            ("run page", run_path),
            ("updates", f"{run_path}/updates"),
            ("job log page", f"{run_path}/jobs/{target.job_id}"),
            ("first log page", logs_path),
            ("middle log page", f"{logs_path}?after={target.middle_cursor}"),
        ]
        port = free_port()
        server = start_server(settings, port, dev, settings.data_dir / "web.log")
        try:
            client = Client(port)
            client.sign_in(READER, PASSWORD)
            for label, path in paths:
                times, cpu, size = measure(client, server.pid, path, count)
                p95 = times[math.ceil(len(times) * 0.95) - 1]
                print(
                    f"  {label:<16} min {times[0]:6.1f}  median {statistics.median(times):6.1f}  "
                    f"p95 {p95:6.1f}  max {times[-1]:6.1f} ms  p95/goal {p95 / GOAL_MS:4.2f}  "
                    f"server CPU {cpu:5.1f} ms  {size / 1024:5.0f} KiB"
                )
            client.close()
        finally:
            stop_server(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="requests per page")
    parser.add_argument("--dev", action="store_true", help="werkzeug's server, not gunicorn")
    options = parser.parse_args()
    server = "werkzeug (--dev)" if options.dev else "gunicorn (2 workers x 16 threads)"
    print(f"{options.n} requests per page after {WARM_UP} warm-up; {server}; goal {GOAL_MS:g} ms")
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        run(kind, options.n, options.dev)
    if "postgres" not in kinds:
        print("postgres: skipped (set FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
