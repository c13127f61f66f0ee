"""The home page (repositories the user can read) and each repository's page."""

from __future__ import annotations

from flask import Blueprint, render_template
from werkzeug.wrappers import Response

from forge_ci.repos import list_repositories
from web.access import request_repository
from web.auth import current_actor, current_user, login_redirect
from web.storage import db, settings

blueprint = Blueprint("repositories", __name__)


@blueprint.route("/")
def home() -> Response | str:
    if current_user() is None:
        return login_redirect()
    repositories = list_repositories(db(), current_actor())
    return render_template("home.html", repositories=repositories)


@blueprint.route("/<owner:owner>/<repo:name>")
def repository(owner: str, name: str) -> str:
    access = request_repository(owner, name)
    repo, role = access.repository, access.role
    return render_template(
        "repository.html",
        repo=repo,
        role=role,
        clone_url=f"{settings().ssh_url}/{repo.full_name}.git",
    )
