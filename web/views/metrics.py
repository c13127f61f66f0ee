"""``GET /-/metrics``: Prometheus metrics (``forge_ci.metrics``), behind their own bearer token.

The token is the content of ``metrics_token_file``; without that setting the endpoint does not
exist (404). A wrong or missing token is 401, compared in constant time; the token file is read
at every scrape. Browser cookies play no part.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, abort, request
from werkzeug.wrappers import Response

from forge_ci.errors import ConfigurationError
from forge_ci.metrics import collect, render
from web.storage import db, settings

blueprint = Blueprint("metrics", __name__)

#: Shortest token accepted in the token file: a short one could be guessed.
MIN_TOKEN_LENGTH = 32


def _expected_token() -> str | None:
    path = settings().metrics_token_file
    if path is None:
        return None
    try:
        token = path.read_text("utf-8").strip()
    except OSError as exc:
        raise ConfigurationError(
            f"the metrics token file {path} cannot be read: {exc.strerror}"
        ) from None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"the metrics token in {path} is shorter than {MIN_TOKEN_LENGTH} characters"
        )
    return token


@blueprint.route("/-/metrics")
def metrics() -> Response:
    expected = _expected_token()
    if expected is None:
        abort(404)
    given = request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        return Response(
            "a valid metrics bearer token is required\n",
            status=401,
            mimetype="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="forge-ci metrics"'},
        )
    return Response(render(collect(db())), mimetype="text/plain; version=0.0.4")
