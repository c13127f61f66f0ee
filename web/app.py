"""The Flask application factory: browser pages, browser JSON endpoints (and the runner API).

Nothing happens at import time. :func:`create_app` is called once per process (in each gunicorn
worker after the fork, or by the development server), opens the database engine for that
process, refuses a database whose schema is not current, and wires the pieces together::

    create_app(settings)
      ├─ storage    one SQLAlchemy session per request, from forge_ci.db.Database
      ├─ auth       the browser session cookie -> the current Actor; /-/login, /-/logout
      ├─ csrf       a token in every form; unsafe methods without it are refused
      ├─ errors     ForgeCIError -> its http_status with a friendly page (or JSON)
      ├─ views      home, repository pages, pipelines, runs and their polling endpoints,
      │             administration (users, providers)
      └─ runner_api /-/runner-api/v1: bearer credentials only, no cookies, no CSRF
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask, Response, request
from flask.sessions import SecureCookieSessionInterface

from forge_ci import protocol
from forge_ci.db import Database
from forge_ci.errors import ConfigurationError
from forge_ci.settings import Settings
from web import auth, csrf, errors, present, routing, storage
from web.runner_api import register_runner_api
from web.views import admin, health, live, metrics, pipelines, providers, repositories, runs
from web.views import settings as settings_pages

SESSION_LIFETIME = timedelta(days=14)

#: Pages may load only our own script, style and images; nothing may frame them.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def read_secret_key(settings: Settings) -> bytes:
    """The session signing key from ``settings.secret_key_file`` (``forge-ci init`` writes it)."""
    path = settings.secret_key_file
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        raise ConfigurationError(
            f"the session secret {path} does not exist; run `forge-ci init`"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the session secret {path}: {exc.strerror}") from None
    if len(key) < 32:
        raise ConfigurationError(
            f"the session secret {path} is shorter than 32 bytes; replace it with "
            "`openssl rand -hex 32`"
        )
    return key


def create_app(settings: Settings, *, database: Database | None = None) -> Flask:
    """Build the web application for this process.

    ``database`` is opened from the settings unless given (tests share one). The schema is
    checked first: an unmigrated or newer database raises SchemaNotCurrent and nothing starts.
    """
    secret_key = read_secret_key(settings)
    if database is None:
        # Browser requests and long-polling runner claims share the pool; threads wait for a
        # connection rather than failing when many arrive at once.
        database = Database(settings, pool_size=10, max_overflow=20, pool_timeout=30)
    database.require_current_schema()

    app = Flask(
        __name__,
        static_url_path="/-/static",
        static_folder="static",
        template_folder="templates",
    )
    https = settings.public_url.startswith("https://")
    app.config.update(
        SECRET_KEY=secret_key,
        SESSION_COOKIE_NAME="forge_ci_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=https,
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,
        # The server-side session ends SESSION_LIFETIME after sign-in whatever the cookie says,
        # so re-signing the cookie on every answer (a run page polls every 2 s) buys nothing.
        SESSION_REFRESH_EACH_REQUEST=False,
        PREFERRED_URL_SCHEME="https" if https else "http",
        MAX_CONTENT_LENGTH=1024 * 1024,
        TEMPLATES_AUTO_RELOAD=False,
    )
    app.session_interface = _BrowserSessions()
    app.jinja_env.autoescape = True
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True

    routing.init_app(app)
    storage.init_app(app, settings, database)
    auth.init_app(app)
    present.init_app(app)
    csrf.init_app(app)
    errors.init_app(app)
    app.register_blueprint(auth.blueprint)
    app.register_blueprint(admin.blueprint)
    app.register_blueprint(providers.blueprint)
    app.register_blueprint(health.blueprint)
    app.register_blueprint(metrics.blueprint)
    app.register_blueprint(repositories.blueprint)
    app.register_blueprint(pipelines.blueprint)
    app.register_blueprint(runs.blueprint)
    app.register_blueprint(live.blueprint)
    app.register_blueprint(settings_pages.blueprint)
    register_runner_api(app)
    app.after_request(_security_headers)
    return app


class _BrowserSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, never written by the runner API.

    The runner API authenticates with bearer credentials only; a browser cookie sent along
    was refreshed (``Set-Cookie``, ``Vary: Cookie``) on every call (issue #14, finding 13).
    """

    def save_session(self, app: Flask, session: Any, response: Response) -> None:
        if (
            request.path.startswith(protocol.API_PREFIX + "/")
            or request.path == protocol.API_PREFIX
        ):
            return
        super().save_session(app, session, response)


def _security_headers(response: Response) -> Response:
    headers: Any = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    # Pages show what one signed-in person may see; keep them out of shared and back-button
    # caches. Static files set their own caching.
    if not response.direct_passthrough:
        headers.setdefault("Cache-Control", "no-store")
    return response
