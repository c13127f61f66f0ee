"""Headless Chromium (Debian's, driven by Playwright) against a real server on 127.0.0.1.

The server is the application under werkzeug's threaded server in a background thread, on a
migrated SQLite database with the ``people`` of tests/web/conftest.py. Each test saves desktop
(1280x800) and phone (390x844) screenshots under ``test-output/web/<test>/`` (ignored by git;
``FORGE_CI_TEST_OUTPUT`` moves it) so that a person can look at them.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import BaseWSGIServer, make_server

from forge_ci.cli.setup import ensure_layout
from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.conftest import REPO_ROOT, make_settings, need
from tests.web.people import PASSWORD, People, create_people
from web import create_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def output_root() -> Path:
    configured = os.environ.get("FORGE_CI_TEST_OUTPUT")
    return Path(configured) if configured else REPO_ROOT / "test-output"


@dataclass
class LiveServer:
    url: str
    settings: Settings
    database: Database
    people: People


def _closing(app: Any) -> Any:
    """``app``, whose answers are closed however the browser leaves.

    Werkzeug's development server closes an answer (a static file, say) only after draining the
    socket, and a browser that resets the connection there (a page left mid-load) makes that
    read raise first: the file stayed open until garbage collection, which the suite's
    warnings-as-errors then charged to whichever test was running.
    """

    def closing(environ: Any, start_response: Any) -> Iterator[bytes]:
        answer = app(environ, start_response)
        try:
            yield from answer
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()

    return closing


@pytest.fixture
def live_server(tmp_path: Path, sqlite_db_url: str) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path / "live-data", sqlite_db_url)
    ensure_layout(settings)
    database = Database(settings)
    people = create_people(database, settings)
    app = create_app(settings, database=database)
    server: BaseWSGIServer = make_server("127.0.0.1", 0, _closing(app), threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    try:
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", settings, database, people)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        database.dispose()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        need(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need("the playwright Python package is not installed")
    manager = sync_playwright().start()
    try:
        browser = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception as exc:  # noqa: BLE001 - any launch failure means "no usable browser"
        manager.stop()
        need(f"Chromium at {CHROMIUM} did not start: {exc}")
    yield browser
    browser.close()
    manager.stop()


class Screens:
    """Saves a page's screenshot at desktop and phone widths under the test's output folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.saved: list[Path] = []

    def snap(self, page: Any, name: str) -> None:
        original = page.viewport_size
        for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(size)
            path = self.folder / f"{len(self.saved) // 2 + 1:02d}-{name}-{label}.png"
            page.screenshot(path=str(path), full_page=True)
            self.saved.append(path)
        page.set_viewport_size(original)


@pytest.fixture
def screens(request: pytest.FixtureRequest) -> Screens:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder = output_root() / "web" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return Screens(folder)


@pytest.fixture
def page(chromium: Any, live_server: LiveServer) -> Iterator[Any]:
    """A fresh browser context (no cookies) at desktop size; script errors and failed loads fail."""
    context = chromium.new_context(viewport=DESKTOP, base_url=live_server.url)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))

    def on_console(message: Any) -> None:
        # Failed loads are checked below, where a page's own (expected) 404 can be told apart.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    def on_response(response: Any) -> None:
        allowed = getattr(tab, "forge_allowed_failures", None)
        if allowed is not None and allowed.search(response.url):
            return
        if response.status >= 400 and response.request.resource_type != "document":
            errors.append(f"{response.status} for {response.url}")

    tab.on("console", on_console)
    tab.on("response", on_response)
    yield tab
    context.close()
    assert not errors, f"browser errors: {errors}"


def allow_failures(page: Any, url_pattern: str) -> None:
    """Failed loads of matching URLs are expected in this test (faults it injects)."""
    page.forge_allowed_failures = re.compile(url_pattern)


def sign_in(page: Any, name: str, password: str = PASSWORD) -> None:
    page.goto("/-/login")
    page.fill("#name", name)
    page.fill("#password", password)
    page.click("button[type=submit]")
