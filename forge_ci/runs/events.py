"""Push events into runs (ARCHITECTURE.md, "A push, step by step", step 7).

A worker calls :func:`process_push_event` for each confirmed event. It first claims the event
(one conditional UPDATE: of concurrent deliveries, one wins; see ``forge_ci.pushes.events``), so
an event is planned by one processor at a time and a later delivery only reports what is being
or was done. Every decision is recorded, so a processor taking over from a dead one creates
nothing twice::

    event ─► ignored?        deletion, unchanged ref, not a branch or tag, a tag of no commit
          ─► disabled?       push workflows off, or switched on after this push was recorded
          ─► not_authorized? the pusher is not (any more) an owner/admin/site administrator
          ─► source_missing? the pushed commit is gone (its pin was removed by hand)
          ─► processed:      for each of at most 64 workflow files at the event's commit
                                 invalid      its problems, located
                                 not_matched  the trigger's reason ("inert: release never
                                              fires on forge-ci" for a file without a
                                              trigger forge-ci can fire)
                                 run_created  one run, pinned and numbered
                                 failed       a public reason (details only in the log)

A pushed tag runs the workflows of the commit it names (an annotated tag is peeled); the run's
``github.ref`` is the tag's ref. Notices of a file (what it asks for that forge-ci does not do)
are recorded with its outcome in ``diagnostics``, as errors are for an invalid file.

Each file is decided and recorded in its own serialized transaction under the repository lock,
keyed by (event, path), so a crash or a second worker in the middle leaves every file either
done once or not at all. Temporary trouble (the repository lock is busy, the database is
unreachable) propagates to the caller, which retries later, and the claim is released; the
event stays ``confirmed`` until its result is recorded, so the worker's scan finds it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

import pygit2
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role, role_in
from forge_ci.errors import ForgeCIError, InvalidInput, RepositoryBusy, Unavailable
from forge_ci.models import (
    PushEvent,
    PushEventResult,
    PushEventState,
    PushEventWorkflow,
    Repository,
    Run,
)
from forge_ci.models import push_runs as outcomes
from forge_ci.pushes.events import claim_event, claim_holder, mark_received, release_claim
from forge_ci.refs import is_zero
from forge_ci.runs.create import creating_runs, with_actions
from forge_ci.runs.definition import RunDefinition, define_run
from forge_ci.runs.event_payload import (
    EventFacts,
    RepositoryFacts,
    build_event_payload,
    push_facts,
)
from forge_ci.runs.pins import pinned_commit
from forge_ci.runs.sources import (
    MAX_WORKFLOW_BYTES,
    changed_paths,
    git_repository,
    list_workflow_files,
    read_workflow_file,
)
from forge_ci.runs.transactions import begin_reading, begin_serialized, end_transaction
from forge_ci.settings import Settings

log = logging.getLogger(__name__)

#: How long event processing waits for the repository lock before retrying later instead
#: (a worker must not sit on one busy repository while others wait).
EVENT_LOCK_TIMEOUT = 5.0
PUSH = "push"


@dataclass(frozen=True)
class EventOutcome:
    """What processing decided; ``result`` None when the event is not ready (or unknown)."""

    event_id: int
    result: str | None
    detail: str
    runs: tuple[int, ...] = ()
    #: A later delivery of an event already processed: nothing was done again.
    repeated: bool = False


@dataclass
class _FileDecision:
    outcome: str
    detail: str
    diagnostics: list[dict[str, Any]] | None = None
    definition: RunDefinition | None = field(default=None, repr=False)
    workflow: Any = field(default=None, repr=False)


def process_push_event(
    session: Session, settings: Settings, event_id: int, *, holder: str | None = None
) -> EventOutcome:
    """Turn one push event into runs (see the module docstring). Commits as it goes.

    Claims the event first (``forge_ci.pushes.events.claim_event``): a delivery of an event
    somebody else is processing, or has processed, returns at once without planning anything
    (``repeated`` for the latter). ``holder`` names this processor (default ``host:pid``); a
    processor that stops without a result gives its claim back.

    Raises RepositoryBusy or Unavailable (and SQLAlchemy's connection errors) for trouble that
    a retry may clear; everything else is recorded on the event.
    """
    holder = holder or claim_holder()
    end_transaction(session)
    if not claim_event(session, event_id, holder):
        return _not_claimed(session, event_id)
    try:
        return _process(session, settings, event_id)
    except BaseException:
        _give_up(session, event_id, holder)
        raise


def _not_claimed(session: Session, event_id: int) -> EventOutcome:
    """What a delivery that did not win the claim says (it only reads)."""
    begin_reading(session)
    event = session.get(PushEvent, event_id)
    if event is None:
        return EventOutcome(event_id, None, "no such push event")
    if event.state == PushEventState.RECEIVED.value:
        done = session.get(PushEventResult, event_id)
        if done is not None:
            runs = _run_numbers(session, event_id)
            return EventOutcome(event_id, done.result, done.detail, runs, repeated=True)
        return EventOutcome(event_id, None, "already received", repeated=True)
    if event.state != PushEventState.CONFIRMED.value:
        return EventOutcome(event_id, None, f"the event is {event.state}, not confirmed")
    until = event.claimed_until.isoformat(timespec="seconds") if event.claimed_until else "?"
    return EventOutcome(event_id, None, f"being processed by {event.claimed_by} (until {until})")


def _give_up(session: Session, event_id: int, holder: str) -> None:
    """Release the claim of a processing that stopped without a result (best effort: a claim
    that cannot be released now runs out by itself)."""
    try:
        session.rollback()
        release_claim(session, event_id, holder)
    except Exception:  # the database is what failed, most likely: keep the original error
        log.warning("push event %s: could not release its claim; it runs out", event_id)


def _process(session: Session, settings: Settings, event_id: int) -> EventOutcome:
    """Process an event this caller has claimed."""
    begin_reading(session)  # git and parsing hold no write lock; writes serialize on their own
    event = session.get(PushEvent, event_id)
    if event is None:
        return EventOutcome(event_id, None, "no such push event")
    done = session.get(PushEventResult, event_id)
    if done is not None:  # recorded by a processor that then died before marking it received
        _finish(session, event_id, done.result, done.detail, done.changed_paths_count)
        return EventOutcome(event_id, done.result, done.detail, _run_numbers(session, event_id))
    repository = event.repository
    refusal = _refusal(session, event, repository)
    if refusal is not None:
        result, detail = refusal
        _finish(session, event_id, result, detail, None)
        return EventOutcome(event_id, result, detail)
    git = git_repository(settings, repository)
    found = _source(git, event)
    if found is None:
        detail = f"the pushed commit {event.new_sha[:12]} is no longer in the repository"
        _finish(session, event_id, outcomes.SOURCE_MISSING, detail, None)
        return EventOutcome(event_id, outcomes.SOURCE_MISSING, detail)
    sha = _peeled(git, found)
    if sha is None:
        detail = f"the tag {event.ref} points at no commit, so there is nothing to run"
        _finish(session, event_id, outcomes.IGNORED, detail, None)
        return EventOutcome(event_id, outcomes.IGNORED, detail)
    changed = None
    if event.ref.startswith("refs/heads/"):  # path filters are not evaluated for tags
        changed = changed_paths(git, event.ref, event.old_sha, sha, repository.default_branch)
    files = list_workflow_files(git, sha)
    pusher = Actor.for_user(event.pusher)
    facts = EventFacts(
        RepositoryFacts.of(repository),
        event.ref,
        sha,
        pusher.name,
        push=push_facts(git, event.ref, event.old_sha, sha, repository.default_branch),
    )
    payload = build_event_payload(PUSH, facts)
    context = _EventContext(event, repository, sha, changed, pusher, payload)
    for path in files.paths:
        _process_file(session, settings, git, context, path)
    numbers = _run_numbers(session, event_id)
    detail = _summary(sha, len(files.paths), numbers, files.omitted)
    _finish(
        session,
        event_id,
        outcomes.PROCESSED,
        detail,
        len(changed) if changed is not None else None,
    )
    return EventOutcome(event_id, outcomes.PROCESSED, detail, numbers)


@dataclass(frozen=True)
class _EventContext:
    event: PushEvent
    repository: Repository
    sha: str
    changed: list[str] | None
    pusher: Actor
    #: The push's event payload (github.event), the same for every workflow file.
    payload: dict[str, Any]


def _refusal(session: Session, event: PushEvent, repository: Repository) -> tuple[str, str] | None:
    ref = event.ref
    if not ref.startswith(("refs/heads/", "refs/tags/")):
        return outcomes.IGNORED, f"only branch and tag pushes start workflows, not {ref}"
    kind = "tag" if ref.startswith("refs/tags/") else "branch"
    if is_zero(event.new_sha):
        return outcomes.IGNORED, f"the {kind} was deleted; there is nothing to run"
    if event.old_sha == event.new_sha:
        return outcomes.IGNORED, f"the {kind} did not change"
    if not repository.push_workflows_enabled:
        return outcomes.DISABLED, "push workflows are off for this repository"
    enabled_at = repository.push_workflows_enabled_at
    if enabled_at is None or event.created_at < enabled_at:
        return (
            outcomes.DISABLED,
            "this push was recorded before push workflows were switched on; older pushes "
            "are not replayed",
        )
    # Rechecked now, not when the push happened: a demoted or deactivated pusher runs nothing.
    pusher = event.pusher
    role = role_in(session, Actor.for_user(pusher), repository)
    if role is None or role < Role.ADMIN:
        access = f"{role.label} access" if role is not None else "no access"
        return (
            outcomes.NOT_AUTHORIZED,
            f"{pusher.name} has {access}; only pushes by repository owners, admins and site "
            "administrators run workflows",
        )
    return None


def _source(git: pygit2.Repository, event: PushEvent) -> str | None:
    """The event's exact new object (a commit, or a tag object), as kept by its pin; None when
    it is gone."""
    pin = event.pin_ref
    if pin is not None and pinned_commit(git, pin) == event.new_sha:
        return event.new_sha
    try:
        found = git[event.new_sha]
    except (KeyError, ValueError):
        return None
    return event.new_sha if isinstance(found, pygit2.Commit | pygit2.Tag) else None


def _peeled(git: pygit2.Repository, sha: str) -> str | None:
    """The commit ``sha`` names: itself, or what an annotated tag (chain) points at."""
    try:
        target = git[sha].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return str(target.id)


def _decide_file(git: pygit2.Repository, context: _EventContext, path: str) -> _FileDecision:
    """Read, parse and match one workflow file at the event's commit (no database work)."""
    from forge_ci.workflow import WorkflowInvalid, match_push, parse_workflow

    blob = read_workflow_file(git, context.sha, path)
    if blob.data is None:
        return _FileDecision(
            outcomes.INVALID,
            f"{path}: the file is {blob.size} bytes; the limit is {MAX_WORKFLOW_BYTES} (64 KiB)",
        )
    try:
        workflow = parse_workflow(blob.data, path)
    except WorkflowInvalid as exc:
        return _FileDecision(outcomes.INVALID, exc.message, [d.as_dict() for d in exc.diagnostics])
    notices = [notice.as_dict() for notice in workflow.notices] or None
    match = match_push(workflow, context.event.ref, context.changed)
    if not match:
        return _FileDecision(outcomes.NOT_MATCHED, match.reason, notices)
    try:
        definition = define_run(
            workflow,
            blob.data,
            repository=context.repository.full_name,
            sha=context.sha,
            ref=context.event.ref,
            event_name=PUSH,
            event=context.payload,
            actor=context.pusher.name,
        )
    except InvalidInput as exc:
        return _FileDecision(outcomes.INVALID, f"{path}: {exc.message}")
    return _FileDecision(
        outcomes.RUN_CREATED, match.reason, notices, definition=definition, workflow=workflow
    )


def _recorded(session: Session, event_id: int, path: str) -> bool:
    return (
        session.scalar(
            select(PushEventWorkflow.id).where(
                PushEventWorkflow.push_event_id == event_id,
                PushEventWorkflow.workflow_path == path,
            )
        )
        is not None
    )


def _process_file(
    session: Session,
    settings: Settings,
    git: pygit2.Repository,
    context: _EventContext,
    path: str,
) -> None:
    event_id = context.event.id
    begin_reading(session)
    if _recorded(session, event_id, path):
        return
    decision = _decide_file(git, context, path)
    if decision.definition is not None:
        decision = _resolve_actions(session, settings, git, context, path, decision)
    try:
        with creating_runs(
            session, settings, context.repository, lock_timeout=EVENT_LOCK_TIMEOUT
        ) as creation:
            if _recorded(session, event_id, path):  # another worker got here first
                return
            if decision.definition is not None and not creation.repository().push_workflows_enabled:
                # Switched off while this event was being processed: no new runs from now on.
                decision = _FileDecision(
                    outcomes.FAILED, "push workflows were switched off before its run was created"
                )
            run = None
            if decision.definition is not None:
                run = creation.create(context.pusher, decision.definition)
            session.add(_outcome_row(event_id, path, decision, run))
    except (RepositoryBusy, Unavailable):
        raise
    except ForgeCIError as exc:
        # Refused by a rule (the pusher lost their role meanwhile, say): recorded, not retried.
        _record_failure(session, settings, context, path, exc.message)
    except Exception as exc:
        if _is_connection_error(exc):
            raise
        log.exception("push event %s: creating a run of %s failed", event_id, path)
        _record_failure(
            session, settings, context, path, "a run could not be created (internal error)"
        )


def _resolve_actions(
    session: Session,
    settings: Settings,
    git: pygit2.Repository,
    context: _EventContext,
    path: str,
    decision: _FileDecision,
) -> _FileDecision:
    """Resolve the file's actions before the run is created; a failure is a located diagnostic."""
    from forge_ci.workflow import WorkflowInvalid

    assert decision.definition is not None
    try:
        definition = with_actions(
            session, settings, context.pusher, git, decision.definition, decision.workflow
        )
    except WorkflowInvalid as exc:
        return _FileDecision(outcomes.INVALID, exc.message, [d.as_dict() for d in exc.diagnostics])
    return replace(decision, definition=definition)


def _is_connection_error(exc: Exception) -> bool:
    from sqlalchemy import exc as sa_exc

    return isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError)


def _record_failure(
    session: Session, settings: Settings, context: _EventContext, path: str, detail: str
) -> None:
    with creating_runs(session, settings, context.repository, lock_timeout=EVENT_LOCK_TIMEOUT):
        if not _recorded(session, context.event.id, path):
            session.add(
                PushEventWorkflow(
                    push_event_id=context.event.id,
                    workflow_path=path,
                    outcome=outcomes.FAILED,
                    detail=detail,
                )
            )


def _outcome_row(
    event_id: int, path: str, decision: _FileDecision, run: Run | None
) -> PushEventWorkflow:
    return PushEventWorkflow(
        push_event_id=event_id,
        workflow_path=path,
        outcome=decision.outcome,
        detail=decision.detail,
        diagnostics=decision.diagnostics,
        run_id=run.id if run is not None else None,
    )


def _run_numbers(session: Session, event_id: int) -> tuple[int, ...]:
    return tuple(
        session.scalars(
            select(Run.number)
            .join(PushEventWorkflow, PushEventWorkflow.run_id == Run.id)
            .where(PushEventWorkflow.push_event_id == event_id)
            .order_by(Run.number)
        )
    )


def _summary(sha: str, inspected: int, numbers: tuple[int, ...], omitted: tuple[str, ...]) -> str:
    if inspected == 0:
        text = f"no workflow files at {sha[:12]}"
    else:
        files = "file" if inspected == 1 else "files"
        created = ", ".join(f"#{n}" for n in numbers) if numbers else "none"
        text = f"{inspected} workflow {files} inspected at {sha[:12]}; runs created: {created}"
    if omitted:
        text += (
            f"; {len(omitted)} more workflow files were not inspected (at most 64 are): "
            + ", ".join(omitted[:5])
            + (" ..." if len(omitted) > 5 else "")
        )
    return text


def _finish(session: Session, event_id: int, result: str, detail: str, changed: int | None) -> None:
    """Record the event's result (once) and mark it received, in one transaction."""
    begin_serialized(session)
    # The event row's lock makes a second worker wait here and then see the first one's result.
    session.get(PushEvent, event_id, with_for_update=True, populate_existing=True)
    if session.get(PushEventResult, event_id, populate_existing=True) is None:
        session.add(
            PushEventResult(
                push_event_id=event_id,
                result=result,
                detail=detail,
                changed_paths_count=changed,
            )
        )
    mark_received(session, event_id)
    session.commit()
