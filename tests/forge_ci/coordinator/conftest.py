"""Fixtures of the coordinator tests: a world on each database, or on SQLite only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_ci.cli.setup import ensure_layout
from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.conftest import make_settings
from tests.forge_ci.coordinator.world import World


def _world(database: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> World:
    created = World(database, settings)
    # The scheduler stamps cancellation requests with its own clock when called without one
    # (cancel_run); make it the test's clock so grace periods are measured consistently.
    monkeypatch.setattr("forge_ci.runs.scheduling.utcnow", created.clock)
    return created


@pytest.fixture
def world(database: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> World:
    return _world(database, settings, monkeypatch)


@pytest.fixture
def sqlite_world(
    tmp_path: Path, sqlite_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """For properties where the database kind does not matter (many examples, one database)."""
    data = tmp_path / "data"
    data.mkdir()
    settings = make_settings(data, sqlite_db_url)
    ensure_layout(settings)
    database = Database(settings)
    yield _world(database, settings, monkeypatch)
    database.dispose()
