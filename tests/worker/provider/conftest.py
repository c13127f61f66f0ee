"""Fixtures for job containers on the real Docker engine (``docker_engine`` and ``runner_image``
are in tests/conftest.py).

Every test gets its own provider ID, so cleanup by label can never touch anything else, and its
driver's leftovers are removed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker.provider.helpers import Jobs, new_provider_id
from worker.provider.containers import DockerDriver


@pytest.fixture
def driver(runner_image: str) -> Iterator[DockerDriver]:
    driver = DockerDriver(new_provider_id(), runner_image=runner_image)
    yield driver
    driver.remove_leftovers()
    driver.close()


@pytest.fixture
def jobs(driver: DockerDriver, tmp_path: Path) -> Jobs:
    return Jobs(driver, tmp_path / "sockets")
