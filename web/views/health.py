"""``GET /-/health``: the process answers and its database does (for supervisors and proxies)."""

from __future__ import annotations

from flask import Blueprint, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.wrappers import Response

from forge_ci.errors import Unavailable
from web.errors import json_view
from web.storage import db

blueprint = Blueprint("health", __name__)


@blueprint.route("/-/health")
@json_view
def health() -> Response:
    try:
        db().execute(text("select 1"))
    except SQLAlchemyError:
        raise Unavailable("the database does not answer") from None
    return jsonify({"status": "ok"})
