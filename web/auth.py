"""Signing in to the browser UI: the session cookie, the current actor, /-/login and /-/logout.

The session cookie is Flask's signed cookie (key from ``settings.secret_key_file``). It holds the
user's id, the token of a server-side session (``forge_ci.signins``) and a *binding*: an HMAC of
the user's password hash. Each request re-reads the session and the user, so logout ends the
session for every copy of the cookie, a deactivated user is signed out at once, a demoted
administrator loses administration, and a changed password ends every session that was signed
in with the old one.

Sign-ins are throttled per account and per address with growing blocks (``forge_ci.signins``);
a blocked attempt is answered 429 without its password being checked. Each login form's CSRF
token is good for one attempt: every answer to a login POST carries a new one.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.wrappers import Response

from forge_ci.accounts import authenticate_password
from forge_ci.authz import Actor
from forge_ci.errors import PermissionDenied
from forge_ci.models import User
from forge_ci.signins import (
    SessionUser,
    blocked_for,
    open_session,
    record_failure,
    record_success,
    revoke_session,
    session_user,
    throttle_keys,
)
from web import csrf
from web.storage import db

blueprint = Blueprint("auth", __name__)

#: One message for every refusal: unknown name, wrong password, deactivated or SSH-only account.
LOGIN_REFUSED = "Incorrect user name or password."
MAX_NAME_LENGTH = 64
MAX_PASSWORD_LENGTH = 1024


def init_app(app: Flask) -> None:
    app.context_processor(lambda: {"current_user": current_user(), "actor": current_actor()})


def _binding(user: User | SessionUser) -> str:
    key = current_app.config["SECRET_KEY"]
    material = f"forge-ci-session:{user.id}:{user.password_hash or ''}".encode()
    return hmac.new(key, material, hashlib.sha256).hexdigest()


def current_user() -> User | SessionUser | None:
    """The signed-in, active user of this request, or None (read as a plain row; the ORM
    object only right after signing in)."""
    if "current_user" not in g:
        g.current_user = _load_user()
    user: User | SessionUser | None = g.current_user
    return user


def _load_user() -> SessionUser | None:
    if not isinstance(session.get("uid"), int):
        return None
    token = session.get("sid")
    user = session_holder(session_user(db(), token)) if isinstance(token, str) else None
    if user is None:
        session.pop("uid", None)
        session.pop("auth", None)
        session.pop("sid", None)
    return user


def session_token() -> str | None:
    """The server-side session's token the request's cookie carries (None: not signed in)."""
    token = session.get("sid")
    return token if isinstance(token, str) and isinstance(session.get("uid"), int) else None


def session_holder(user: SessionUser | None) -> SessionUser | None:
    """``user`` (of the live session :func:`session_token` names, as read now) if the cookie is
    theirs and they are active: the cookie's user id and binding (its password hash) match."""
    binding = session.get("auth")
    if (
        user is None
        or user.id != session.get("uid")
        or not user.is_active
        or not isinstance(binding, str)
        or not hmac.compare_digest(binding, _binding(user))
    ):
        return None
    return user


def current_actor() -> Actor:
    user = current_user()
    return Actor.for_user(user) if user is not None else Actor.anonymous()


def login_redirect() -> Response:
    """Send an anonymous visitor to the login page, coming back here afterwards."""
    target = request.full_path if request.query_string else request.path
    return redirect(url_for("auth.login", next=target))


def require_site_admin() -> Response | None:
    """None when the current user is a site administrator; a login redirect when anonymous.

    Signed-in users who are not administrators get PermissionDenied (403): that the
    administration exists is no secret.
    """
    if current_user() is None:
        return login_redirect()
    if not current_actor().is_site_admin:
        raise PermissionDenied("only site administrators may use the administration")
    return None


def safe_next(value: str | None) -> str:
    """A same-site path to return to after login; anything else becomes the home page."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or any(ord(c) < 32 for c in value):
        return "/"
    return value


@blueprint.route("/-/login", methods=["GET", "POST"])
def login() -> Response | str | tuple[str, int]:
    next_path = safe_next(request.values.get("next"))
    if request.method == "GET":
        if current_user() is not None:
            return redirect(next_path)
        return render_template("login.html", next_path=next_path, name="", error=None)
    name = request.form.get("name", "")
    password = request.form.get("password", "")
    # This form's token is spent, whatever the answer (a refused form gets a new one).
    csrf.rotate()
    keys = throttle_keys(name, request.remote_addr)
    wait = blocked_for(db(), keys)
    if wait > 0:
        seconds = max(1, int(wait + 0.999))
        page = render_template(
            "login.html",
            next_path=next_path,
            name=name,
            error=f"Too many failed sign-ins for this account or address; try again in "
            f"{seconds} s.",
        )
        return Response(page, 429, {"Retry-After": str(seconds)}, mimetype="text/html")
    user = None
    if 0 < len(name) <= MAX_NAME_LENGTH and 0 < len(password) <= MAX_PASSWORD_LENGTH:
        user = authenticate_password(db(), name, password)
    if user is None:
        record_failure(db(), keys)
        db().commit()
        return (
            render_template("login.html", next_path=next_path, name=name, error=LOGIN_REFUSED),
            401,
        )
    record_success(db(), keys)
    token = open_session(db(), user, current_app.permanent_session_lifetime)
    db().commit()
    # A fresh session on every login: nothing chosen before signing in (a planted cookie,
    # its CSRF token) survives into the signed-in session.
    session.clear()
    session["uid"] = user.id
    session["sid"] = token
    session["auth"] = _binding(user)
    session.permanent = True
    csrf.rotate()
    g.current_user = user
    return redirect(next_path)


@blueprint.route("/-/logout", methods=["POST"])
def logout() -> Response:
    token = session.get("sid")
    if isinstance(token, str):
        revoke_session(db(), token)  # every copy of this cookie is signed out, not just this one
        db().commit()
    session.clear()
    g.current_user = None
    flash("You have signed out.")
    return redirect(url_for("auth.login"))
