"""A whole forge-ci on this machine for end-to-end tests, every part a real process:

    git push (OpenSSH) ──► forge-ci ssh ──► Redis ──► forge-ci worker ──► run, jobs queued
    forge-ci provider run --slots 2 ──HTTP──► forge-ci web --dev (runner API, 127.0.0.1)
        └──► Docker: forge-ci-job-<attempt> (the runner image) ──api.sock──► relay ──► web

Short clocks keep it fast: leases of ``LEASE_SECONDS`` (so a killed provider's job is lost in
seconds) and job minutes of ``JOB_MINUTE_SECONDS`` (the ``job-minute-seconds`` test fault) for
``timeout-minutes``. Tests read the database directly, through the core's use cases.
"""

from __future__ import annotations

import functools
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import new_token
from forge_ci.coordinator.logs import read_log_page, run_attempts
from forge_ci.coordinator.providers import create_provider
from forge_ci.db import Database
from forge_ci.errors import NotFound
from forge_ci.models import Attempt
from forge_ci.repos import create_repository, set_push_workflows
from forge_ci.runs.queries import RunView, show_run
from forge_ci.settings import Settings, load_settings
from forge_ci_testing.git import GitClient
from forge_ci_testing.keys import make_key

REPO_ROOT = Path(__file__).resolve().parents[1]
OPERATOR = Actor.operator()
OWNER = "alice"
#: A runner must start within one lease of its claim: 6 s was once too short for a container
#: to start on a loaded two-core machine (the job was requeued as designed, and a test that
#: follows its log saw "build #2"). Lost-lease tests wait this long.
LEASE_SECONDS = 12
JOB_MINUTE_SECONDS = 5
LINUX = "[self-hosted, linux]"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """``check()``'s first truthy value, or AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def docker_names(provider_id: str) -> tuple[list[str], list[str]]:
    """Containers and volumes labelled with ``provider_id``, as the docker CLI sees them."""
    label = f"label=forge-ci.provider={provider_id}"

    def names(*args: str) -> list[str]:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout.split()

    return (
        names("ps", "-a", "--filter", label, "--format", "{{.Names}}"),
        names("volume", "ls", "--filter", label, "--format", "{{.Name}}"),
    )


@dataclass
class Forge:
    root: Path
    redis_url: str
    runner_image: str
    #: Environment for every process, over the defaults below (``None`` removes a variable).
    overrides: dict[str, str | None] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = self.root / "data"
        self.logs_dir = self.root / "logs"
        self.logs_dir.mkdir(parents=True)
        self.web_port = free_port()
        self.ssh_port = free_port()
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "FORGE_CI_DATA_DIR": str(self.data_dir),
            "FORGE_CI_DATABASE_URL": f"sqlite:///{self.data_dir / 'forge-ci.db'}",
            "FORGE_CI_REDIS_URL": self.redis_url,
            "FORGE_CI_WEB_LISTEN": f"127.0.0.1:{self.web_port}",
            "FORGE_CI_SSH_LISTEN": f"127.0.0.1:{self.ssh_port}",
            "FORGE_CI_RUNNER_IMAGE": self.runner_image,
            "FORGE_CI_LEASE_SECONDS": str(LEASE_SECONDS),
            "FORGE_CI_TESTING": "1",
            "FORGE_CI_TEST_FAULTS": f"job-minute-seconds={JOB_MINUTE_SECONDS}",
            # Never the default https://github.com: tests name loopback or file:// sources.
            "FORGE_CI_ACTION_SOURCES": "none",
            # Jobs get no way out unless a test starts a provider with a loopback allow-list
            # (the default, public, would look up whatever name a job asks for).
            "FORGE_CI_PROVIDER_EGRESS": "none",
        }
        self.env.pop("FORGE_CI_CONFIG", None)
        for name, value in self.overrides.items():
            if value is None:
                self.env.pop(name, None)
            else:
                self.env[name] = value
        self.settings: Settings = load_settings(self.env)
        self.token_file = self.root / "provider-token"
        self.state_dir = self.root / "provider-state"
        self.database: Database | None = None
        self.key = make_key(self.root, name=OWNER)
        self.git_client = GitClient(self.root / "client", self.key, self.ssh_port)
        self.provider_hash = ""

    # -- processes ------------------------------------------------------------------------------

    def forge_ci(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "forge_ci", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.logs_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        process = subprocess.Popen(
            [sys.executable, "-m", "forge_ci", *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.logs_dir / f"{name}.log").read_text(errors="replace")

    def start(self) -> None:
        self.forge_ci("init")
        self.database = Database(self.settings)
        token = new_token()
        self.token_file.write_text(token + "\n")
        self.token_file.chmod(0o600)
        self.provider_hash = hashlib.sha256(token.encode()).hexdigest()
        with self.database.session() as session:
            create_user(session, OPERATOR, OWNER, None)
            add_key(session, OPERATOR, OWNER, Path(f"{self.key}.pub").read_text())
            create_provider(session, OPERATOR, "e2e", token, "self-hosted,linux", "all")
            session.commit()
        self.spawn("web", "web", "--dev")
        self.spawn("ssh", "ssh")
        self.spawn("worker", "worker")
        for name, port in (("web", self.web_port), ("ssh", self.ssh_port)):
            wait_for(f"forge-ci {name} on port {port}", functools.partial(_answers, port), 60)
        self.start_provider()

    def start_provider(self) -> subprocess.Popen[bytes]:
        process = self.spawn(
            "provider",
            "provider",
            "run",
            "--server",
            f"http://127.0.0.1:{self.web_port}",
            "--allow-http",
            "--token-file",
            str(self.token_file),
            "--slots",
            "2",
            "--state-dir",
            str(self.state_dir),
            "--cpus",
            "1",
            "--memory-mb",
            "512",
        )
        wait_for(
            "the provider to be ready",
            lambda: "ready: server" in self.log("provider") or process.poll() is not None,
            60,
        )
        assert process.poll() is None, self.log("provider")
        return process

    def ensure_provider(self) -> None:
        process = self.processes.get("provider")
        if process is None or process.poll() is not None:
            self.start_provider()

    @property
    def provider_id(self) -> str:
        return (self.state_dir / "provider-id").read_text().strip()

    def stop(self) -> None:
        for name in ("provider", "worker", "ssh", "web"):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self.database is not None:
            self.database.dispose()

    # -- repositories and pushes ----------------------------------------------------------------

    def repository(self, name: str) -> str:
        full_name = f"{OWNER}/{name}"
        assert self.database is not None
        with self.database.session() as session:
            create_repository(session, self.settings, OPERATOR, full_name)
            set_push_workflows(session, OPERATOR, full_name, True)
            session.commit()
        return full_name

    def push(
        self, full_name: str, files: dict[str, str], branch: str = "main", message: str = "e2e"
    ) -> str:
        """Commit ``files`` on a fresh ``branch`` and push it over SSH; return the commit."""
        client = self.git_client
        work = client.home / full_name.replace("/", "-")
        client.git("init", "-q", "-b", branch, str(work))
        for path, text in files.items():
            target = work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        client.git("add", "-A", cwd=work)
        client.git("commit", "-q", "-m", message, cwd=work)
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        client.git("push", "-q", client.url(f"{full_name}.git"), refspec, cwd=work)
        return str(client.git("rev-parse", "HEAD", cwd=work).stdout.strip())

    # -- runs -----------------------------------------------------------------------------------

    def run(self, full_name: str, number: int = 1) -> RunView | None:
        assert self.database is not None
        with self.database.session() as session:
            try:
                return show_run(session, OPERATOR, full_name, number)
            except NotFound:
                return None

    def wait_run(self, full_name: str, number: int = 1, timeout: float = 90) -> RunView:
        def completed() -> RunView | None:
            view = self.run(full_name, number)
            return view if view is not None and view.state == "completed" else None

        try:
            result: RunView = wait_for(
                f"run {number} of {full_name} to end", completed, timeout, 0.2
            )
        except AssertionError:
            raise AssertionError(self.diagnose(full_name, number)) from None
        return result

    def conclusions(self, view: RunView) -> dict[str, str | None]:
        return {job.key: job.conclusion for job in view.jobs}

    def attempts(self, full_name: str, number: int = 1) -> dict[str, Attempt]:
        """The run's attempts by job key (the latest of each), detached, steps loaded."""
        assert self.database is not None
        found: dict[str, Attempt] = {}
        with self.database.session() as session:
            for view in run_attempts(session, OPERATOR, full_name, number).attempts:
                attempt = session.get(Attempt, view.attempt_id)
                assert attempt is not None
                _ = list(attempt.steps)
                found[view.job_key] = attempt
            session.expunge_all()
        return found

    def logs(self, full_name: str, number: int = 1) -> dict[str, str]:
        """Each job's whole log text, by job key."""
        assert self.database is not None
        texts: dict[str, str] = {}
        with self.database.session() as session:
            try:
                view = run_attempts(session, OPERATOR, full_name, number)
            except NotFound:
                return texts
            for attempt in view.attempts:
                cursor = 0
                parts: list[str] = []
                while True:
                    page = read_log_page(
                        session, OPERATOR, full_name, number, attempt.attempt_id, cursor
                    )
                    parts.extend(record.text for record in page.records)
                    cursor = page.next_cursor
                    if not page.has_more:
                        break
                texts[attempt.job_key] = texts.get(attempt.job_key, "") + "".join(parts)
        return texts

    def diagnose(self, full_name: str, number: int) -> str:
        view = self.run(full_name, number)
        jobs = (
            ""
            if view is None
            else repr([(j.key, j.state, j.conclusion, j.status_reason) for j in view.jobs])
        )
        tail = {name: self.log(name)[-3000:] for name in ("worker", "provider")}
        return f"run {number} of {full_name}: {jobs}\n" + "\n".join(
            f"--- {name} log ---\n{text}" for name, text in tail.items()
        )


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def workflow(jobs: str) -> str:
    """A push workflow with ``jobs`` (YAML, indented by two spaces under ``jobs:``)."""
    return f"on: push\njobs:\n{jobs}"
