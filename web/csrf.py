"""Cross-site request forgery protection for every browser form.

Synchronizer tokens: the session (a signed cookie) holds one random token; every form carries it
in a hidden ``csrf_token`` field (JavaScript may send it as ``X-CSRF-Token``), and every unsafe
request (POST, PUT, PATCH, DELETE) whose token is missing or different is refused before its view
runs. The login form is protected too, so nobody can sign a visitor in to someone else's account.
Blueprints that authenticate without cookies (the runner API's bearer credentials) are exempted
by name with :func:`exempt`.

SameSite=Lax cookies already keep most cross-site posts from carrying the session; the token
also covers older browsers and same-site attackers.
"""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, current_app, request, session
from markupsafe import Markup, escape

from forge_ci.errors import ForgeCIError

FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
SESSION_KEY = "csrf"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_EXEMPT = "forge_ci.csrf_exempt"


class CsrfRefused(ForgeCIError):
    """An unsafe request without this session's token (a stale page or a forged form)."""

    code = "csrf"
    http_status = 400


def init_app(app: Flask) -> None:
    app.extensions.setdefault(_EXEMPT, set())
    app.before_request(_check)
    app.jinja_env.globals["csrf_token"] = token
    app.jinja_env.globals["csrf_field"] = field


def exempt(app: Flask, blueprint_name: str) -> None:
    """Let ``blueprint_name`` accept unsafe requests without a token (no cookie authentication)."""
    app.extensions.setdefault(_EXEMPT, set()).add(blueprint_name)


def token() -> str:
    """This session's token, created on first use."""
    value = session.get(SESSION_KEY)
    if not isinstance(value, str):
        value = secrets.token_urlsafe(32)
        session[SESSION_KEY] = value
    return value


def rotate() -> str:
    """Replace the token (at login), so a token learned before signing in is worthless."""
    session.pop(SESSION_KEY, None)
    return token()


def field() -> Markup:
    """The hidden form field that carries the token."""
    return Markup(f'<input type="hidden" name="{FIELD}" value="{escape(token())}">')


def _check() -> None:
    if request.method not in UNSAFE_METHODS:
        return
    if request.routing_exception is not None:  # no view runs: the 404 or 405 says why
        return
    if request.blueprint in current_app.extensions[_EXEMPT]:
        return
    expected = session.get(SESSION_KEY)
    sent = request.headers.get(HEADER) or request.form.get(FIELD)
    if (
        not isinstance(expected, str)
        or not sent
        or not hmac.compare_digest(sent.encode(), expected.encode())
    ):
        raise CsrfRefused(
            "This form has expired or did not come from this site. Reload the page and try again."
        )
