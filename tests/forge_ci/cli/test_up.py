"""``forge-ci up --demo`` from an empty data directory, as the README's main command runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2

from tests.conftest import REPO_ROOT


def _command_lines() -> list[str]:
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:  # the process ended while we looked
            continue
    return lines


def test_up_demo_prepares_an_empty_directory_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(data),
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        "FORGE_CI_WEB_LISTEN": "127.0.0.1:0",
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
    assert "demo repo   demo/hello" in result.stdout
    assert pygit2.Repository(str(data / "repositories" / "demo" / "hello.git")).is_bare
    # Every child was stopped: the private Redis is gone with its socket unanswered.
    assert not [cmd for cmd in _command_lines() if "redis-server" in cmd and str(data) in cmd]
    # A second start reuses what exists.
    again = subprocess.run(
        [sys.executable, "-m", "forge_ci", "up", "--demo", "--exit-after-demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "created" not in again.stdout
