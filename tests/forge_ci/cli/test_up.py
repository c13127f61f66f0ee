"""``forge-ci up --demo`` from an empty data directory, as the README's main command runs it:
every service, a provider when Docker can run jobs, and the demo pipeline to its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from tests.conftest import REPO_ROOT


def _command_lines() -> list[str]:
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:  # the process ended while we looked
            continue
    return lines


def _up(data: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(data),
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        "FORGE_CI_WEB_LISTEN": "127.0.0.1:0",
        **extra,
    }
    env.pop("FORGE_CI_DATABASE_URL", None)
    env.pop("FORGE_CI_REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "forge_ci", "up", "--demo", "--exit-after-demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _stopped(data: Path) -> bool:
    """Every child was stopped: no process of this data directory is left."""
    return not [cmd for cmd in _command_lines() if str(data) in cmd]


@pytest.mark.docker
@pytest.mark.slow
def test_up_demo_runs_the_pipeline_and_a_second_start_reuses_everything(
    tmp_path: Path, runner_image: str
) -> None:
    data = tmp_path / "data"
    first = _up(data, FORGE_CI_RUNNER_IMAGE=runner_image)

    out = first.stdout
    assert "created provider local" in out
    assert "provider  started" in out
    assert "demo repo   demo/hello" in out
    assert "run #1 of demo/hello: success" in out
    for job in ("lint", "test (Ada)", "test (Grace)", "report"):
        assert f"  {job:<12} success" in out, out
    assert "Hello, Ada!" in out and "Hello, Grace!" in out
    assert "lint chose 'Hello'" in out  # the output went from lint to report through needs
    assert "/demo/hello/pipelines" in out and "git push origin main" in out
    assert pygit2.Repository(str(data / "repositories" / "demo" / "hello.git")).is_bare
    assert (data / "provider-token").stat().st_mode & 0o777 == 0o600
    assert _stopped(data)

    again = _up(data, FORGE_CI_RUNNER_IMAGE=runner_image)

    assert "updated provider local" in again.stdout
    assert "created user" not in again.stdout and "created repository" not in again.stdout
    assert "run #2 of demo/hello: success" in again.stdout
    assert _stopped(data)


@pytest.mark.slow
def test_up_says_what_is_missing_when_jobs_cannot_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = _up(data, FORGE_CI_RUNNER_IMAGE="forge-ci-runner:missing-on-purpose")

    out = result.stdout
    assert "provider  not started:" in out
    assert "jobs will stay queued" in out
    assert "deploy/build-runner-image" in out or "deploy/start-dockerd" in out
    assert "run #1 created; its jobs stay queued until a provider runs them" in out
    assert pygit2.Repository(str(data / "repositories" / "demo" / "hello.git")).is_bare
    assert _stopped(data)
