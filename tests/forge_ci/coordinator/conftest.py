"""Fixtures of the coordinator tests (both databases)."""

from __future__ import annotations

import pytest

from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.forge_ci.coordinator.world import World


@pytest.fixture
def world(database: Database, settings: Settings) -> World:
    return World(database, settings)
