"""The provider service in this process, against the real runner API and the real Docker engine:
a failed cleanup stops all further claims and keeps the claim on disk; the next start removes
the leftovers and never starts that attempt again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.egress import EgressPolicy
from forge_ci.models import Job
from tests.forge_ci.coordinator.world import World, plan_job
from tests.worker.provider.helpers import labelled
from worker.provider import execution
from worker.provider.service import ProviderConfig, ProviderFailed, ProviderService
from worker.provider.upstream import Server

pytestmark = pytest.mark.docker


@pytest.fixture
def config(world: World, server: Server, runner_image: str, tmp_path: Path) -> ProviderConfig:
    return ProviderConfig(
        server=server,
        token=world.provider_token,
        state_dir=tmp_path / "provider",
        runner_image=runner_image,
        slots=1,
        claim_wait=1.0,
        egress=EgressPolicy.parse("none"),  # these jobs need no way out
    )


@pytest.fixture
def cleanup(config: ProviderConfig) -> Iterator[None]:
    yield
    service = ProviderService(config)
    service.prepare()  # removes whatever a test left behind
    service.close()


def _job_states(database: Database) -> list[str]:
    with database.session() as session:
        return sorted(session.scalars(select(Job.state)))


def test_a_failed_cleanup_stops_claims_and_the_restart_cleans_up(
    world: World,
    config: ProviderConfig,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    cleanup: None,
) -> None:
    world.queue_run(plan_job("first"))
    world.queue_run(plan_job("second"))

    def broken(path: Path) -> None:
        raise OSError(f"cannot remove {path}: device busy")

    # A cleanup that fails for real needs a broken engine; this one fault is injected.
    monkeypatch.setattr(execution, "remove_socket_dir", broken)
    service = ProviderService(config)
    service.prepare()
    safety = threading.Timer(120, service.stop)  # should the failure never come
    safety.start()
    try:
        with pytest.raises(ProviderFailed, match="CLEANUP FAILED"):
            service.run()
    finally:
        safety.cancel()
    # One job ran; the provider claimed nothing after its cleanup failed.
    assert _job_states(database) == ["completed", "queued"]
    [record] = service.state.records()
    assert record.attempt_id  # kept: the attempt's fate is for the next start to settle
    assert labelled(service.provider_id) == ([], [])  # container and volume went anyway
    monkeypatch.undo()

    restarted = ProviderService(config)
    restarted.prepare()
    restarted.close()
    assert restarted.state.records() == []
    assert list(restarted.state.sockets_dir.iterdir()) == []
