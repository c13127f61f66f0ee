"""Fixtures for job containers on the real Docker engine.

The runner image is built (or found up to date) once per session with deploy/build-runner-image.
Every test gets its own provider ID, so cleanup by label can never touch anything else, and its
driver's leftovers are removed after the test. Without a reachable engine the Docker tests skip
with the reason; with ``FORGE_CI_REQUIRE_ALL=1`` that skip is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_ci.errors import Unavailable
from tests.worker.provider.helpers import Jobs, new_provider_id
from worker.provider.containers import DockerDriver

REPO_ROOT = Path(__file__).resolve().parents[3]
REQUIRE_ALL = os.environ.get("FORGE_CI_REQUIRE_ALL") == "1"


def need(reason: str) -> None:
    """Skip for a missing component, or fail when every component is required."""
    if REQUIRE_ALL:
        pytest.fail(f"required component missing (FORGE_CI_REQUIRE_ALL=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    if shutil.which("docker") is None:
        need("Docker engine not reachable: the docker CLI is not installed")
    try:
        with DockerDriver("probe") as engine:
            engine.ping()
    except Unavailable as exc:
        reason = str(exc)
        if not reason.startswith("Docker engine not reachable"):
            reason = f"Docker engine not reachable: {reason}"
        need(f"{reason} (start one with deploy/start-dockerd)")


@pytest.fixture(scope="session")
def runner_image(docker_engine: None) -> str:
    tag = os.environ.get("FORGE_CI_RUNNER_IMAGE") or "forge-ci-runner:latest"
    done = subprocess.run(
        [str(REPO_ROOT / "deploy" / "build-runner-image")],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "FORGE_CI_RUNNER_IMAGE": tag},
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"deploy/build-runner-image failed:\n{done.stderr}")
    return tag


@pytest.fixture
def driver(runner_image: str) -> Iterator[DockerDriver]:
    driver = DockerDriver(new_provider_id(), runner_image=runner_image)
    yield driver
    driver.remove_leftovers()
    driver.close()


@pytest.fixture
def jobs(driver: DockerDriver, tmp_path: Path) -> Jobs:
    return Jobs(driver, tmp_path / "sockets")
