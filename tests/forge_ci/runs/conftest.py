"""A forge with people and one repository, and helpers to commit workflows and drive jobs.

Commits are made with pygit2 straight into the bare repository (fast, no hooks) unless a test
needs the git CLI (force-push, gc), which :class:`Workdir` drives for real.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import Job, Repository, Run
from forge_ci.repos import create_repository, grant
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.scheduling import complete_job, start_job
from forge_ci.settings import Settings

OPERATOR = Actor.operator()
CI = ".github/workflows/ci.yml"


@dataclass
class Forge:
    """alice owns alice/demo; carol is an admin, bob a writer, dave a reader, erin a stranger."""

    settings: Settings
    database: Database
    session: Session
    repo: Repository
    people: dict[str, Actor] = field(default_factory=dict)
    full_name: str = "alice/demo"

    @property
    def alice(self) -> Actor:
        return self.people["alice"]

    @property
    def path(self) -> Path:
        return repository_path(self.settings.repositories_dir, "alice", "demo")

    def git(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.path))

    def commit(
        self,
        files: Mapping[str, str | bytes | None],
        branch: str = "main",
        message: str = "change",
        parent: str | None = "branch",
    ) -> str:
        """Commit ``files`` (None deletes) on top of ``branch`` (or ``parent``); return the sha."""
        git = self.git()
        index = pygit2.Index()
        parents: list[pygit2.Oid] = []
        ref = f"refs/heads/{branch}"
        if parent == "branch":
            if ref in git.references:
                parents = [git.references[ref].target]
        elif parent is not None:
            parents = [pygit2.Oid(hex=parent)]
        if parents:
            base = git[parents[0]]
            assert isinstance(base, pygit2.Commit)
            index.read_tree(base.tree)
        for path, content in files.items():
            if content is None:
                index.remove(path)
                continue
            data = content.encode() if isinstance(content, str) else content
            index.add(pygit2.IndexEntry(path, git.create_blob(data), FileMode.BLOB))
        tree = index.write_tree(git)
        signature = pygit2.Signature("Alice", "alice@example.com")
        oid = git.create_commit(None, signature, signature, message, tree, parents)
        git.references.create(ref, oid, force=True)
        return str(oid)

    def dispatch(self, branch: str = "main", path: str = CI, actor: Actor | None = None) -> Run:
        return dispatch_run(
            self.session, self.settings, actor or self.alice, self.full_name, branch, path
        )

    def run(self, number: int) -> Run:
        run = self.session.scalar(
            select(Run)
            .where(Run.repository_id == self.repo.id, Run.number == number)
            .execution_options(populate_existing=True)
        )
        assert run is not None
        self.session.scalars(
            select(Job).where(Job.run_id == run.id).execution_options(populate_existing=True)
        ).all()
        return run

    def job(self, run: Run | int, key: str) -> Job:
        number = run if isinstance(run, int) else run.number
        for job in self.run(number).jobs:
            if job.key == key:
                return job
        raise AssertionError(f"no job {key!r} in run #{number}")

    def states(self, run: Run | int) -> dict[str, str]:
        """key -> "state" or "completed/conclusion" for every job of the run."""
        number = run if isinstance(run, int) else run.number
        return {
            job.key: job.state if job.conclusion is None else f"{job.state}/{job.conclusion}"
            for job in self.run(number).jobs
        }

    def start(self, run: Run | int, key: str) -> None:
        start_job(self.session, self.job(run, key))
        self.session.commit()

    def finish(
        self,
        run: Run | int,
        key: str,
        conclusion: str = "success",
        outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Start (if queued) and complete one job, then commit."""
        job = self.job(run, key)
        if job.state == "queued":
            start_job(self.session, job)
        complete_job(self.session, job, conclusion, outputs)
        self.session.commit()


@pytest.fixture
def forge(settings: Settings, database: Database, session: Session) -> Forge:
    people: dict[str, Actor] = {}
    for name in ("alice", "bob", "carol", "dave", "erin"):
        people[name] = Actor.for_user(create_user(session, OPERATOR, name, None))
    repo = create_repository(session, settings, OPERATOR, "alice/demo")
    grant(session, OPERATOR, "alice/demo", "bob", Role.WRITE)
    grant(session, OPERATOR, "alice/demo", "carol", Role.ADMIN)
    grant(session, OPERATOR, "alice/demo", "dave", Role.READ)
    session.commit()
    return Forge(settings, database, session, repo, people)


class Workdir:
    """A working tree driven with the real git CLI, pushing straight into the bare repository.

    Pushes bypass the deployment hooks (``core.hooksPath`` of the bare repository) because these
    tests exercise runs, not the push path.
    """

    def __init__(self, path: Path, bare: Path) -> None:
        self.path = path
        self.bare = bare
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Alice")
        self.git("config", "user.email", "alice@example.com")

    def git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path.parent)}
        result = subprocess.run(
            ["git", *args],
            cwd=cwd or self.path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout.strip()

    def write(self, files: Mapping[str, str]) -> None:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, files: Mapping[str, str], message: str = "change") -> str:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self, branch: str = "main", force: bool = False) -> None:
        args = ["push", "-q"]
        if force:
            args.append("--force")
        receive = "git -c core.hooksPath=/dev/null receive-pack"
        self.git(*args, f"--receive-pack={receive}", str(self.bare), f"HEAD:refs/heads/{branch}")

    def bare_git(self, *args: str) -> str:
        return self.git(f"--git-dir={self.bare}", *args)


def workflow(jobs: str, on: str = "workflow_dispatch", extra: str = "") -> str:
    """A workflow file with ``jobs`` (YAML, indented by two) and the given triggers."""
    return f"name: CI\non: {on}\n{extra}jobs:\n{jobs}"


def job(name: str, needs: str | None = None, condition: str | None = None, body: str = "") -> str:
    """One job entry for :func:`workflow`."""
    lines = [f"  {name}:", "    runs-on: [self-hosted, linux]"]
    if needs:
        lines.append(f"    needs: {needs}")
    if condition:
        lines.append(f"    if: {condition}")
    if body:
        lines.append(body.rstrip("\n"))
    lines += ["    steps:", f"      - run: echo {name}"]
    return "\n".join(lines) + "\n"
