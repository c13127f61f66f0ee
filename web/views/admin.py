"""Site administration: ``/-/admin`` (users); providers are in :mod:`web.views.providers`.

Only site administrators may use these pages: anonymous visitors are sent to the login page,
other signed-in users are refused with 403 (that an administration exists is no secret).
"""

from __future__ import annotations

from flask import Blueprint, render_template
from werkzeug.wrappers import Response

from forge_ci.accounts import list_users
from web.auth import current_actor, require_site_admin
from web.storage import db

blueprint = Blueprint("admin", __name__, url_prefix="/-/admin")


@blueprint.before_request
def _site_administrators_only() -> Response | None:
    return require_site_admin()


@blueprint.route("")
def index() -> str:
    users = list_users(db(), current_actor())
    return render_template("admin/index.html", users=users)
