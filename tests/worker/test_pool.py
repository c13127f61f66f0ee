"""``forge-ci worker --processes N`` (issue #14, finding 9): N worker processes, restarted when
one dies, all stopped by SIGTERM; only the first sweeps leases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from forge_ci.cli.setup import ensure_layout
from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.conftest import REPO_ROOT


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def settled(pool: int) -> list[int]:
    """The pool's two children once both are workers of their own (not a fork before exec)."""
    found = children(pool)
    try:
        ready = len(found) == 2 and all(cmdline(pid)[4:6] == ["--processes", "1"] for pid in found)
    except FileNotFoundError:
        return []
    return found if ready else []


def until(what: str, check: Callable[[], object], seconds: float = 60) -> object:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def test_a_pool_of_workers_restarts_a_dead_one_and_stops_on_sigterm(
    settings: Settings, database: Database, redis_url: str
) -> None:
    ensure_layout(settings)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
        "FORGE_CI_REDIS_URL": redis_url,
    }
    log = settings.data_dir / "pool.log"
    with open(log, "wb") as output:
        pool = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "forge_ci",
                "worker",
                "--processes",
                "2",
                "--scan-interval",
                "1",
            ],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        until("two worker processes", lambda: settled(pool.pid))
        first, second = settled(pool.pid)
        lines = {pid: cmdline(pid) for pid in (first, second)}
        assert sum("--no-sweeper" in line for line in lines.values()) == 1, lines
        # The refusal side of "one hung worker does not stall the rest": a dead one is replaced.
        os.kill(second, signal.SIGKILL)
        until("a replacement", lambda: second not in settled(pool.pid) and settled(pool.pid))
        assert first in children(pool.pid)
        alive = children(pool.pid)
        pool.send_signal(signal.SIGTERM)
        assert pool.wait(timeout=90) == 0, log.read_text()
        for pid in alive:
            assert (
                not Path(f"/proc/{pid}").exists()
                or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
            )
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.wait(10)
    assert "worker pool: 2 processes" in log.read_text()
