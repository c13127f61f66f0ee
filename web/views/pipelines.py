"""A repository's Pipelines page: runs, the push and scheduled workflow switches, recent pushes
and scheduled minutes, dispatch (with the chosen workflow's inputs).

Readers see everything here; owners, admins and site administrators also get the switch and
the dispatch form. The use cases check roles themselves, so a form posted by someone who may not
use it is refused (403 for readers and writers, 404 for everybody else) whatever the page showed.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response

from forge_ci.authz import Role
from forge_ci.errors import ForgeCIError, InvalidInput
from forge_ci.repos import find_repository, set_push_workflows, set_scheduled_workflows
from forge_ci.runs.choices import dispatch_choices
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.queries import list_runs
from forge_ci.runs.recent import latest_workflow_states, recent_push_events, workflow_history
from forge_ci.runs.scheduled import recent_scheduled_minutes
from forge_ci.workflow.dispatch_inputs import InputInvalid
from web.access import request_repository
from web.auth import current_actor
from web.storage import db, settings

blueprint = Blueprint("pipelines", __name__)

RUNS_SHOWN = 50
EVENTS_SHOWN = 10
SCHEDULED_SHOWN = 5
#: Form fields of dispatch inputs are named ``input.<name>``; a boolean's hidden "false" comes
#: before its checkbox, so the last value sent is the one that counts.
INPUT_FIELD = "input."


def full_name(owner: str, name: str) -> str:
    return f"{owner}/{name}"


def _page(
    owner: str,
    name: str,
    *,
    dispatch_error: str | None = None,
    dispatch_form: dict[str, Any] | None = None,
) -> tuple[str, int]:
    actor = current_actor()
    access = request_repository(owner, name)
    repo, role = access.repository, access.role
    can_manage = role is not None and role >= Role.ADMIN
    runs = list_runs(db(), actor, repo.full_name, limit=RUNS_SHOWN)
    events = recent_push_events(db(), actor, repo.full_name, limit=EVENTS_SHOWN)
    files = latest_workflow_states(db(), actor, repo.full_name)
    scheduled = recent_scheduled_minutes(db(), actor, repo.full_name, SCHEDULED_SHOWN)
    choices = dispatch_choices(db(), settings(), actor, repo.full_name) if can_manage else None
    form = dispatch_form or {}
    form.setdefault("inputs", {})
    form.setdefault("input_name", "")
    if choices is not None:
        form.setdefault("branch", choices.default_branch)
        form.setdefault("workflow", choices.workflow_paths[0] if choices.workflow_paths else "")
    page = render_template(
        "pipelines.html",
        repo=repo,
        role=role,
        can_manage=can_manage,
        runs=runs,
        events=events,
        files=files,
        scheduled=scheduled,
        choices=choices,
        dispatch_error=dispatch_error,
        dispatch_form=form,
    )
    return page, 200


#: Where a refused dispatch leaves its reason and the form as sent, for the page after the redirect.
_DISPATCH_REFUSAL = "dispatch_refusal"


@blueprint.route("/<owner:owner>/<repo:name>/pipelines")
def index(owner: str, name: str) -> tuple[str, int]:
    refusal = session.pop(_DISPATCH_REFUSAL, None)
    if isinstance(refusal, dict) and refusal.get("repository") == full_name(owner, name):
        return _page(
            owner,
            name,
            dispatch_error=str(refusal.get("error", "")),
            dispatch_form={
                "branch": str(refusal.get("branch", "")),
                "workflow": str(refusal.get("workflow", "")),
                "inputs": dict(refusal.get("inputs") or {}),
                "input_name": str(refusal.get("input_name", "")),
            },
        )
    return _page(owner, name)


@blueprint.route("/<owner:owner>/<repo:name>/pipelines/workflow-history")
def history(owner: str, name: str) -> str:
    """One workflow file's outcome at each recent push (``?path=.github/workflows/ci.yml``)."""
    path = request.args.get("path", "")
    actor = current_actor()
    repo = request_repository(owner, name).repository
    entries = workflow_history(db(), actor, repo.full_name, path)
    # Problems are listed again only where they changed from the push before.
    repeated = [
        index + 1 < len(entries)
        and entry.outcome.diagnostics == entries[index + 1].outcome.diagnostics
        for index, entry in enumerate(entries)
    ]
    return render_template(
        "workflow_history.html",
        repo=repo,
        path=path,
        entries=list(zip(entries, repeated, strict=True)),
    )


@blueprint.route("/<owner:owner>/<repo:name>/pipelines/push-workflows", methods=["POST"])
def push_workflows(owner: str, name: str) -> Response:
    switch = request.form.get("enabled", "")
    if switch not in ("on", "off"):
        raise InvalidInput("choose on or off for Run push workflows")
    repo = set_push_workflows(db(), current_actor(), full_name(owner, name), switch == "on")
    db().commit()
    if switch == "on":
        flash(
            "Run push workflows is on: pushes by owners and admins from now on start their "
            "push workflows. Earlier pushes are not replayed."
        )
    else:
        flash("Run push workflows is off: runs already created go on; new pushes start nothing.")
    return redirect(url_for("pipelines.index", owner=repo.owner.name, name=repo.name))


@blueprint.route("/<owner:owner>/<repo:name>/pipelines/scheduled-workflows", methods=["POST"])
def scheduled_workflows(owner: str, name: str) -> Response:
    switch = request.form.get("enabled", "")
    if switch not in ("on", "off"):
        raise InvalidInput("choose on or off for Run scheduled workflows")
    repo = set_scheduled_workflows(db(), current_actor(), full_name(owner, name), switch == "on")
    db().commit()
    if switch == "on":
        flash(
            "Run scheduled workflows is on: each matching minute (UTC) from now on runs the "
            "default branch's current commit, requested by you. Minutes missed while no worker "
            "runs are not replayed."
        )
    else:
        flash("Run scheduled workflows is off: runs already created go on; no new ones start.")
    return redirect(url_for("pipelines.index", owner=repo.owner.name, name=repo.name))


def _dispatch_inputs() -> dict[str, str]:
    """The inputs the form sent (``input.<name>``; the last value of a name counts)."""
    return {
        key.removeprefix(INPUT_FIELD): request.form.getlist(key)[-1]
        for key in request.form
        if key.startswith(INPUT_FIELD)
    }


@blueprint.route("/<owner:owner>/<repo:name>/pipelines/dispatch", methods=["POST"])
def dispatch(owner: str, name: str) -> Response:
    branch = request.form.get("branch", "").strip()
    workflow = request.form.get("workflow", "").strip()
    inputs = _dispatch_inputs()
    try:
        run = dispatch_run(
            db(), settings(), current_actor(), full_name(owner, name), branch, workflow, inputs
        )
    except ForgeCIError as exc:
        if exc.http_status not in (400, 404) or _unreadable(owner, name):
            raise
        db().rollback()
        # A bad branch or file: the page again with the reason and the form as it was sent,
        # after a redirect (a refresh then reloads the page instead of posting again).
        session[_DISPATCH_REFUSAL] = {
            "repository": full_name(owner, name),
            "error": exc.message,
            "branch": branch,
            "workflow": workflow,
            "inputs": inputs,
            "input_name": exc.input_name if isinstance(exc, InputInvalid) else "",
        }
        return redirect(url_for("pipelines.index", owner=owner, name=name) + "#dispatch", 303)
    flash(f"Run #{run.number} was created from {workflow} on {branch}.")
    return redirect(url_for("runs.show", owner=owner, name=name, number=run.number), 303)


def _unreadable(owner: str, name: str) -> bool:
    """True when the repository itself is the NotFound (then it must stay a plain 404)."""
    db().rollback()
    try:
        find_repository(db(), current_actor(), full_name(owner, name), Role.READ)
    except ForgeCIError:
        return True
    return False
