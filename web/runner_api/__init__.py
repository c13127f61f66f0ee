"""The runner API (``/-/runner-api/v1``): machine endpoints for providers and runners.

Separate from browser sessions: a bearer credential (provider or attempt) authenticates each
request; cookies are never read and never set, CSRF tokens do not apply, and errors are JSON,
never login redirects. Every response carries ``Cache-Control: no-store``. Wire formats live
in :mod:`forge_ci.protocol`; the rules in :mod:`forge_ci.coordinator`; this module only reads
bodies (capped, with a deadline), calls the :class:`~forge_ci.coordinator.service.Coordinator`
and maps refusals to statuses with a stable ``code``::

    POST claims                       provider credential   -> {"assignment": {...} | null}
    POST attempts/<id>/start          attempt credential    -> attempt status
    POST attempts/<id>/heartbeat      attempt credential    -> attempt status
    POST attempts/<id>/steps          attempt credential    -> attempt status
    POST attempts/<id>/logs           attempt credential    -> attempt status
    POST attempts/<id>/complete       attempt credential    -> attempt status
    POST attempts/<id>/source.tar     attempt credential    -> application/x-tar (running only)
    POST attempts/<id>/secrets        attempt credential    -> one running step's secret env
    POST attempts/<id>/source.bundle  attempt credential    -> application/x-git-bundle (running
                                                               only; the checkout step's history)
    POST attempts/<id>/actions/<n>.tar  attempt credential  -> application/x-tar (running only)
    POST attempts/<id>/egress         provider credential   -> {"stored": n} (its proxy's audit;
                                                               never relayed for a job)

Register it with :func:`register_runner_api`. Claims long-poll: serve with threads (gunicorn
``gthread`` workers, ``threaded=True`` for the development server); the coordinator lets at
most ``max_waiting`` claims wait per process so other requests always find a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.wsgi import wrap_file

from forge_ci import protocol
from forge_ci.coordinator.credentials import bearer_token
from forge_ci.coordinator.leases import to_ms
from forge_ci.coordinator.service import AttemptRefused, Coordinator
from forge_ci.errors import ForgeCIError
from forge_ci.protocol import BODY_READ_DEADLINE_SECONDS, ProtocolError
from web.runner_api.bodies import read_body
from web.runner_api.peers import client_connected

EXTENSION = "forge_ci.runner_api"

blueprint = Blueprint("runner_api", __name__, url_prefix=protocol.API_PREFIX)


def register_runner_api(app: Flask, coordinator: Coordinator | None = None) -> Coordinator:
    """Serve the runner API from ``app`` with ``coordinator``.

    Without one, it is built from the web app's settings and database (``web.storage``), with
    Redis wake-ups for waiting claims when Redis is reachable. Calling it again replaces the
    coordinator (tests use their own clock).
    """
    if coordinator is None:
        coordinator = _default_coordinator(app)
    app.extensions[EXTENSION] = coordinator
    if blueprint.name not in app.blueprints:
        app.register_blueprint(blueprint)
        from web import csrf

        csrf.exempt(app, blueprint.name)
    return coordinator


def _default_coordinator(app: Flask) -> Coordinator:
    from forge_ci.coordinator.wakeups import WakeupListener, install_publisher
    from web import storage

    state = storage.state(app)
    install_publisher(state.settings.redis_url)
    wakeups = WakeupListener(state.settings.redis_url)
    return Coordinator(state.database.session, state.settings, wakeups=wakeups)


def drain_claims(app: Flask) -> None:
    """Let this process's waiting claims go (it is stopping); see ``Coordinator.drain``."""
    coordinator: Coordinator | None = app.extensions.get(EXTENSION)
    if coordinator is not None:
        coordinator.drain()


def _coordinator() -> Coordinator:
    coordinator: Coordinator = current_app.extensions[EXTENSION]
    return coordinator


def _json(body: dict[str, Any], status: int = 200, **headers: str) -> Response:
    response = Response(protocol.dumps(body), status=status, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    for name, value in headers.items():
        response.headers[name.replace("_", "-")] = value
    return response


def _error(status: int, code: str, message: str, attempt: Any = None) -> Response:
    body = protocol.error_body(code, message)
    if attempt is not None:
        body["attempt"] = attempt.to_json()
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW_Authenticate"] = 'Bearer realm="forge-ci runner API"'
    if status in (408, 413):
        headers["Connection"] = "close"  # the rest of the body was never read
    return _json(body, status, **headers)


def _api(view: Callable[..., Response]) -> Callable[..., Response]:
    """Map every refusal to a JSON error; never leak internals."""

    def wrapper(**kwargs: Any) -> Response:
        try:
            return view(**kwargs)
        except ProtocolError as exc:
            return _error(exc.status, exc.code, exc.message)
        except AttemptRefused as exc:
            return _error(exc.error.http_status, exc.error.code, exc.error.message, exc.status)
        except ForgeCIError as exc:
            return _error(exc.http_status, exc.code, exc.message)
        except Exception:
            current_app.logger.exception("runner API request failed")
            return _error(500, "internal", "the server could not handle this request")

    wrapper.__name__ = view.__name__
    return wrapper


def _token() -> str:
    token = bearer_token(request.headers.get("Authorization"))
    if token is None:
        raise ProtocolError(
            "unauthenticated",
            "send the credential as Authorization: Bearer <64 lowercase hex characters>",
            401,
        )
    return token


def _body(endpoint: str) -> Any:
    if request.mimetype != "application/json":
        raise ProtocolError("invalid_request", "Content-Type must be application/json")
    deadline = current_app.config.get("RUNNER_API_BODY_DEADLINE", BODY_READ_DEADLINE_SECONDS)
    return protocol.parse_request(endpoint, read_body(request.environ, deadline=deadline))


@blueprint.post("/claims")
@_api
def claims() -> Response:
    token = _token()
    claim = _body("claims")
    result = _coordinator().claim(token, claim, connected=client_connected(request.environ))
    return _json(protocol.claim_body(result.assignment, to_ms(result.server_time)))


_ACTIONS = ("start", "heartbeat", "steps", "logs", "complete")


@blueprint.post("/attempts/<attempt_id>/source.tar")
@_api
def source_archive(attempt_id: str) -> Response:
    """The pinned commit as a tar, for a running attempt bound to the asking runner."""
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    token = _token()
    parsed = _body("source")
    archive, _ = _coordinator().source(token, number, parsed)
    return _file_response(archive, "application/x-tar")


@blueprint.post("/attempts/<attempt_id>/source.bundle")
@_api
def source_bundle(attempt_id: str) -> Response:
    """The checkout step's pinned commit and history as a git bundle (see coordinator.bundles)."""
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    token = _token()
    parsed = _body("source")
    archive, _ = _coordinator().source_bundle(token, number, parsed)
    return _file_response(archive, "application/x-git-bundle")


def _file_response(archive: Any, mimetype: str) -> Response:
    response = Response(
        wrap_file(request.environ, archive.file),
        mimetype=mimetype,
        direct_passthrough=True,
    )
    response.content_length = archive.size
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Forge-CI-Commit"] = archive.sha
    response.call_on_close(archive.file.close)
    return response


@blueprint.post("/attempts/<attempt_id>/secrets")
@_api
def step_secrets(attempt_id: str) -> Response:
    """One running step's secret env values, rechecked now (never cached: no-store)."""
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    token = _token()
    parsed = _body("secrets")
    env, status = _coordinator().secrets(token, number, parsed)
    return _json(protocol.secrets_body(parsed.step_id, env, status))


@blueprint.post("/attempts/<attempt_id>/actions/<index>.tar")
@_api
def action_archive(attempt_id: str, index: str) -> Response:
    """The pinned tree of one of the run's actions as a tar (same rules as source.tar)."""
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    if not index.isdigit() or len(index) > 6:
        raise ProtocolError("not_found", f"unknown action archive {index[:20]!r}", 404)
    token = _token()
    parsed = _body("source")
    archive, _ = _coordinator().action_source(token, number, int(index), parsed)
    return _file_response(archive, "application/x-tar")


@blueprint.post("/attempts/<attempt_id>/egress")
@_api
def egress(attempt_id: str) -> Response:
    """The provider's egress proxy records for one of its attempts (provider credential)."""
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    token = _token()
    parsed = _body("egress")
    stored = _coordinator().egress(token, number, parsed)
    return _json({"version": protocol.PROTOCOL_VERSION, "stored": stored})


@blueprint.post("/attempts/<attempt_id>/<action>")
@_api
def attempt_action(attempt_id: str, action: str) -> Response:
    if action not in _ACTIONS:
        raise ProtocolError("not_found", f"unknown attempt endpoint {action[:40]!r}", 404)
    number = protocol.parse_decimal(attempt_id, "attempt id", positive=True)
    token = _token()
    parsed = _body(action)
    coordinator = _coordinator()
    if action == "start":
        status = coordinator.start(token, number, parsed)
    elif action == "heartbeat":
        status = coordinator.heartbeat(token, number, parsed)
    elif action == "steps":
        status = coordinator.step(token, number, parsed)
    elif action == "logs":
        status = coordinator.log(token, number, parsed)
    else:
        status = coordinator.complete(token, number, parsed)
    return _json(status.to_json())
