"""The DAG scheduler: how jobs move, and how a run's state follows from its jobs.

::

    created ─► waiting ──(deps done, if true, capacity)──► queued ──(claim)──► running
                  │                                           │                  │
                  └──(if false / dep failed: skipped)────────►│◄─────────────────┘
                     (if errors: failure; cancel: cancelled)   ▼
                                                           completed (+ conclusion)

A running job whose attempt never started (no runner called ``start``) goes back to queued.

Every move goes through :func:`forge_ci.states.require_transition`, so a completed job or run
never changes again. Decisions happen in the transaction that caused them: when a job
completes, its dependents are evaluated, skips propagate through deeper branches, fail-fast
cancels matrix siblings, the run's state is derived again and a finished run releases its
concurrency group, all before the caller commits.

Entry points for the runner protocol (call them inside a write transaction, i.e. after
:func:`forge_ci.db.begin_write`, and commit afterwards):

    start_job(session, job)                         queued -> running (the run becomes running)
    complete_job(session, job, conclusion, outputs) records outputs, advances dependents
    request_job_cancel(session, job, reason)        queued/waiting: cancelled now; running:
                                                    durable request the protocol acts on
    requeue_job(session, job)                       running -> queued (its attempt never started)

All of them lock the repository's scheduling row, then the run row (lock order in
:mod:`forge_ci.runs.numbering`), and reload the run's jobs, so concurrent completions in one
run never decide on stale state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.errors import Conflict, InvalidInput, NotFound
from forge_ci.models import Job, JobDependency, JobOutput, Run, utcnow
from forge_ci.runs import concurrency
from forge_ci.runs.conditions import (
    DEFAULT_CONDITION,
    NeedsEntry,
    decide,
    forgives,
    may_run_after_cancel,
    summarize,
)
from forge_ci.runs.numbering import lock_repository_runs

#: A failed matrix leg with these conclusions triggers fail-fast.
FAIL_FAST_CONCLUSIONS = frozenset({states.FAILURE, states.TIMED_OUT, states.LOST})
#: A job with continue-on-error: true that ends with one of these counts as a success.
FORGIVABLE_CONCLUSIONS = frozenset({states.FAILURE, states.TIMED_OUT})
#: What one job may publish as outputs in total (GitHub's limit is 1 MB per job).
MAX_OUTPUTS_BYTES = 1024 * 1024


# --- locking ----------------------------------------------------------------------------------


def lock_run(session: Session, run_id: int) -> Run:
    """Lock the run's repository scheduling row and the run row; reload the run and its jobs."""
    repository_id = session.scalar(select(Run.repository_id).where(Run.id == run_id))
    if repository_id is None:
        raise NotFound(f"run {run_id} not found")
    lock_repository_runs(session, repository_id)
    return _lock_run_row(session, run_id)


def _lock_run_row(session: Session, run_id: int) -> Run:
    run = session.scalar(
        select(Run)
        .where(Run.id == run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    assert run is not None
    session.scalars(
        select(Job).where(Job.run_id == run_id).execution_options(populate_existing=True)
    ).all()
    return run


# --- the graph --------------------------------------------------------------------------------


class RunGraph:
    """The jobs of one run with their dependency edges (matrix needs fan out to every leg)."""

    def __init__(self, session: Session, run: Run) -> None:
        self.jobs: list[Job] = sorted(run.jobs, key=lambda job: job.position)
        self.by_pk = {job.id: job for job in self.jobs}
        self.by_job_id: dict[str, list[Job]] = defaultdict(list)
        for job in self.jobs:
            self.by_job_id[job.job_id].append(job)
        self.deps: dict[int, list[Job]] = defaultdict(list)
        edges = session.execute(
            select(JobDependency.job_id, JobDependency.needs_id)
            .join(Job, Job.id == JobDependency.job_id)
            .where(Job.run_id == run.id)
        )
        for job_pk, needs_pk in edges:
            self.deps[job_pk].append(self.by_pk[needs_pk])
        for deps in self.deps.values():
            deps.sort(key=lambda job: job.position)

    def ancestors(self, job: Job) -> list[Job]:
        """Every job ``job`` transitively depends on, in plan order."""
        seen: dict[int, Job] = {}
        stack = list(self.deps[job.id])
        while stack:
            dep = stack.pop()
            if dep.id not in seen:
                seen[dep.id] = dep
                stack.extend(self.deps[dep.id])
        return sorted(seen.values(), key=lambda j: j.position)

    def needs_context(self, job: Job) -> dict[str, NeedsEntry]:
        """``needs.<id>`` for each job id ``job`` needs (all of whose instances completed)."""
        entries: dict[str, NeedsEntry] = {}
        for need in job.needs:
            instances = self.by_job_id.get(need, [])
            outputs: dict[str, str] = {}
            for instance in instances:
                outputs.update({output.name: output.value for output in instance.outputs})
            conclusions = [i.conclusion for i in instances if i.conclusion is not None]
            entries[need] = NeedsEntry(summarize(conclusions), outputs)
        return entries


# --- moving one job ---------------------------------------------------------------------------


def _move(
    job: Job,
    new: str,
    now: datetime,
    conclusion: str | None = None,
    reason: str | None = None,
) -> None:
    states.require_transition("job", job.state, new, conclusion)
    job.state = new
    if new == states.QUEUED:
        job.queued_at = now
    elif new == states.RUNNING:
        job.started_at = now
    elif new == states.COMPLETED:
        job.conclusion = conclusion
        job.completed_at = now
        if reason is not None:
            job.status_reason = reason


def _request_cancel(job: Job, reason: str, now: datetime) -> None:
    """Mark a running job for cancellation; repeating it does not move the first request."""
    if job.cancel_requested_at is None:
        job.cancel_requested_at = now
        job.status_reason = reason


def _has_capacity(graph: RunGraph, job: Job) -> bool:
    """``strategy.max-parallel``: how many legs of a matrix may be queued or running at once."""
    strategy = job.definition().get("strategy")
    if not strategy or job.definition().get("matrix") is None:
        return True
    limit = strategy.get("max-parallel")
    if not isinstance(limit, int):
        return True
    busy = sum(
        1 for leg in graph.by_job_id[job.job_id] if leg.state in (states.QUEUED, states.RUNNING)
    )
    return busy < limit


# --- advancing a run --------------------------------------------------------------------------


def advance_run(session: Session, run: Run, now: datetime | None = None) -> None:
    """Decide every waiting job whose dependencies have all completed, until nothing changes.

    A job whose condition is true is queued; false is completed ``skipped`` with the reason; an
    evaluation error completes it as ``failure``. Skips propagate in the same loop. Then the
    run's state is derived again.
    """
    now = now or utcnow()
    if run.state == states.COMPLETED:
        return
    if not run.concurrency_blocked:
        session.flush()
        graph = RunGraph(session, run)
        changed = True
        while changed:
            changed = False
            for job in graph.jobs:
                if job.state != states.WAITING:
                    continue
                if any(dep.state != states.COMPLETED for dep in graph.deps[job.id]):
                    continue
                decision = decide(
                    str(job.definition().get("if") or DEFAULT_CONDITION),
                    github=run.context,
                    needs=graph.needs_context(job),
                    ancestor_conclusions=[
                        a.conclusion for a in graph.ancestors(job) if a.conclusion is not None
                    ],
                    run_cancelled=run.cancel_requested_at is not None,
                )
                if decision.error is not None:
                    _move(job, states.COMPLETED, now, states.FAILURE, decision.error)
                elif not decision.run and run.cancel_requested_at is not None:
                    _move(job, states.COMPLETED, now, states.CANCELLED, run.cancel_reason)
                elif not decision.run:
                    _move(job, states.COMPLETED, now, states.SKIPPED, decision.reason)
                elif _has_capacity(graph, job):
                    _move(job, states.QUEUED, now)
                else:
                    continue
                changed = True
    settle_run(session, run, now)


def run_conclusion(run: Run) -> str:
    """The conclusion of a run all of whose jobs completed.

    A cancelled run is ``cancelled``; otherwise the worst job conclusion wins (failure, then
    timed_out, lost, cancelled), a run with any success and nothing worse is ``success``, and a
    run whose jobs were all skipped is ``skipped`` (nothing ran, so nothing can report success).
    """
    if run.cancel_requested_at is not None:
        return states.CANCELLED
    conclusions = {job.conclusion for job in run.jobs}
    for worst in (states.FAILURE, states.TIMED_OUT, states.LOST, states.CANCELLED):
        if worst in conclusions:
            return worst
    if states.SUCCESS in conclusions:
        return states.SUCCESS
    return states.SKIPPED


def settle_run(session: Session, run: Run, now: datetime | None = None) -> None:
    """Derive the run's state from its jobs; a run that completes releases its group."""
    now = now or utcnow()
    if run.state == states.COMPLETED:
        return
    jobs = list(run.jobs)
    if jobs and all(job.state == states.COMPLETED for job in jobs):
        conclusion = run_conclusion(run)
        states.require_transition("run", run.state, states.COMPLETED, conclusion)
        run.state = states.COMPLETED
        run.conclusion = conclusion
        run.completed_at = now
        session.flush()
        released = concurrency.next_to_release(session, run)
        if released is not None:
            released = _lock_run_row(session, released.id)
            released.concurrency_blocked = False
            advance_run(session, released, now)
        return
    started = any(job.state == states.RUNNING or job.started_at is not None for job in jobs)
    if run.state == states.QUEUED and started:
        states.require_transition("run", run.state, states.RUNNING)
        run.state = states.RUNNING
        run.started_at = min(job.started_at for job in jobs if job.started_at is not None)


def admit_run(session: Session, run: Run, now: datetime | None = None) -> None:
    """Start a new run: apply its concurrency group, then queue or skip its root jobs."""
    now = now or utcnow()
    session.flush()
    others = concurrency.other_active_runs(session, run)
    if others and run.cancel_in_progress:
        for other in others:
            cancel_run_jobs(
                session,
                _lock_run_row(session, other.id),
                f"superseded by run #{run.number} in concurrency group {run.concurrency_group}",
                now,
            )
    elif others:
        run.concurrency_blocked = True
    advance_run(session, run, now)


def cancel_run_jobs(session: Session, run: Run, reason: str, now: datetime | None = None) -> None:
    """Cancel a locked run: queued jobs at once, running ones by request.

    Waiting jobs are cancelled too, except those whose condition may still hold in a cancelled
    run (``always()``, ``cancelled()``, ``failure()``): they are decided when their
    dependencies end, so cleanup jobs run. A repeated cancellation, or one of a run that never
    got past its concurrency group, cancels those as well.
    """
    now = now or utcnow()
    if run.state == states.COMPLETED:
        return
    repeated = run.cancel_requested_at is not None
    if not repeated:
        run.cancel_requested_at = now
        run.cancel_reason = reason
    keep_cleanup = not repeated and not run.concurrency_blocked
    for job in run.jobs:
        if job.state == states.QUEUED or (
            job.state == states.WAITING and not (keep_cleanup and _cleanup(job))
        ):
            _move(job, states.COMPLETED, now, states.CANCELLED, reason)
        elif job.state == states.RUNNING:
            _request_cancel(job, reason, now)
    advance_run(session, run, now)


def _cleanup(job: Job) -> bool:
    return may_run_after_cancel(str(job.definition().get("if") or DEFAULT_CONDITION))


# --- entry points for the runner protocol ------------------------------------------------------


def start_job(session: Session, job: Job, now: datetime | None = None) -> Job:
    """A provider started ``job``: queued -> running, and the run becomes running.

    Repeating it for a running job changes nothing. A job that is waiting, or already
    completed (cancelled meanwhile, say), raises Conflict.
    """
    now = now or utcnow()
    # Only this job and its run decide here (a started job cannot complete the run), so the
    # run's other jobs are not reloaded: claims stay cheap however big the run is.
    lock_repository_runs(session, job.run.repository_id)  # part of the immutable snapshot
    run = session.scalar(
        select(Run)
        .where(Run.id == job.run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    assert run is not None
    session.refresh(job, ["state"])
    if job.state == states.RUNNING:
        return job
    _move(job, states.RUNNING, now)
    if run.state == states.QUEUED:
        # No job of a queued run has started before (settle_run makes the run running with
        # its first started job), so this one's start is the run's.
        states.require_transition("run", run.state, states.RUNNING)
        run.state = states.RUNNING
        run.started_at = now
    return job


def requeue_job(session: Session, job: Job, now: datetime | None = None) -> Job:
    """Queue a running job again because its attempt never started (nothing of it ran).

    It keeps its place: its ``queued_at`` stays what it was, so it is the next one claimed
    from its repository. The run stays running. A job that is not running raises Conflict.
    """
    now = now or utcnow()
    lock_run(session, job.run_id)
    if job.state != states.RUNNING or job.cancel_requested_at is not None:
        raise Conflict(f"job {job.key} is {job.state}; only a running job is queued again")
    queued_at = job.queued_at
    _move(job, states.QUEUED, now)
    job.queued_at = queued_at or now
    job.started_at = None
    return job


def _final_conclusion(job: Job, reported: str) -> str:
    # Seed, "State, Cancellation and Recovery": a completion that follows a cancellation
    # request is recorded as cancelled (the attempt keeps the reported outcome).
    if job.cancel_requested_at is not None and reported in (states.SUCCESS, states.FAILURE):
        return states.CANCELLED
    return reported


def complete_job(
    session: Session,
    job: Job,
    conclusion: str,
    outputs: Mapping[str, str] | None = None,
    *,
    reason: str | None = None,
    now: datetime | None = None,
) -> Job:
    """Record that ``job`` finished, with its outputs, and advance the run in this transaction.

    ``conclusion`` is one of success, failure, cancelled, timed_out, lost. Outputs must be
    declared by the job and already masked by the caller. A replay with the same conclusion
    returns the job unchanged; a different conclusion for a completed job raises Conflict
    (terminal states never move backwards).
    """
    now = now or utcnow()
    if conclusion not in states.CONCLUSIONS or conclusion == states.SKIPPED:
        raise InvalidInput(f"{conclusion!r} is not a conclusion a job can report")
    run = lock_run(session, job.run_id)
    final = _final_conclusion(job, conclusion)
    if job.state == states.COMPLETED:
        if job.conclusion == final or _forgiven_before(job, final):
            return job
        raise Conflict(
            f"job {job.key} of run #{run.number} already completed ({job.conclusion}); "
            f"it cannot become {conclusion}"
        )
    if job.state == states.WAITING:
        raise Conflict(f"job {job.key} of run #{run.number} was never queued")
    if final in FORGIVABLE_CONCLUSIONS:
        final, reason = _forgiven(session, run, job, final, reason)
    _record_outputs(job, outputs or {})
    _move(job, states.COMPLETED, now, final, reason)
    if final in FAIL_FAST_CONCLUSIONS:
        _fail_fast(session, run, job, now)
    advance_run(session, run, now)
    return job


def _forgiven_before(job: Job, final: str) -> bool:
    """A replayed failure of a job whose continue-on-error already made it a success."""
    return (
        job.conclusion == states.SUCCESS
        and final in FORGIVABLE_CONCLUSIONS
        and job.definition().get("continue_on_error") is not None
        and (job.status_reason or "").endswith("continue-on-error counts it as a success")
    )


def _forgiven(
    session: Session, run: Run, job: Job, final: str, reason: str | None
) -> tuple[str, str | None]:
    """A failed job with continue-on-error counts as a success, as on GitHub (the run passes,
    and ``needs.<id>.result`` is success); the job's reason says what really happened."""
    definition = job.definition()
    value = definition.get("continue_on_error")
    if value is None:
        return final, reason
    forgiven, problem = forgives(
        value,
        github=run.context,
        needs=RunGraph(session, run).needs_context(job),
        matrix=definition.get("matrix") or {},
        strategy=definition.get("strategy") or {},
    )
    if problem is not None:
        return final, problem
    if not forgiven:
        return final, reason
    return states.SUCCESS, f"ended with {final}; continue-on-error counts it as a success"


def request_job_cancel(session: Session, job: Job, reason: str, now: datetime | None = None) -> Job:
    """Cancel one job: at once when it has not started, by durable request when it runs."""
    now = now or utcnow()
    run = lock_run(session, job.run_id)
    if job.state == states.COMPLETED:
        return job
    if job.state == states.RUNNING:
        _request_cancel(job, reason, now)
        return job
    _move(job, states.COMPLETED, now, states.CANCELLED, reason)
    advance_run(session, run, now)
    return job


def _record_outputs(job: Job, outputs: Mapping[str, str]) -> None:
    declared = job.definition().get("outputs") or {}
    total = 0
    for name, value in outputs.items():
        if name not in declared:
            raise InvalidInput(f"job {job.key} declares no output named {name!r}")
        if not isinstance(value, str) or "\x00" in value:
            raise InvalidInput(f"output {name} of job {job.key} must be text without NUL")
        total += len(name) + len(value.encode("utf-8"))
    if total > MAX_OUTPUTS_BYTES:
        raise InvalidInput(
            f"the outputs of job {job.key} are {total} bytes; the limit is {MAX_OUTPUTS_BYTES}"
        )
    for name in sorted(outputs):
        job.outputs.append(JobOutput(name=name, value=outputs[name]))


def _fail_fast(session: Session, run: Run, failed: Job, now: datetime) -> None:
    definition = failed.definition()
    strategy = definition.get("strategy")
    if definition.get("matrix") is None or not strategy or not strategy.get("fail-fast"):
        return
    reason = f"cancelled by fail-fast: {failed.key} ended with {failed.conclusion}"
    for sibling in run.jobs:
        if sibling.job_id != failed.job_id or sibling.id == failed.id:
            continue
        if sibling.state in (states.WAITING, states.QUEUED):
            _move(sibling, states.COMPLETED, now, states.CANCELLED, reason)
        elif sibling.state == states.RUNNING:
            _request_cancel(sibling, reason, now)


def reuse_result(
    job: Job, source: Job, source_run_number: int, now: datetime | None = None
) -> None:
    """Complete a new job with the result and outputs of ``source`` (``rerun --failed``)."""
    now = now or utcnow()
    assert source.conclusion is not None
    _move(job, states.COMPLETED, now, source.conclusion, f"reused from run #{source_run_number}")
    job.reused_from_id = source.id
    for output in source.outputs:
        job.outputs.append(JobOutput(name=output.name, value=output.value))
