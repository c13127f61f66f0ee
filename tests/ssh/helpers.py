"""Helpers for SSH tests: git and OpenSSH clients, a server process, and what the server holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import PushEvent, Repository, User
from forge_ci.settings import Settings, TestFault

ZERO = "0" * 40
REPO_ROOT = Path(__file__).resolve().parents[2]


def events(
    database: Database, full_name: str = "alice/demo"
) -> list[tuple[int, str, str, str, str]]:
    """(id, ref, old, new, state) of every push event of the repository, oldest first."""
    owner, name = full_name.split("/")
    with database.session() as session:
        rows = session.scalars(
            select(PushEvent)
            .join(PushEvent.repository)
            .join(Repository.owner)
            .where(User.name == owner, Repository.name == name)
            .order_by(PushEvent.id)
        )
        return [(e.id, e.ref, e.old_sha, e.new_sha, e.state) for e in rows]


def refs(settings: Settings, full_name: str = "alice/demo") -> dict[str, str]:
    """Every ref of the bare repository on the server, internal ones included."""
    owner, name = full_name.split("/")
    path = repository_path(settings.repositories_dir, owner, name)
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)"],
        cwd=path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def event_pins(settings: Settings, full_name: str = "alice/demo") -> dict[str, str]:
    return {
        name: oid
        for name, oid in refs(settings, full_name).items()
        if name.startswith("refs/forge-ci/push-events/")
    }


class ServerProcess:
    """``python -m forge_ci ssh`` as a child process (kill -9 needs a process of its own)."""

    def __init__(self, settings: Settings, faults: tuple[TestFault, ...] = ()) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "FORGE_CI_DATA_DIR": str(settings.data_dir),
            "FORGE_CI_DATABASE_URL": settings.database_url,
            "FORGE_CI_REDIS_URL": settings.redis_url,
            "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        }
        if faults:
            env["FORGE_CI_TESTING"] = "1"
            env["FORGE_CI_TEST_FAULTS"] = ",".join(
                f"{f.name}={f.argument}" if f.argument else f.name for f in faults
            )
        self.log = settings.data_dir / f"ssh-{len(list(settings.data_dir.glob('ssh-*.log')))}.log"
        self._log_handle = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "forge_ci", "ssh"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._log_handle,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("forge-ci ssh listening on "):
            self.stop()
            raise AssertionError(f"server did not start: {line!r}\n{self.log.read_text()}")
        self.port = int(line.rsplit(":", 1)[1])

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log_handle.close()


def accepted(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """``git push --porcelain`` output -> {destination ref: flag} for every ref git sent.

    Flags: ``*`` new, `` `` fast-forward, ``+`` forced, ``-`` deleted, ``!`` rejected,
    ``=`` up to date.
    """
    found = {}
    for line in result.stdout.splitlines():
        if line[:1] in "*+-! =" and "\t" in line:
            flag, refspec = line.split("\t")[:2]
            found[refspec.split(":")[-1]] = flag
    return found
