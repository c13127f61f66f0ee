"""Fixtures for job containers on the real Docker engine (``docker_engine`` and ``runner_image``
are in tests/conftest.py).

Every test gets its own provider ID, so cleanup by label can never touch anything else, and its
driver's leftovers are removed after the test. ``server`` is the real web application (runner
API included) on 127.0.0.1 over a SQLite ``world`` of people, repositories and a provider.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import BaseWSGIServer, make_server

from forge_ci.coordinator.service import Coordinator
from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.forge_ci.coordinator.world import World
from tests.worker.provider.helpers import Jobs, new_provider_id
from web import create_app
from web.runner_api import register_runner_api
from worker.provider.containers import DockerDriver
from worker.provider.upstream import Server


@pytest.fixture
def driver(runner_image: str) -> Iterator[DockerDriver]:
    driver = DockerDriver(new_provider_id(), runner_image=runner_image)
    yield driver
    driver.remove_leftovers()
    driver.close()


@pytest.fixture
def jobs(driver: DockerDriver, tmp_path: Path) -> Jobs:
    return Jobs(driver, tmp_path / "sockets")


@pytest.fixture
def db_kind() -> str:
    return "sqlite"


@pytest.fixture
def world(database: Database, settings: Settings) -> World:
    return World(database, settings)


@pytest.fixture
def server(world: World, settings: Settings, database: Database) -> Iterator[Server]:
    app = create_app(settings, database=database)
    register_runner_api(app, Coordinator(database.session, settings))
    http: BaseWSGIServer = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield Server("http", "127.0.0.1", http.server_port)
    http.shutdown()
