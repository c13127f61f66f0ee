"""The home page (repositories the user can read) and each repository's page."""

from __future__ import annotations

from flask import Blueprint, render_template
from werkzeug.wrappers import Response

from forge_ci.authz import Role, role_in
from forge_ci.repos import find_repository, list_repositories
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
    actor = current_actor()
    repo = find_repository(db(), actor, f"{owner}/{name}", Role.READ)
    role = role_in(db(), actor, repo)
    assert role is not None  # find_repository checked READ
    return render_template(
        "repository.html",
        repo=repo,
        role=role,
        clone_url=f"{settings().ssh_url}/{repo.full_name}.git",
    )
