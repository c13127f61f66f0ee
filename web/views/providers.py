"""``/-/admin/pipelines/providers``: site administrators create and manage providers.

Create (the token is generated here and shown once, in the creation response only), edit labels,
edit access (selected repositories or all), pause, resume and revoke. Every change goes through
the coordinator's use cases, which check the site-administrator role again and cancel work that
no longer fits (see :mod:`forge_ci.coordinator.providers`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from forge_ci.coordinator.credentials import new_token
from forge_ci.coordinator.providers import (
    create_provider,
    list_providers,
    pause_provider,
    resume_provider,
    revoke_provider,
    set_provider_access,
    set_provider_labels,
)
from forge_ci.errors import ForgeCIError, InvalidInput
from forge_ci.models import utcnow
from forge_ci.repos import list_repositories
from web.auth import current_actor, require_site_admin
from web.storage import db, settings

blueprint = Blueprint("providers", __name__, url_prefix="/-/admin/pipelines/providers")

#: Contact within this long is "recent" (the spec's minute).
RECENT_SECONDS = 60


@blueprint.before_request
def _site_administrators_only() -> Response | None:
    return require_site_admin()


def _page(status: int = 200, **extra: Any) -> tuple[str, int]:
    actor = current_actor()
    providers = list_providers(db(), actor)
    repositories = [r.full_name for r in list_repositories(db(), actor)]
    now = utcnow()
    recent = {
        p.name: p.last_contact_at is not None
        and (now - p.last_contact_at).total_seconds() <= RECENT_SECONDS
        for p in providers
    }
    context: dict[str, Any] = {
        "providers": providers,
        "repositories": repositories,
        "recent": recent,
        "create_form": {"name": "", "labels": "self-hosted,linux", "scope": "selected"},
        "create_repositories": [],
        "create_error": None,
        "edit_error": None,
        "edit_name": None,
        "new_token": None,
        "server_url": settings().public_url,
    }
    context.update(extra)
    return render_template("admin/providers.html", **context), status


def _repositories_from_form() -> list[str]:
    return [name for name in request.form.getlist("repositories") if name]


@blueprint.route("", methods=["GET"])
def index() -> tuple[str, int]:
    return _page()


@blueprint.route("", methods=["POST"])
def create() -> tuple[str, int]:
    form = {
        "name": request.form.get("name", "").strip(),
        "labels": request.form.get("labels", ""),
        "scope": request.form.get("scope", "selected"),
    }
    chosen = _repositories_from_form()
    token = new_token()
    try:
        info = create_provider(
            db(),
            current_actor(),
            form["name"],
            token,
            form["labels"],
            form["scope"],
            chosen if form["scope"] == "selected" else (),
        )
        db().commit()
    except ForgeCIError as exc:
        if exc.http_status == 403:
            raise
        db().rollback()
        return _page(
            exc.http_status, create_form=form, create_repositories=chosen, create_error=exc.message
        )
    # The token exists only in this response: it is not stored, not logged, not redirected.
    return _page(201, new_token=token, new_name=info.name)


def _edit(name: str, change: Any, done: str) -> Response | tuple[str, int]:
    try:
        change()
        db().commit()
    except ForgeCIError as exc:
        if exc.http_status == 403:
            raise
        db().rollback()
        return _page(exc.http_status, edit_error=exc.message, edit_name=name)
    flash(done)
    return redirect(url_for("providers.index") + f"#provider-{name}")


@blueprint.route("/<name>/labels", methods=["POST"])
def labels(name: str) -> Response | tuple[str, int]:
    labels = request.form.get("labels", "")

    def change() -> None:
        _, cancelled = set_provider_labels(db(), current_actor(), name, labels)
        if cancelled:
            flash(f"{cancelled} running job(s) no longer match and were asked to stop.")

    return _edit(name, change, f"Labels of {name} saved.")


@blueprint.route("/<name>/access", methods=["POST"])
def access(name: str) -> Response | tuple[str, int]:
    scope = request.form.get("scope", "")
    chosen = _repositories_from_form()

    def change() -> None:
        if scope not in ("selected", "all"):
            raise InvalidInput("choose Selected repositories or All repositories")
        _, cancelled = set_provider_access(
            db(), current_actor(), name, scope, chosen if scope == "selected" else ()
        )
        if cancelled:
            flash(f"{cancelled} running job(s) are outside the new access and were asked to stop.")

    return _edit(name, change, f"Access of {name} saved.")


@blueprint.route("/<name>/pause", methods=["POST"])
def pause(name: str) -> Response | tuple[str, int]:
    return _edit(
        name,
        lambda: pause_provider(db(), current_actor(), name),
        f"{name} is paused: it claims no new jobs; running jobs continue.",
    )


@blueprint.route("/<name>/resume", methods=["POST"])
def resume(name: str) -> Response | tuple[str, int]:
    return _edit(
        name, lambda: resume_provider(db(), current_actor(), name), f"{name} claims jobs again."
    )


@blueprint.route("/<name>/revoke", methods=["POST"])
def revoke(name: str) -> Response | tuple[str, int]:
    def change() -> None:
        if request.form.get("confirm") != "yes":
            raise InvalidInput(f"tick the box to confirm that {name} is to be revoked for good")
        _, cancelled = revoke_provider(db(), current_actor(), name)
        if cancelled:
            flash(f"{cancelled} running job(s) of {name} were asked to stop.")

    return _edit(name, change, f"{name} is revoked: its token no longer works.")
