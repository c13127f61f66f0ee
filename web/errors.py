"""Translating errors into responses: a friendly page for people, a small JSON body for scripts.

A :class:`~forge_ci.errors.ForgeCIError` answers with its ``http_status`` and its message (the
core writes messages for the person who caused them). HTTP errors from routing (404, 405, 413)
get the same page. Anything else is a bug: it is logged with its traceback and answered with a
generic 500 that says nothing about the server.

Views that answer JSON (browser polling endpoints) are marked with :func:`json_view`; their
errors are ``{"error": {"code", "message"}}`` with the same status. Anything under the runner
API's prefix (a wrong method, ``attempts//start``) is answered in the runner API's own JSON,
with ``no-store``, whether or not a view matched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, current_app, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError
from werkzeug.wrappers import Response

from forge_ci import protocol
from forge_ci.errors import ForgeCIError

F = TypeVar("F", bound=Callable[..., Any])

TITLES = {
    400: "Bad request",
    401: "Sign-in required",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    500: "Something went wrong",
    503: "Unavailable",
}


def json_view(view: F) -> F:
    """Mark ``view`` as a JSON endpoint: its errors are answered in JSON."""
    view.forge_ci_json = True  # type: ignore[attr-defined]
    return view


def init_app(app: Flask) -> None:
    app.register_error_handler(ForgeCIError, _forge_ci_error)
    # Flask logs an unhandled exception with its traceback and then calls the 500 handler
    # (in testing, it propagates to the test instead).
    app.register_error_handler(InternalServerError, _internal)
    app.register_error_handler(HTTPException, _http_error)


def _wants_json() -> bool:
    view = current_app.view_functions.get(request.endpoint or "")
    return bool(getattr(view, "forge_ci_json", False))


def _runner_api() -> bool:
    return request.path == protocol.API_PREFIX or request.path.startswith(protocol.API_PREFIX + "/")


def error_response(status: int, code: str, message: str) -> Response | tuple[str, int]:
    if _runner_api():
        response = Response(
            protocol.dumps(protocol.error_body(code, message)), status, mimetype="application/json"
        )
        response.headers["Cache-Control"] = "no-store"
        return response
    if _wants_json():
        response = jsonify({"error": {"code": code, "message": message}})
        response.status_code = status
        response.headers["Cache-Control"] = "no-store"
        return response
    title = TITLES.get(status, "Error")
    return render_template("error.html", status=status, title=title, message=message), status


def _forge_ci_error(exc: ForgeCIError) -> Response | tuple[str, int]:
    return error_response(exc.http_status, exc.code, exc.message)


def _http_error(exc: HTTPException) -> Response | tuple[str, int]:
    status = exc.code or 500
    if status == 404:
        message = "There is nothing here, or you may not see it."
    elif status == 405:
        message = f"{request.method} is not allowed here."
    elif status == 413:
        message = "The request is larger than this server accepts."
    else:
        message = exc.description or TITLES.get(status, "Error")
    response = error_response(status, exc.name.lower().replace(" ", "_"), message)
    if isinstance(response, Response):
        for name, value in exc.get_headers():  # Allow (405)
            if name.lower() not in ("content-type", "content-length"):
                response.headers[name] = value
        return response
    # Keep headers such as Allow (405) on the friendly page.
    page = current_app.make_response(response)
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            page.headers[name] = value
    return page


def _internal(_exc: InternalServerError) -> Response | tuple[str, int]:
    return error_response(
        500, "internal", "The server failed to answer this request. The error has been logged."
    )
