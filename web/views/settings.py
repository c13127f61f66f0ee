"""A repository's Settings -> Secrets and Variables pages (owners, admins, site administrators).

Everybody else gets the 404 of a page that does not exist for them. Every form carries the
CSRF token. The pages call the same use cases as the CLI (``forge_ci.secrets.store``); a secret
value is never shown, put in a form, or kept in the session: a refused form is answered with
the page again (400/409, not a redirect), keeping the name, scope and version it was sent with
and an empty value field.
"""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from forge_ci.authz import Role
from forge_ci.errors import ForgeCIError
from forge_ci.repos import RepositoryAccess
from forge_ci.secrets.rules import SECRET, VARIABLE, Kind
from forge_ci.secrets.store import Scope, delete_entry, list_entries, set_entry
from web.access import request_repository
from web.auth import current_actor
from web.storage import db, settings

blueprint = Blueprint("settings", __name__)

_KINDS = {"secrets": SECRET, "variables": VARIABLE}


def _kind(section: str) -> Kind:
    kind = _KINDS.get(section)
    if kind is None:
        abort(404)
    return kind


def _manageable(owner: str, name: str) -> RepositoryAccess:
    access = request_repository(owner, name)
    if access.role < Role.ADMIN:
        abort(404)  # settings do not exist for readers and writers
    return access


def _page(
    owner: str,
    name: str,
    section: str,
    *,
    error: str | None = None,
    form: dict[str, str] | None = None,
    status: int = 200,
) -> tuple[str, int]:
    kind = _kind(section)
    access = _manageable(owner, name)
    entries = list_entries(db(), current_actor(), kind, access.repository.full_name)
    page = render_template(
        "settings.html",
        repo=access.repository,
        role=access.role,
        section=section,
        kind=kind,
        entries=entries,
        error=error,
        form=form or {},
    )
    return page, status


@blueprint.route("/<owner:owner>/<repo:name>/settings/<section>")
def show(owner: str, name: str, section: str) -> tuple[str, int]:
    return _page(owner, name, section)


@blueprint.route("/<owner:owner>/<repo:name>/settings/<section>", methods=["POST"])
def save(owner: str, name: str, section: str) -> Response | tuple[str, int]:
    kind = _kind(section)
    full_name = _manageable(owner, name).repository.full_name
    entry_name = request.form.get("name", "").strip()
    branch = request.form.get("branch", "").strip() or None
    workflow = request.form.get("workflow", "").strip() or None
    version = request.form.get("version", "").strip()
    # A value is never trimmed (it is used exactly as given); empty means "keep" on an update.
    value = request.form.get("value", "").replace("\r\n", "\n") or None
    try:
        entry = set_entry(
            db(),
            settings(),
            current_actor(),
            kind,
            full_name,
            entry_name,
            Scope(branch, workflow),
            value,
            version,
        )
        db().commit()
    except ForgeCIError as exc:
        if exc.http_status not in (400, 409):
            raise
        db().rollback()
        kept = {
            "name": entry_name,
            "branch": branch or "",
            "workflow": workflow or "",
            "version": version,
            "editing": request.form.get("editing", ""),
        }
        return _page(owner, name, section, error=exc.message, form=kept, status=exc.http_status)
    flash(f"{kind.word.capitalize()} {entry.name} was saved (version {entry.version}).")
    return redirect(url_for("settings.show", owner=owner, name=name, section=section), 303)


@blueprint.route("/<owner:owner>/<repo:name>/settings/<section>/delete", methods=["POST"])
def delete(owner: str, name: str, section: str) -> Response | tuple[str, int]:
    kind = _kind(section)
    full_name = _manageable(owner, name).repository.full_name
    entry_name = request.form.get("name", "").strip()
    version = request.form.get("version", "").strip()
    try:
        entry = delete_entry(db(), current_actor(), kind, full_name, entry_name, version)
        db().commit()
    except ForgeCIError as exc:
        if exc.http_status not in (400, 404, 409):
            raise
        db().rollback()
        return _page(owner, name, section, error=exc.message, status=exc.http_status)
    flash(f"{kind.word.capitalize()} {entry.name} was deleted.")
    return redirect(url_for("settings.show", owner=owner, name=name, section=section), 303)
