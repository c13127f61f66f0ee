"""A run's pages: the run (graph, jobs, timing, queue blockers) and each job with its log.

``/<owner>/<repo>/pipelines/<number>`` shows the run; ``.../jobs/<job>`` the same run with one
job's steps and log (``?step=<id>`` narrows the log to one step without JavaScript). Cancel and
rerun are forms for owners, admins and site administrators; the use cases recheck the role.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from forge_ci import states
from forge_ci.authz import Role
from forge_ci.coordinator.blockers import Blocker, queue_blockers_in
from forge_ci.coordinator.egress import EgressSummary, attempt_egress_in
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.details import JobDetail, RunDetails, run_details_in
from forge_ci.runs.reports import run_reports
from forge_ci.runs.rerun import rerun_run
from web.access import request_repository
from web.auth import current_actor
from web.graph import dependency_graph
from web.logs import LogSnapshot, log_snapshot
from web.present import label
from web.storage import db, settings

blueprint = Blueprint("runs", __name__)

RUN = "/<owner:owner>/<repo:name>/pipelines/<int:number>"


def _run_context(owner: str, name: str, number: int) -> dict[str, Any]:
    access = request_repository(owner, name)
    details = run_details_in(db(), access, number)
    blockers = queue_blockers_in(db(), access, number)
    can_manage = access.role >= Role.ADMIN
    waiting = waiting_for(details)

    # Built once: the graph and the list link every job (url_for is not free x 256 jobs x 2).
    hrefs = {
        job.id: url_for("runs.job", owner=owner, name=name, number=number, job_id=job.id)
        for job in details.jobs
    }

    def job_href(job: JobDetail) -> str:
        return hrefs[job.id]

    environments = {view.key: view.environment for view in details.run.jobs if view.environment}

    return {
        "repo": access.repository,
        "details": details,
        "run": details.run,
        "jobs": details.jobs,
        "notes": {job.id: job_note(job, blockers.get(job.id), waiting) for job in details.jobs},
        "job_environments": {
            job.id: environments[job.key] for job in details.jobs if job.key in environments
        },
        "run_note": run_note(details),
        "graph": dependency_graph(details.jobs, job_href),
        "job_href": job_href,
        "can_manage": can_manage,
        "controls": controls(can_manage, details),
        "reports": run_reports(db(), details),
    }


def controls(can_manage: bool, details: RunDetails) -> dict[str, bool]:
    """Which run buttons apply now (all False for people who may not use them)."""
    return {
        "cancel": can_manage and not details.is_terminal,
        "rerun": can_manage and details.is_terminal,
        "rerun_failed": can_manage
        and details.is_terminal
        and any(job.conclusion in states.UNSUCCESSFUL for job in details.jobs),
    }


def waiting_for(details: RunDetails) -> dict[int, str]:
    """Job id -> the names of the jobs it still waits for (for waiting jobs)."""
    names = {job.id: job.name for job in details.jobs}
    unfinished = {job.id for job in details.jobs if not job.is_terminal}
    result = {}
    for job in details.jobs:
        if job.state == states.WAITING:
            result[job.id] = ", ".join(sorted({names[n] for n in job.needs if n in unfinished}))
    return result


def job_note(job: JobDetail, blocker: Blocker | None, waiting: dict[int, str]) -> str:
    """One sentence under the job: why it waits, or why the server decided its fate."""
    if blocker is not None:
        return blocker.message
    if job.state == states.WAITING and waiting.get(job.id):
        return f"Waiting for {waiting[job.id]}."
    if job.status_reason:
        return job.status_reason
    if job.cancel_requested and not job.is_terminal:
        return "Cancellation requested."
    return ""


def log_note(job: JobDetail, note: str) -> str:
    """What the log area says for a job without an attempt: what really happened to it.

    Only a job that may still run waits for a provider; one that ended without any attempt was
    reused by ``rerun --failed``, skipped by its condition, or decided by the server (cancelled,
    or failed when claimed, e.g. a secret it needs is missing).
    """
    if job.latest_attempt is not None:
        return ""
    if not job.is_terminal:
        text = "No provider has started this job yet; its output appears here when one does."
        return f"{text} {note}" if note else text
    if job.reused_from is not None:
        return (
            f"This job did not run again: it kept its result ({label(job.conclusion or '')}) "
            f"and outputs from run #{job.reused_from[0]}."
        )
    why = f": {job.status_reason}" if job.status_reason else ""
    if job.conclusion == states.SKIPPED:
        return f"This job did not run: it was skipped{why}."
    return (
        f"No provider ran this job: it ended {label(job.conclusion or '')} before any "
        f"provider started it{why}."
    )


LOST_OUTPUT = (
    "The provider running this job stopped answering and its lease ran out, so the job was "
    "marked lost: whatever output it had not uploaded by then is lost. What did arrive is below."
)


def lost_note(job: JobDetail) -> str:
    """Said above the log of an attempt that was lost (issue #14): its output may be cut short."""
    attempt = job.latest_attempt
    return LOST_OUTPUT if attempt is not None and attempt.conclusion == states.LOST else ""


def run_note(details: RunDetails) -> str:
    run = details.run
    if run.cancel_reason:
        return run.cancel_reason
    if run.waiting_for_concurrency:
        return f"Waiting for an earlier run of concurrency group {run.concurrency_group} to finish."
    return ""


@blueprint.route(RUN)
def show(owner: str, name: str, number: int) -> str:
    context = _run_context(owner, name, number)
    return render_template("run.html", selected=None, log=None, **context)


@blueprint.route(RUN + "/jobs/<int:job_id>")
def job(owner: str, name: str, number: int, job_id: int) -> str:
    context = _run_context(owner, name, number)
    details: RunDetails = context["details"]
    selected = details.job(job_id)
    if selected is None:
        abort(404)
    attempt = selected.latest_attempt
    log: LogSnapshot | None = None
    network: EgressSummary | None = None
    if attempt is not None:
        access = request_repository(owner, name)
        log = log_snapshot(db(), access, number, attempt.id)
        network = attempt_egress_in(db(), access, number, attempt.id)
    step = request.args.get("step", "")
    if step and step not in {s.step_id for s in selected.steps}:
        step = ""
    note = log_note(selected, context["notes"][selected.id])
    context["reports"] = context["reports"].for_job(selected.id)
    return render_template(
        "run.html",
        selected=selected,
        attempt=attempt,
        log=log,
        network=network,
        step=step,
        log_note=note,
        lost_note=lost_note(selected),
        **context,
    )


@blueprint.route(RUN + "/cancel", methods=["POST"])
def cancel(owner: str, name: str, number: int) -> Response:
    cancel_run(db(), current_actor(), f"{owner}/{name}", number)
    db().commit()
    flash(
        f"Run #{number} is being cancelled: queued jobs stopped, running jobs were asked to stop."
    )
    return redirect(_back(owner, name, number))


@blueprint.route(RUN + "/rerun", methods=["POST"])
def rerun(owner: str, name: str, number: int) -> Response:
    failed_only = request.form.get("failed") == "1"
    run = rerun_run(
        db(), settings(), current_actor(), f"{owner}/{name}", number, failed_only=failed_only
    )
    what = "the jobs that did not succeed" if failed_only else "every job"
    flash(f"Run #{run.number} reruns {what} of run #{number} from the same snapshot.")
    return redirect(url_for("runs.show", owner=owner, name=name, number=run.number))


def _back(owner: str, name: str, number: int) -> str:
    """The run page, or the job page the form was posted from."""
    job_id = request.form.get("job", "")
    if job_id.isdigit():
        return url_for("runs.job", owner=owner, name=name, number=number, job_id=int(job_id))
    return url_for("runs.show", owner=owner, name=name, number=number)
