"""Creating runs: pin the source, number the run, store its snapshot and jobs, admit it.

The order matters (seed: "Persistence and Authorization")::

    repository lock ──► BEGIN (serialized) ──► recheck authorization ──► resolve checkout refs
    (:mod:`forge_ci.runs.checkouts`) ──► pin commit under refs/forge-ci/pipelines/<token> (and
    the checkouts' other commits beside it) ──► next number ──► insert run + jobs ──► admit (group,
    roots queued/skipped) ──► COMMIT ──► release lock
                          any failure: ROLLBACK, delete the pins made, re-raise

so a committed run always has its pin, a failed creation leaves neither pin nor rows, and run
numbers stay gapless. Several runs may be created in one :func:`creating_runs` block (they
commit together); push-event processing uses one block per workflow file and records the
file's outcome inside it, which is what makes replay idempotent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import pygit2
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role, require_role
from forge_ci.errors import NotFound
from forge_ci.locks import repository_lock
from forge_ci.models import Job, JobDependency, Repository, Run, utcnow
from forge_ci.runs.actions import Resolver, action_uses
from forge_ci.runs.checkouts import pin_checkouts, resolve_checkouts
from forge_ci.runs.definition import RunDefinition
from forge_ci.runs.numbering import next_run_number
from forge_ci.runs.pins import create_pin, delete_pin
from forge_ci.runs.scheduling import admit_run, reuse_result
from forge_ci.runs.sources import git_repository
from forge_ci.runs.transactions import begin_serialized, end_transaction
from forge_ci.secrets.policy import plan_secrets, require_secrets
from forge_ci.settings import Settings

if TYPE_CHECKING:
    from forge_ci.workflow import Workflow


def require_run_creator(session: Session, actor: Actor, repository: Repository) -> None:
    """Only current repository owners/admins and site administrators make the server run code.

    Ordinary contributors (write role) may push, but their pushes never start runs.
    """
    require_role(session, actor, repository, Role.ADMIN)


class RunCreation:
    """Creates runs inside one serialized transaction of one repository (see module doc)."""

    def __init__(self, session: Session, repository_id: int, git: pygit2.Repository) -> None:
        self.session = session
        self.repository_id = repository_id
        self.git = git
        self.pins: list[str] = []

    def repository(self) -> Repository:
        """The repository as it is now, inside the transaction."""
        repository = self.session.scalar(
            select(Repository)
            .where(Repository.id == self.repository_id)
            .execution_options(populate_existing=True)
        )
        if repository is None:
            raise NotFound("the repository no longer exists")
        return repository

    def create(
        self,
        actor: Actor,
        definition: RunDefinition,
        *,
        rerun_of: Run | None = None,
        reuse: Mapping[int, Job] | None = None,
    ) -> Run:
        """Create one run of ``definition`` requested by ``actor``.

        ``reuse`` maps plan positions to jobs of ``rerun_of`` whose results the new run keeps
        (``rerun --failed``); every other job starts afresh.
        """
        session = self.session
        repository = self.repository()
        # Rechecked here, after the git reads and under the lock: a demoted or deactivated
        # requester creates nothing.
        require_run_creator(session, actor, repository)
        # A secret it may not receive fails the request, never an empty value at run time.
        require_secrets(
            session,
            repository.id,
            definition.event_name,
            definition.ref,
            definition.workflow_path,
            plan_secrets(definition.plan),
        )
        definition = resolve_checkouts(self.git, definition, repository.full_name)
        pin = create_pin(self.git, definition.sha)
        self.pins.append(pin)
        self.pins.extend(pin_checkouts(self.git, definition, pin))
        now = utcnow()
        run = Run(
            repository_id=repository.id,
            number=next_run_number(session, repository.id),
            workflow_path=definition.workflow_path,
            workflow_name=definition.workflow_name,
            event_name=definition.event_name,
            ref=definition.ref,
            sha=definition.sha,
            pin_ref=pin,
            workflow_source=definition.source,
            plan=definition.plan,
            plan_version=definition.plan_version,
            plan_digest=definition.plan_digest,
            context=definition.context,
            actions=definition.actions,
            concurrency_group=definition.concurrency_group,
            concurrency_key=definition.concurrency_key,
            cancel_in_progress=definition.cancel_in_progress,
            state=states.QUEUED,
            requested_by_id=actor.user_id,
            requested_by_name=actor.name[:40],
            rerun_of_id=rerun_of.id if rerun_of is not None else None,
            created_at=now,
        )
        session.add(run)
        insert_jobs(session, run)
        if reuse:
            assert rerun_of is not None
            for job in run.jobs:
                source = reuse.get(job.position)
                if source is not None:
                    reuse_result(job, source, rerun_of.number, now)
        admit_run(session, run, now)
        session.flush()
        return run


def with_actions(
    session: Session,
    settings: Settings,
    actor: Actor,
    git: pygit2.Repository,
    definition: RunDefinition,
    workflow: Workflow,
) -> RunDefinition:
    """``definition`` with its ``uses:`` actions resolved and pinned (forge_ci.runs.actions).

    Runs before the run's own transaction: it may fetch from upstream sources, which must not
    hold the repository lock. Raises WorkflowInvalid naming every reference that fails.
    """
    uses = action_uses(workflow)
    if not uses:
        return definition
    resolver = Resolver(session, settings, actor, git, definition.sha)
    return replace(definition, actions=resolver.resolve(definition.workflow_path, uses))


#: Job names resolved from a template are cut here (a commit message can be long).
MAX_JOB_NAME = 1024


def job_name(value: object, context: Mapping[str, object]) -> str:
    """A planned job name as text: a template over github/inputs/vars is evaluated now, once.

    The plan keeps the template (reruns resolve it from the same snapshot, to the same text);
    a part that cannot be evaluated shows as written.
    """
    from forge_ci.runs.event_payload import queue_contexts
    from forge_ci.workflow.expressions import ExpressionError, evaluate, parse_expression
    from forge_ci.workflow.expressions import to_string as expression_text

    if isinstance(value, str):
        return value
    parts: list[str] = []
    template = value.get("template", []) if isinstance(value, dict) else []
    contexts = queue_contexts(context)
    for part in template:
        if isinstance(part, str):
            parts.append(part)
            continue
        source = str(part.get("expr", ""))
        try:
            parts.append(expression_text(evaluate(parse_expression(source), contexts)))
        except ExpressionError:
            parts.append("${{ " + source + " }}")
    return "".join(parts)[:MAX_JOB_NAME]


def insert_jobs(session: Session, run: Run) -> list[Job]:
    """One waiting job per plan instance, and an edge to every instance of each job it needs."""
    jobs: list[Job] = []
    for position, entry in enumerate(run.plan["jobs"]):
        job = Job(
            position=position,
            key=str(entry["key"]),
            job_id=str(entry["id"]),
            name=job_name(entry["name"], run.context),
            needs=[str(need) for need in entry.get("needs", [])],
            runs_on=[str(label) for label in entry.get("runs_on", [])],
            plan=entry,
            state=states.WAITING,
        )
        run.jobs.append(job)
        jobs.append(job)
    session.flush()
    instances: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        instances[job.job_id].append(job)
    for job in jobs:
        for need in job.needs:
            for dependency in instances[need]:
                session.add(JobDependency(job_id=job.id, needs_id=dependency.id))
    session.flush()
    return jobs


@contextmanager
def creating_runs(
    session: Session,
    settings: Settings,
    repository: Repository,
    *,
    lock_timeout: float | None = None,
) -> Iterator[RunCreation]:
    """Hold the repository lock and a serialized transaction; commit at the end of the block.

    An exception in the block rolls the transaction back and deletes the pins made in it (a
    failing commit keeps them). The
    session's earlier transaction (the caller's lookups) is ended first; see
    :func:`forge_ci.runs.transactions.begin_serialized`. RepositoryBusy when the lock is not
    free within ``lock_timeout`` (default: the configured repository lock timeout).
    """
    repository_id = repository.id
    git = git_repository(settings, repository)
    timeout = settings.repo_lock_timeout if lock_timeout is None else lock_timeout
    full_name = repository.full_name
    end_transaction(session)  # the lookups' transaction must not wait for the lock (lock order)
    with repository_lock(settings.locks_dir, repository_id, full_name, timeout):
        begin_serialized(session)
        creation = RunCreation(session, repository_id, git)
        try:
            yield creation
        except BaseException:
            session.rollback()
            for pin in creation.pins:
                delete_pin(git, pin)
            raise
        # Outside the handler: a failing COMMIT may still have committed (the connection was
        # lost waiting for its answer), so the pins stay. An orphan pin is harmless; a
        # committed run whose pin was deleted could lose its commit to a force push and gc.
        try:
            session.commit()
        except BaseException:
            session.rollback()
            raise
