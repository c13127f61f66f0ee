"""Scheduled runs: ``on: schedule`` workflows of the default branch, once per matching minute.

The worker's :class:`forge_ci.runs.scheduler.Scheduler` calls :func:`fire_minute` for each UTC
minute while it is up; any number of workers may call it for the same minute::

    minute ─► each repository with scheduled workflows switched on
            ─► the default branch's current commit; each workflow file there (at most 64)
               whose on.schedule has a cron matching the minute (first matching entry)
            ─► already decided?   (repository, path, minute) has a row: nothing to do
            ─► not_authorized?    the person who switched scheduled workflows on is no longer
                                  an owner/admin (or was deactivated or deleted): no run
            ─► run_created        one run, pinned and numbered, requested by that person

The decision and the run are written in one serialized transaction under the repository lock,
and the row's unique key makes a second worker's insert fail instead of creating a second run,
so a minute fires at most once across restarts and workers. Minutes for which no worker was up
are never looked at, so they are not replayed. Invalid workflow files are not scheduled (their
problems are shown on push events and by ``forge-ci workflow validate``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pygit2
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role, role_in
from forge_ci.errors import ForgeCIError, RepositoryBusy, Unavailable
from forge_ci.models import Repository, ScheduledMinute
from forge_ci.models import schedules as outcomes
from forge_ci.runs.blob_answers import BlobAnswers
from forge_ci.runs.create import creating_runs
from forge_ci.runs.definition import define_run
from forge_ci.runs.event_payload import EventFacts, RepositoryFacts, build_event_payload
from forge_ci.runs.sources import git_repository, list_workflow_files, resolve_branch
from forge_ci.runs.transactions import begin_reading
from forge_ci.settings import Settings

if TYPE_CHECKING:
    from forge_ci.workflow import Workflow

log = logging.getLogger(__name__)

SCHEDULE = "schedule"
#: How long one repository's lock is waited for before the minute is retried on the next tick.
SCHEDULE_LOCK_TIMEOUT = 5.0


def floor_minute(when: datetime) -> datetime:
    """The minute ``when`` falls in (seconds and microseconds dropped)."""
    return when.replace(second=0, microsecond=0)


@dataclass(frozen=True)
class MinuteOutcome:
    """What one workflow's scheduled minute came to; ``outcome`` None: decided elsewhere."""

    repository: str
    workflow_path: str
    minute: datetime
    outcome: str | None
    detail: str
    run_number: int | None = None


def scheduled_repository_ids(session: Session) -> list[int]:
    """Repositories whose owners/admins switched scheduled workflows on."""
    return list(
        session.scalars(
            select(Repository.id)
            .where(Repository.scheduled_workflows_enabled.is_(True))
            .order_by(Repository.id)
        )
    )


def fire_minute(session: Session, settings: Settings, minute: datetime) -> list[MinuteOutcome]:
    """Create the runs scheduled for ``minute`` (UTC, whole minute) in every repository.

    Idempotent (see the module docstring). Raises RepositoryBusy or Unavailable (and
    SQLAlchemy's connection errors) when a repository could not be decided; the caller retries
    the same minute, and what was decided before stays decided.
    """
    minute = floor_minute(minute)
    begin_reading(session)
    decided: list[MinuteOutcome] = []
    for repository_id in scheduled_repository_ids(session):
        decided.extend(fire_repository(session, settings, repository_id, minute))
    return decided


def fire_repository(
    session: Session, settings: Settings, repository_id: int, minute: datetime
) -> list[MinuteOutcome]:
    """:func:`fire_minute` for one repository."""
    begin_reading(session)
    repository = session.get(Repository, repository_id, populate_existing=True)
    if repository is None or not repository.scheduled_workflows_enabled:
        return []
    git = git_repository(settings, repository)
    try:
        sha = resolve_branch(git, repository.default_branch)
    except ForgeCIError:
        return []  # no default branch yet: nothing is scheduled
    decided: list[MinuteOutcome] = []
    for path in list_workflow_files(git, sha).paths:
        due = _due(git, sha, path, minute)
        if due is None:
            continue
        workflow, data, cron = due
        outcome = _fire(session, settings, repository, sha, path, minute, workflow, data, cron)
        if outcome is not None:
            decided.append(outcome)
    return decided


def _fire(
    session: Session,
    settings: Settings,
    repository: Repository,
    sha: str,
    path: str,
    minute: datetime,
    workflow: Workflow,
    data: bytes,
    cron: str,
) -> MinuteOutcome | None:
    full_name = repository.full_name
    begin_reading(session)
    if _recorded(session, repository.id, path, minute):
        return None
    ref = f"refs/heads/{repository.default_branch}"
    row = ScheduledMinute(
        repository_id=repository.id, workflow_path=path, minute=minute, cron=cron[:255]
    )
    try:
        with creating_runs(
            session, settings, repository, lock_timeout=SCHEDULE_LOCK_TIMEOUT
        ) as creation:
            if _recorded(session, repository.id, path, minute):
                return None  # another worker decided it while this one waited for the lock
            current = creation.repository()
            if not current.scheduled_workflows_enabled:
                return None  # switched off meanwhile
            refusal, requester = _requester(session, current)
            run = None
            if requester is None:
                row.outcome, row.detail = outcomes.NOT_AUTHORIZED, refusal
            else:
                facts = EventFacts(
                    RepositoryFacts.of(current), ref, sha, requester.name, schedule=cron
                )
                definition = define_run(
                    workflow,
                    data,
                    repository=full_name,
                    sha=sha,
                    ref=ref,
                    event_name=SCHEDULE,
                    event=build_event_payload(SCHEDULE, facts),
                    actor=requester.name,
                )
                run = creation.create(requester, definition)
                row.outcome = outcomes.RUN_CREATED
                row.detail = f"'{cron}' matched {minute:%Y-%m-%d %H:%M} UTC at {sha[:12]}"
                row.run_id = run.id
            session.add(row)
            session.flush()
            number = run.number if run is not None else None
    except IntegrityError:
        # Another worker (another machine: the repository lock is per host) inserted the same
        # minute first; its decision stands and this transaction left nothing behind.
        log.info("%s %s at %s: decided by another worker", full_name, path, minute)
        return MinuteOutcome(full_name, path, minute, None, "decided by another worker")
    except (RepositoryBusy, Unavailable):
        raise
    except ForgeCIError as exc:
        # Refused by a rule at creation (the requester lost their role under the lock, an
        # invalid context): recorded, never retried.
        return _record_failure(session, settings, repository, path, minute, cron, exc.message)
    return MinuteOutcome(full_name, path, minute, row.outcome, row.detail, number)


def _requester(session: Session, repository: Repository) -> tuple[str, Actor | None]:
    """The actor scheduled runs are requested by, or why there is none now."""
    user = repository.scheduled_workflows_requester
    if user is None:
        return (
            "the person who switched scheduled workflows on no longer exists; an owner or "
            "admin must switch them on again",
            None,
        )
    actor = Actor.for_user(user)
    role = role_in(session, actor, repository)
    if role is None or role < Role.ADMIN:
        access = f"{role.label} access" if role is not None else "no access"
        return (
            f"{user.name}, who switched scheduled workflows on, now has {access}; scheduled "
            "runs need an owner or admin: one must switch them on again",
            None,
        )
    return "", actor


def _record_failure(
    session: Session,
    settings: Settings,
    repository: Repository,
    path: str,
    minute: datetime,
    cron: str,
    detail: str,
) -> MinuteOutcome | None:
    try:
        with creating_runs(session, settings, repository, lock_timeout=SCHEDULE_LOCK_TIMEOUT):
            if _recorded(session, repository.id, path, minute):
                return None
            session.add(
                ScheduledMinute(
                    repository_id=repository.id,
                    workflow_path=path,
                    minute=minute,
                    cron=cron[:255],
                    outcome=outcomes.FAILED,
                    detail=detail,
                )
            )
    except IntegrityError:
        return None
    return MinuteOutcome(repository.full_name, path, minute, outcomes.FAILED, detail)


def _recorded(session: Session, repository_id: int, path: str, minute: datetime) -> bool:
    found = session.scalar(
        select(ScheduledMinute.id).where(
            ScheduledMinute.repository_id == repository_id,
            ScheduledMinute.workflow_path == path,
            ScheduledMinute.minute == minute,
        )
    )
    return found is not None


def _scheduled_workflow(data: bytes, path: str) -> Workflow | None:
    """The parsed workflow when it is valid and has on.schedule, else None."""
    from forge_ci.workflow import parse_workflow

    try:
        workflow = parse_workflow(data, path)
    except ForgeCIError:
        return None
    return workflow if workflow.triggers.schedule else None


#: The scheduler looks at every workflow file each minute; most have not changed.
_SCHEDULED: BlobAnswers[Workflow | None] = BlobAnswers(_scheduled_workflow)


def _due(
    git: pygit2.Repository, sha: str, path: str, minute: datetime
) -> tuple[Workflow, bytes, str] | None:
    """The workflow at ``path`` and its first cron entry matching ``minute``, if any."""
    found = _SCHEDULED.answer(git, sha, path)
    if found is None:
        return None
    workflow, data = found
    if workflow is None:
        return None
    for entry in workflow.triggers.schedule:
        if entry.matches(minute):
            return workflow, data, entry.text
    return None


def recent_scheduled_minutes(
    session: Session, actor: Actor, full_name: str, limit: int = 20
) -> list[ScheduledMinute]:
    """The latest scheduled minutes of ``full_name`` and what each came to (readers may look)."""
    from forge_ci.repos import find_repository

    repository = find_repository(session, actor, full_name, Role.READ)
    return list(
        session.scalars(
            select(ScheduledMinute)
            .where(ScheduledMinute.repository_id == repository.id)
            .order_by(ScheduledMinute.minute.desc(), ScheduledMinute.id.desc())
            .limit(limit)
        )
    )
