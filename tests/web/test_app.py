"""The application factory: refusals at start, cookies, headers and error pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask

from forge_ci.db import Database
from forge_ci.errors import ConfigurationError, NotFound, SchemaNotCurrent
from forge_ci.settings import Settings
from tests.conftest import make_settings
from tests.web.people import Browser
from web import create_app


def test_an_unmigrated_database_is_refused_at_start(data_dir: Path, empty_db_url: str) -> None:
    from forge_ci.cli.setup import ensure_layout

    settings = make_settings(data_dir, empty_db_url)
    ensure_layout(settings)
    database = Database(settings)
    try:
        with pytest.raises(SchemaNotCurrent, match="forge-ci db upgrade"):
            create_app(settings, database=database)
    finally:
        database.dispose()


def test_a_missing_or_short_session_secret_is_refused(settings: Settings) -> None:
    settings.secret_key_file.unlink()
    with pytest.raises(ConfigurationError, match="run `forge-ci init`"):
        create_app(settings)
    settings.secret_key_file.write_text("short\n")
    with pytest.raises(ConfigurationError, match="shorter than 32 bytes"):
        create_app(settings)


def test_session_cookies_are_httponly_lax_and_secure_behind_https(
    settings: Settings, database: Database, sqlite_db_url: str, tmp_path: Path
) -> None:
    plain = create_app(settings, database=database)
    assert plain.config["SESSION_COOKIE_HTTPONLY"] is True
    assert plain.config["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert plain.config["SESSION_COOKIE_SECURE"] is False
    cookie = plain.test_client().get("/-/login").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie

    from forge_ci.cli.setup import ensure_layout

    https_settings = make_settings(
        tmp_path / "https-data", sqlite_db_url, FORGE_CI_PUBLIC_URL="https://ci.example.org"
    )
    ensure_layout(https_settings)
    https_db = Database(https_settings)
    try:
        secure = create_app(https_settings, database=https_db)
        cookie = secure.test_client().get("/-/login").headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    finally:
        https_db.dispose()


def test_pages_carry_security_headers_and_are_not_cached(app: Flask) -> None:
    response = app.test_client().get("/-/login")
    assert response.status_code == 200
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"
    css = app.test_client().get("/-/static/forge-ci.css")
    assert css.status_code == 200 and css.mimetype == "text/css"
    assert css.headers["Cache-Control"] != "no-store"
    css.close()


def test_scripts_are_served_as_javascript_and_their_imports_exist(app: Flask) -> None:
    # Browsers refuse a module script (and, with nosniff, any script) of another MIME type.
    static = Path(app.static_folder or "")
    scripts = sorted(static.rglob("*.js"))
    assert static / "pipelines.js" in scripts and static / "logview" / "view.js" in scripts
    for script in scripts:
        response = app.test_client().get(f"/-/static/{script.relative_to(static).as_posix()}")
        assert response.status_code == 200, script
        assert response.mimetype in ("text/javascript", "application/javascript"), script
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        response.close()
        for target in re.findall(r'^import .* from "(\./[^"]+)";$', script.read_text(), re.M):
            assert (script.parent / target).resolve().is_file(), f"{script}: {target}"


def test_health_answers_when_the_database_does(app: Flask) -> None:
    response = app.test_client().get("/-/health")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}


def test_unknown_pages_and_methods_get_friendly_pages(browser: Browser) -> None:
    missing = browser.get("/-/nothing/here")
    assert missing.status_code == 404
    assert "There is nothing here" in missing.get_data(as_text=True)
    wrong = browser.get("/-/logout")
    assert wrong.status_code == 405
    assert "POST" in wrong.headers["Allow"]
    assert "GET is not allowed here" in wrong.get_data(as_text=True)


def test_typed_errors_map_to_their_status_and_bugs_to_a_generic_500(
    settings: Settings, database: Database
) -> None:
    app = create_app(settings, database=database)

    @app.route("/-/test/not-found")
    def not_found() -> str:
        raise NotFound("widget 7 not found")

    @app.route("/-/test/bug")
    def bug() -> str:
        raise RuntimeError("secret internal detail /srv/db")

    client = app.test_client()
    response = client.get("/-/test/not-found")
    assert response.status_code == 404
    assert "widget 7 not found" in response.get_data(as_text=True)
    response = client.get("/-/test/bug")
    assert response.status_code == 500
    body = response.get_data(as_text=True)
    assert "failed to answer" in body
    assert "secret internal detail" not in body and "Traceback" not in body
