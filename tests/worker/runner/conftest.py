"""A real forge for runner tests: the runner API served on a Unix socket, the real runner.

Each test gets a database (SQLite unless a test asks for ``db_kind``), a repository with
commits made by pygit2, runs created by the real ``workflow_dispatch`` use case, a provider
created by the coordinator, and the Flask application (with the runner API) served by werkzeug
on a Unix socket in a thread. The provider's claim goes through that API; then the runner is
started exactly as the provider starts it, ``python -S -m worker.runner``, with the envelope on
its standard input and a workspace directory in ``tmp_path`` instead of ``/workspace``::

    test ──► dispatch_run ──► POST /claims (provider credential) ──► RunnerInput on stdin
         ──► python -S -m worker.runner ──► /-/runner-api/v1 over the Unix socket ──► database
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
import pytest
from flask import Flask
from pygit2.enums import FileMode
from sqlalchemy import select
from werkzeug.serving import BaseWSGIServer, make_server

from forge_ci import protocol
from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import Attempt, AttemptStep, Job, LogRecord, utcnow
from forge_ci.repos import create_repository
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.secrets.store import set_secret
from forge_ci.settings import Settings
from web import create_app
from web.runner_api import register_runner_api
from worker.runner.client import UnixHTTPConnection

REPO_ROOT = Path(__file__).resolve().parents[3]
OPERATOR = Actor.operator()
CI = ".github/workflows/ci.yml"
REPOSITORY = "alice/demo"


@pytest.fixture
def db_kind() -> str:
    """SQLite unless a test parametrizes ``db_kind`` (the runner does not care which)."""
    return "sqlite"


class Clock:
    """The coordinator's clock: real time, which a test may move forward."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass(frozen=True)
class Link:
    """A symbolic link to commit (``files`` values may be text, bytes, Executable or Link)."""

    target: str


@dataclass(frozen=True)
class Executable:
    data: str


@dataclass
class Finished:
    """A runner that exited: its status, its JSON report and its standard error."""

    returncode: int
    report: dict[str, Any]
    stderr: str
    seconds: float


@dataclass
class Claimed:
    assignment: dict[str, Any]
    token: str

    @property
    def attempt_id(self) -> int:
        return int(self.assignment["attempt_id"])


@dataclass
class Forge:
    settings: Settings
    database: Database
    clock: Clock
    socket_path: str
    provider_token: str
    workdir: Path
    server: BaseWSGIServer
    thread: threading.Thread
    alice: Actor
    app: Flask
    stopped: bool = False
    runners: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: More environment for the runner process (RUNNER_TOOL_CACHE for a host tool cache).
    runner_env: dict[str, str] = field(default_factory=dict)

    # -- git and runs ---------------------------------------------------------------------------

    def git(self) -> pygit2.Repository:
        return pygit2.Repository(
            str(repository_path(self.settings.repositories_dir, "alice", "demo"))
        )

    def commit(self, files: Mapping[str, str | bytes | Link | Executable]) -> str:
        git = self.git()
        index = pygit2.Index()
        parents: list[pygit2.Oid] = []
        if "refs/heads/main" in git.references:
            parents = [git.references["refs/heads/main"].target]
            base = git[parents[0]]
            assert isinstance(base, pygit2.Commit)
            index.read_tree(base.tree)
        for path, content in files.items():
            mode = FileMode.BLOB
            if isinstance(content, Link):
                mode, data = FileMode.LINK, content.target.encode()
            elif isinstance(content, Executable):
                mode, data = FileMode.BLOB_EXECUTABLE, content.data.encode()
            else:
                data = content.encode() if isinstance(content, str) else content
            index.add(pygit2.IndexEntry(path, git.create_blob(data), mode))
        tree = index.write_tree(git)
        signature = pygit2.Signature("Alice", "alice@example.com")
        oid = git.create_commit(None, signature, signature, "change", tree, parents)
        git.references.create("refs/heads/main", oid, force=True)
        return str(oid)

    def dispatch(
        self, workflow: str, files: Mapping[str, str | bytes | Link | Executable] | None = None
    ) -> int:
        """Commit ``workflow`` (and ``files``) and create a workflow_dispatch run; its id."""
        self.commit({CI: workflow, **(files or {})})
        with self.database.session() as session:
            run = dispatch_run(session, self.settings, self.alice, REPOSITORY, "main", CI)
            session.commit()
            return run.id

    def use_secrets(self, values: Mapping[str, str], *, branch: str = "main") -> None:
        """Store ``values`` (name -> value) as repository secrets for ``branch`` and the CI
        workflow, in the real store (sealed with the data directory's key file)."""
        if "refs/heads/main" not in self.git().references:
            self.commit({"README": "demo\n"})
        with self.database.session() as session:
            for name, value in values.items():
                set_secret(
                    session,
                    self.settings,
                    self.alice,
                    REPOSITORY,
                    name,
                    branch=branch,
                    workflow_path=CI,
                    value=value,
                    version="0",
                )
            session.commit()

    # -- the API --------------------------------------------------------------------------------

    def post(self, path: str, body: dict[str, Any], token: str) -> tuple[int, dict[str, Any]]:
        connection = UnixHTTPConnection(self.socket_path, 10)
        try:
            payload = json.dumps(body).encode()
            connection.request(
                "POST",
                protocol.API_PREFIX + path,
                body=payload,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def claim(self) -> Claimed:
        token = new_token()
        body = {
            "version": 1,
            "request_id": new_request_id(),
            "attempt_token": token,
            "wait_seconds": 0,
        }
        status, answer = self.post("/claims", body, self.provider_token)
        assert status == 200, answer
        assert answer["assignment"] is not None, "nothing to claim"
        return Claimed(answer["assignment"], token)

    def stop_server(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(10)

    # -- the runner -----------------------------------------------------------------------------

    def envelope(
        self, claimed: Claimed, workspace: Path, step_minute_seconds: float | None = None
    ) -> bytes:
        body: dict[str, Any] = {
            "version": 1,
            "credential": claimed.token,
            "api_socket": self.socket_path,
            "workspace": str(workspace),
            "assignment": claimed.assignment,
        }
        if step_minute_seconds is not None:
            body["step_minute_seconds"] = step_minute_seconds
        return json.dumps(body).encode()

    def workspace(self) -> Path:
        path = self.workdir / "workspace"
        path.mkdir(exist_ok=True)
        return path

    def start_runner(self, stdin: bytes) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            # On this host, not in a container: the runner would refuse without the flag.
            [sys.executable, "-S", "-m", "worker.runner", "--unsafe-local"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.workdir,
            env={
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "PYTHONPATH": str(REPO_ROOT),
                "PYTHONSAFEPATH": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                **self.runner_env,
            },
        )
        self.runners.append(process)
        assert process.stdin is not None
        process.stdin.write(stdin)
        process.stdin.close()
        process.stdin = None  # written and closed: communicate() must not touch it
        return process

    def finish(self, process: subprocess.Popen[bytes], timeout: float = 30) -> Finished:
        started = time.monotonic()
        stdout, stderr = process.communicate(timeout=timeout)
        text = stdout.decode()
        assert text.count("\n") == 1, (text, stderr.decode())
        return Finished(
            process.returncode, json.loads(text), stderr.decode(), time.monotonic() - started
        )

    def run_job(
        self,
        workflow: str,
        files: Mapping[str, str | bytes | Link | Executable] | None = None,
        step_minute_seconds: float | None = None,
    ) -> tuple[Claimed, Finished]:
        """Dispatch, claim and run the runner to its end."""
        self.dispatch(workflow, files)
        claimed = self.claim()
        stdin = self.envelope(claimed, self.workspace(), step_minute_seconds)
        return claimed, self.finish(self.start_runner(stdin))

    # -- reading back ---------------------------------------------------------------------------

    def attempt(self, attempt_id: int) -> Attempt:
        with self.database.session() as session:
            attempt = session.get(Attempt, attempt_id)
            assert attempt is not None
            session.expunge(attempt)
            return attempt

    def steps(self, attempt_id: int) -> dict[str, tuple[str, str | None, int | None]]:
        """step id -> (state, conclusion, exit code)."""
        with self.database.session() as session:
            rows = session.scalars(
                select(AttemptStep)
                .where(AttemptStep.attempt_id == attempt_id)
                .order_by(AttemptStep.position)
            )
            return {row.step_id: (row.state, row.conclusion, row.exit_code) for row in rows}

    def log(self, attempt_id: int, step_id: str | None = None, stream: str | None = None) -> str:
        with self.database.session() as session:
            query = select(LogRecord).where(LogRecord.attempt_id == attempt_id)
            if step_id is not None:
                query = query.where(LogRecord.step_id == step_id)
            if stream is not None:
                query = query.where(LogRecord.stream == stream)
            return "".join(row.text for row in session.scalars(query.order_by(LogRecord.position)))

    def job_outputs(self, attempt_id: int) -> dict[str, str]:
        with self.database.session() as session:
            attempt = session.get(Attempt, attempt_id)
            assert attempt is not None
            job = session.get(Job, attempt.job_id)
            assert job is not None
            return {output.name: output.value for output in job.outputs}


@pytest.fixture
def forge(
    settings: Settings,
    database: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Forge]:
    clock = Clock()
    monkeypatch.setattr("forge_ci.runs.scheduling.utcnow", clock)
    with database.session() as session:
        alice = Actor.for_user(create_user(session, OPERATOR, "alice", None))
        create_repository(session, settings, OPERATOR, REPOSITORY)
        provider_token = new_token()
        create_provider(
            session, OPERATOR, "docker-1", provider_token, "self-hosted,linux", "all", ()
        )
        session.commit()
    app = create_app(settings, database=database)
    register_runner_api(app, Coordinator(database.session, settings, clock=clock))
    # AF_UNIX paths are short (108 bytes); tmp_path may be longer.
    socket_dir = tempfile.mkdtemp(prefix="fci-", dir="/tmp")
    socket_path = os.path.join(socket_dir, "api.sock")
    server = make_server(f"unix://{socket_path}", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="runner-api", daemon=True)
    thread.start()
    workdir = tmp_path / "runner"
    workdir.mkdir()
    forge = Forge(
        settings, database, clock, socket_path, provider_token, workdir, server, thread, alice, app
    )
    yield forge
    for process in forge.runners:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    forge.stop_server()
    shutil.rmtree(socket_dir, ignore_errors=True)


def workflow(steps: str, timeout_minutes: int = 5, outputs: str = "", extra: str = "") -> str:
    """A one-job workflow whose ``steps`` are YAML indented by six spaces."""
    job_outputs = f"    outputs:\n{outputs}" if outputs else ""
    return (
        "name: CI\non: workflow_dispatch\njobs:\n  build:\n    runs-on: self-hosted\n"
        f"    timeout-minutes: {timeout_minutes}\n{extra}{job_outputs}    steps:\n{steps}"
    )


def wait_for(predicate: Any, timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 : data.rfind(b")") + 3] != b"Z"
