"""A small world for coordinator tests: people, repositories, providers, queued runs, a clock.

Runs are inserted through the runs scheduler (``insert_jobs`` + ``admit_run``) with a synthetic
plan, so tests do not need git; one test elsewhere goes through a real workflow dispatch.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.secrets import SecretSource
from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database, begin_write
from forge_ci.models import Attempt, Job, Repository, Run, User
from forge_ci.protocol import (
    Assignment,
    ClaimRequest,
    CompleteRequest,
    HeartbeatRequest,
    LogRequest,
    SecretsRequest,
    StartRequest,
    StepRequest,
)
from forge_ci.repos import create_repository, grant
from forge_ci.runs.create import insert_jobs
from forge_ci.runs.numbering import next_run_number
from forge_ci.runs.scheduling import admit_run
from forge_ci.settings import Settings

OPERATOR = Actor.operator()
LINUX = ("self-hosted", "linux")


class Clock:
    """A hand-driven clock for the coordinator (leases, deadlines, grace)."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def step(step_id: str, run: str = "true", **extra: Any) -> dict[str, Any]:
    return {
        "id": step_id,
        "generated_id": False,
        "name": extra.pop("name", f"Run {run}"),
        "uses": None,
        "run": run,
        "shell": None,
        "working_directory": None,
        "env": extra.pop("env", {}),
        "if": "success()",
        "continue_on_error": extra.pop("continue_on_error", False),
        "timeout_minutes": None,
        **extra,
    }


def plan_job(
    key: str = "build",
    steps: tuple[str, ...] = ("compile", "test"),
    runs_on: tuple[str, ...] = LINUX,
    timeout_minutes: int = 10,
    needs: tuple[str, ...] = (),
    outputs: dict[str, Any] | None = None,
    step_specs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "key": key,
        "id": key,
        "name": key,
        "needs": list(needs),
        "if": "success()",
        "runs_on": list(runs_on),
        "timeout_minutes": timeout_minutes,
        "permissions": {"contents": "read"},
        "matrix": None,
        "strategy": None,
        "outputs": outputs or {},
        "steps": step_specs if step_specs is not None else [step(s) for s in steps],
    }


@dataclass
class Claimed:
    """What a provider keeps after a claim: the assignment and the attempt credential."""

    assignment: Assignment
    token: str
    request_id: str
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def id(self) -> int:
        return self.assignment.attempt_id


class World:
    """Database, settings, clock and coordinator, with helpers to build and drive scenarios."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self.database = database
        self.settings = settings
        self.clock = Clock()
        self.secret_source: SecretSource | None = None
        self.coordinator = self.make_coordinator()
        with self.session() as session:
            create_user(session, OPERATOR, "alice", None)
            create_user(session, OPERATOR, "bob", None)
            create_repository(session, settings, OPERATOR, "alice/app")
            create_repository(session, settings, OPERATOR, "bob/lib")
            grant(session, OPERATOR, "bob/lib", "alice", Role.ADMIN)
            session.commit()
        self.provider_token = self.add_provider("p1", scope="all")

    def make_coordinator(self, **kwargs: Any) -> Coordinator:
        return Coordinator(
            self.database.session,
            self.settings,
            clock=self.clock,
            secret_source=self.secret_source,
            **kwargs,
        )

    def session(self, *, read_only: bool = False) -> Any:
        return self.database.session(read_only=read_only)

    def user_id(self, name: str) -> int:
        with self.session() as session:
            user = session.scalar(select(User).where(User.name == name))
            assert user is not None
            return user.id

    def add_provider(
        self,
        name: str,
        labels: str = "self-hosted,linux",
        scope: str = "selected",
        repositories: tuple[str, ...] = (),
    ) -> str:
        token = new_token()
        with self.session() as session:
            create_provider(session, OPERATOR, name, token, labels, scope, repositories)
            session.commit()
        return token

    def queue_run(
        self,
        *jobs: dict[str, Any],
        repository: str = "alice/app",
        requester: str | None = "alice",
        workflow_path: str = ".forge-ci/workflows/ci.yml",
        event_name: str = "workflow_dispatch",
        ref: str = "refs/heads/main",
    ) -> int:
        """Create a run of ``jobs`` (admitted: roots queued) and return its id."""
        jobs = jobs or (plan_job(),)
        owner, name = repository.split("/")
        plan = {
            "version": 1,
            "name": "ci",
            "on": {"workflow_dispatch": {}},
            "concurrency": None,
            "jobs": list(jobs),
        }
        with self.session() as session:
            begin_write(session)
            repo = session.scalar(
                select(Repository)
                .join(Repository.owner)
                .where(User.name == owner, Repository.name == name)
            )
            assert repo is not None
            user = session.scalar(select(User).where(User.name == requester)) if requester else None
            run = Run(
                repository_id=repo.id,
                number=next_run_number(session, repo.id),
                workflow_path=workflow_path,
                workflow_name="ci",
                event_name=event_name,
                ref=ref,
                sha="a" * 40,
                pin_ref=f"refs/forge-ci/pipelines/{uuid.uuid4().hex}",
                workflow_source="on: workflow_dispatch\n",
                plan=plan,
                plan_version=1,
                plan_digest=hashlib.sha256(json.dumps(plan).encode()).hexdigest(),
                context={
                    "repository": repository,
                    "sha": "a" * 40,
                    "event_name": "workflow_dispatch",
                    "head_ref": "",
                    "base_ref": "",
                },
                state="queued",
                requested_by_id=user.id if user else None,
                requested_by_name=user.name if user else "operator",
                created_at=self.clock(),
            )
            session.add(run)
            insert_jobs(session, run)
            admit_run(session, run, self.clock())
            session.commit()
            return run.id

    # -- protocol shortcuts --------------------------------------------------------------------

    def claim(
        self,
        provider_token: str | None = None,
        request_id: str | None = None,
        attempt_token: str | None = None,
    ) -> Claimed | None:
        request = ClaimRequest(request_id or new_request_id(), attempt_token or new_token(), 0)
        result = self.coordinator.claim(provider_token or self.provider_token, request)
        if result.assignment is None:
            return None
        return Claimed(result.assignment, request.attempt_token, request.request_id)

    def start(self, claimed: Claimed) -> Any:
        return self.coordinator.start(claimed.token, claimed.id, StartRequest(claimed.execution_id))

    def heartbeat(self, claimed: Claimed) -> Any:
        return self.coordinator.heartbeat(
            claimed.token, claimed.id, HeartbeatRequest(claimed.execution_id)
        )

    def step(
        self,
        claimed: Claimed,
        step_id: str,
        state: str,
        conclusion: str = "",
        exit_code: int = -1,
        continue_on_error: bool = False,
    ) -> Any:
        return self.coordinator.step(
            claimed.token,
            claimed.id,
            StepRequest(
                claimed.execution_id, step_id, state, conclusion, exit_code, continue_on_error
            ),
        )

    def secrets(self, claimed: Claimed, step_id: str, token: str | None = None) -> dict[str, str]:
        """The secret env values of a running step (``POST attempts/<id>/secrets``)."""
        env, _ = self.coordinator.secrets(
            token or claimed.token, claimed.id, SecretsRequest(claimed.execution_id, step_id)
        )
        return env

    def log(
        self, claimed: Claimed, sequence: int, text: str, step_id: str = "", stream: str = "stdout"
    ) -> Any:
        return self.coordinator.log(
            claimed.token,
            claimed.id,
            LogRequest(claimed.execution_id, sequence, step_id, stream, text),
        )

    def complete(
        self,
        claimed: Claimed,
        conclusion: str = "success",
        last_log_sequence: int | None = None,
        outputs: dict[str, str] | None = None,
    ) -> Any:
        if last_log_sequence is None:
            last_log_sequence = self.attempt(claimed.id).acknowledged_sequence
        return self.coordinator.complete(
            claimed.token,
            claimed.id,
            CompleteRequest(claimed.execution_id, conclusion, last_log_sequence, outputs or {}),
        )

    def run_steps(self, claimed: Claimed, conclusion: str = "success") -> None:
        for wire_step in claimed.assignment.steps:
            self.step(claimed, wire_step.id, "running")
            self.step(claimed, wire_step.id, "completed", conclusion, 0)

    # -- reading back --------------------------------------------------------------------------

    def attempt(self, attempt_id: int) -> Attempt:
        with self.session() as session:
            attempt = session.get(Attempt, attempt_id)
            assert attempt is not None
            session.expunge(attempt)
            return attempt

    def job(self, job_id: int) -> Job:
        with self.session() as session:
            job = session.get(Job, job_id)
            assert job is not None
            session.expunge(job)
            return job

    def jobs_of(self, run_id: int) -> list[Job]:
        with self.session(read_only=True) as session:
            jobs = list(session.scalars(select(Job).where(Job.run_id == run_id).order_by(Job.id)))
            for job in jobs:
                session.expunge(job)
            return jobs

    def run(self, run_id: int) -> Run:
        with self.session(read_only=True) as session:
            run = session.get(Run, run_id)
            assert run is not None
            session.expunge(run)
            return run

    def count(self, model: type[Any]) -> int:
        with self.session() as session:
            return len(session.scalars(select(model)).all())

    def in_session(self, fn: Any) -> Any:
        """Run ``fn(session)`` in a write transaction and commit."""
        with self.session() as session:
            begin_write(session)
            result = fn(session)
            session.commit()
            return result
