"""One real forge-ci (web, ssh, worker, a two-slot provider, Redis, Docker) for the e2e tests.

Started once for the session (it takes a few seconds); every test works in its own repository.
Without Docker the tests skip with the reason (a failure under ``FORGE_CI_REQUIRE_ALL=1``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from forge_ci_testing.forge import Forge, docker_names
from tests.conftest import RedisServer, need


@pytest.fixture(scope="session")
def forge(runner_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    for tool in ("git", "ssh", "redis-server"):
        if shutil.which(tool) is None:
            need(f"{tool} is not installed")
    redis = RedisServer(tmp_path_factory.mktemp("e2e-redis"))
    redis.start()
    world = Forge(tmp_path_factory.mktemp("e2e"), redis.url, runner_image)
    try:
        world.start()
        yield world
    finally:
        world.stop()
        redis.stop()
    # The provider removed everything it created; nothing of its label may stay behind.
    containers, volumes = docker_names(world.provider_id)
    assert (containers, volumes) == ([], []), "the provider left containers or volumes behind"


@pytest.fixture
def live(forge: Forge) -> Forge:
    """The forge with its provider running (a test before may have killed it)."""
    forge.ensure_provider()
    return forge
