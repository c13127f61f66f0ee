"""Runs for the pipelines pages, made the real way: a workflow committed to ``olivia/app``,
dispatched by olivia, claimed and executed through the coordinator by a registered provider.

    build ──► test ──► deploy          (deploy also needs lint)
    lint  ──────────────┘
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field

import pygit2
from pygit2.enums import FileMode
from sqlalchemy import select

from forge_ci.authz import Actor, Role
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import Attempt, Job, PushEvent, Run, User, utcnow
from forge_ci.protocol import (
    Assignment,
    ClaimRequest,
    CompleteRequest,
    LogRequest,
    StartRequest,
    StepRequest,
)
from forge_ci.repos import find_repository
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.events import process_push_event
from forge_ci.settings import Settings
from tests.web.people import OPERATOR, REPO

CI = ".github/workflows/ci.yml"
WORKFLOW = """\
name: CI
on: [workflow_dispatch, push]
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - name: Compile
        id: compile
        run: make
      - name: Package
        id: package
        run: make dist
  lint:
    runs-on: [self-hosted, linux]
    steps:
      - run: make lint
  test:
    needs: build
    runs-on: [self-hosted, linux, gpu]
    steps:
      - run: make test
  deploy:
    needs: [test, lint]
    runs-on: [self-hosted, linux]
    steps:
      - run: make deploy
"""


@dataclass
class Execution:
    """One claimed attempt, driven step by step like a runner would."""

    coordinator: Coordinator
    assignment: Assignment
    token: str
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sequence: int = 0

    @property
    def attempt_id(self) -> int:
        return self.assignment.attempt_id

    def start(self) -> Execution:
        self.coordinator.start(self.token, self.attempt_id, StartRequest(self.execution_id))
        return self

    def step(self, step_id: str, state: str, conclusion: str = "", exit_code: int = -1) -> None:
        self.coordinator.step(
            self.token,
            self.attempt_id,
            StepRequest(self.execution_id, step_id, state, conclusion, exit_code, False),
        )

    def log(self, text: str, step_id: str = "", stream: str = "stdout") -> None:
        self.sequence += 1
        self.coordinator.log(
            self.token,
            self.attempt_id,
            LogRequest(self.execution_id, self.sequence, step_id, stream, text),
        )

    def complete(self, conclusion: str = "success") -> None:
        self.coordinator.complete(
            self.token,
            self.attempt_id,
            CompleteRequest(self.execution_id, conclusion, self.sequence, {}),
        )

    def run_all(self, conclusion: str = "success", lines_per_step: int = 1) -> None:
        """Run every step with a little output and complete the attempt."""
        for step in self.assignment.steps:
            self.step(step.id, "running")
            text = "".join(f"{step.name} line {n}\n" for n in range(1, lines_per_step + 1))
            self.log(text, step.id)
            self.step(step.id, "completed", conclusion, 0 if conclusion == "success" else 1)
        self.complete(conclusion)


class Pipelines:
    """Commits, dispatches and executes runs of ``olivia/app``."""

    def __init__(self, settings: Settings, database: Database) -> None:
        self.settings = settings
        self.database = database
        self.coordinator = Coordinator(database.session, settings)
        self.provider_token: str | None = None

    def commit(self, files: dict[str, str], branch: str = "main") -> str:
        git = self._git()
        ref = f"refs/heads/{branch}"
        parents = [git.references[ref].target] if ref in git.references else []
        index = pygit2.Index()
        if parents:
            base = git[parents[0]]
            assert isinstance(base, pygit2.Commit)
            index.read_tree(base.tree)
        for path, text in files.items():
            index.add(pygit2.IndexEntry(path, git.create_blob(text.encode()), FileMode.BLOB))
        tree = index.write_tree(git)
        signature = pygit2.Signature("Olivia", "olivia@example.com")
        oid = git.create_commit(None, signature, signature, "change", tree, parents)
        git.references.create(ref, oid, force=True)
        return str(oid)

    def dispatch(self, workflow: str = WORKFLOW, path: str = CI) -> int:
        self.commit({path: workflow})
        with self.database.session() as session:
            olivia = session.scalar(select(User).where(User.name == "olivia"))
            assert olivia is not None
            run = dispatch_run(session, self.settings, Actor.for_user(olivia), REPO, "main", path)
            return run.number

    def push(self, files: dict[str, str], pusher: str = "olivia") -> int:
        """Commit ``files`` and record and process a push event, as the SSH push path would."""
        old = self._tip()
        new = self.commit(files)
        with self.database.session() as session:
            user = session.scalar(select(User).where(User.name == pusher))
            repo = find_repository(session, OPERATOR, REPO, Role.READ)
            assert user is not None
            event = PushEvent(
                repository_id=repo.id,
                pusher_id=user.id,
                push_session=secrets.token_hex(8),
                ref="refs/heads/main",
                old_sha=old or "0" * 40,
                new_sha=new,
                state="confirmed",
                created_at=utcnow(),
                settled_at=utcnow(),
            )
            session.add(event)
            session.flush()
            self._git().references.create(
                f"refs/forge-ci/push-events/{event.id}", pygit2.Oid(hex=new)
            )
            session.commit()
            process_push_event(session, self.settings, event.id)
            session.commit()
            return event.id

    def _git(self) -> pygit2.Repository:
        return pygit2.Repository(
            str(repository_path(self.settings.repositories_dir, "olivia", "app"))
        )

    def _tip(self) -> str | None:
        git = self._git()
        ref = "refs/heads/main"
        return str(git.references[ref].target) if ref in git.references else None

    def add_provider(
        self, name: str = "p1", labels: str = "self-hosted,linux", scope: str = "all"
    ) -> str:
        token = new_token()
        with self.database.session() as session:
            create_provider(session, OPERATOR, name, token, labels, scope, ())
            session.commit()
        self.provider_token = token
        return token

    def claim(self, provider_token: str | None = None) -> Execution | None:
        token = provider_token or self.provider_token or self.add_provider()
        attempt_token = new_token()
        result = self.coordinator.claim(token, ClaimRequest(new_request_id(), attempt_token, 0))
        if result.assignment is None:
            return None
        return Execution(self.coordinator, result.assignment, attempt_token)

    def job_id(self, number: int, key: str) -> int:
        with self.database.session() as session:
            job_id = session.scalar(
                select(Job.id)
                .join(Run, Run.id == Job.run_id)
                .where(Run.number == number, Job.key == key)
            )
            assert job_id is not None
            return job_id

    def attempt_of(self, number: int, key: str) -> int:
        with self.database.session() as session:
            attempt_id = session.scalar(
                select(Attempt.id)
                .where(Attempt.job_id == self.job_id(number, key))
                .order_by(Attempt.number.desc())
            )
            assert attempt_id is not None
            return attempt_id


@dataclass
class StandardRun:
    """Run #number of olivia/app: build succeeded, lint runs, test is queued (needs a gpu
    provider, and there is none), deploy waits for test and lint."""

    number: int
    jobs: dict[str, int]
    build_attempt: int
    lint: Execution


def standard_run(pipelines: Pipelines) -> StandardRun:
    number = pipelines.dispatch()
    pipelines.add_provider()
    build = pipelines.claim()
    assert build is not None and build.assignment.job_key == "build"
    build.start()
    build.run_all(lines_per_step=3)
    lint = pipelines.claim()
    assert lint is not None and lint.assignment.job_key == "lint"
    lint.start()
    step = lint.assignment.steps[0].id
    lint.step(step, "running")
    lint.log("checking <script>alert('x')</script>\nerror: line too long\n", step)
    lint.log("partial line ", step, "stderr")
    jobs = {key: pipelines.job_id(number, key) for key in ("build", "lint", "test", "deploy")}
    return StandardRun(number, jobs, build.attempt_id, lint)
