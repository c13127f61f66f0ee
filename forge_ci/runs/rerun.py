"""Reruns: a new run from a completed run's immutable snapshot.

A rerun gets a new number and a new pin of the *same* commit, and copies the workflow source,
the resolved plan, its digest and the captured context byte for byte. It never reads the branch
or parses the file again, so a force-push (even followed by ``git gc --prune=now``) cannot
change what it executes. Active runs cannot be rerun: cancel them first.

``failed_only`` (``forge-ci run rerun --failed``) reruns the jobs that did not succeed (failure,
cancelled, timed_out, lost) and every job that depends on them, directly or not. Every other
job (succeeded, or skipped by its own condition with nothing failed before it) is copied into the
new run as completed, with its conclusion and outputs, and points at the original through
``reused_from``; dependents see those outputs through ``needs`` exactly as before. Reusing
rather than rerunning succeeded jobs is the point of the option: their work is not repeated.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.errors import Conflict
from forge_ci.models import Job, Run
from forge_ci.repos import find_repository
from forge_ci.runs.create import creating_runs, require_run_creator
from forge_ci.runs.definition import copy_definition
from forge_ci.runs.queries import find_run
from forge_ci.runs.scheduling import RunGraph
from forge_ci.settings import Settings

#: Conclusions that ``--failed`` reruns.
RERUN_CONCLUSIONS = states.UNSUCCESSFUL


def jobs_to_reuse(session: Session, run: Run) -> dict[int, Job]:
    """Plan position -> job of ``run`` whose result a ``--failed`` rerun keeps."""
    graph = RunGraph(session, run)
    dependents: dict[int, list[Job]] = defaultdict(list)
    for job in graph.jobs:
        for dependency in graph.deps[job.id]:
            dependents[dependency.id].append(job)
    again: set[int] = set()
    stack = [job for job in graph.jobs if job.conclusion in RERUN_CONCLUSIONS]
    while stack:
        job = stack.pop()
        if job.id not in again:
            again.add(job.id)
            stack.extend(dependents[job.id])
    return {job.position: job for job in graph.jobs if job.id not in again}


def rerun_run(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    number: int,
    *,
    failed_only: bool = False,
) -> Run:
    """Create (and commit) a rerun of completed run ``number``; owners/admins only.

    Conflict when the run is still active, or with ``failed_only`` when nothing failed.
    """
    repository = find_repository(session, actor, full_name, Role.READ)
    require_run_creator(session, actor, repository)
    run = find_run(session, repository, number)
    if run.state != states.COMPLETED:
        raise Conflict(
            f"run #{number} is still {run.state}; only a completed run can be rerun "
            "(cancel it first)"
        )
    reuse: dict[int, Job] | None = None
    if failed_only:
        reuse = jobs_to_reuse(session, run)
        if len(reuse) == len(run.jobs):
            raise Conflict(
                f"run #{number} has no failed, cancelled, timed-out or lost job to rerun"
            )
    definition = copy_definition(run)
    # As on GitHub, a rerun keeps the run's number and counts itself in run_attempt (a build
    # stamped with github.run_number gets the same stamp when rerun).
    definition.context["run_number"] = str(run.context.get("run_number", run.number))
    definition.context["run_attempt"] = str(int(run.context.get("run_attempt", 1)) + 1)
    with creating_runs(session, settings, repository) as creation:
        return creation.create(actor, definition, rerun_of=run, reuse=reuse)
