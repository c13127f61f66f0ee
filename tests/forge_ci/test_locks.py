"""The repository write lock, across real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forge_ci.errors import RepositoryBusy
from forge_ci.locks import repository_lock

HOLDER = """
import sys, time
from pathlib import Path
from forge_ci.locks import repository_lock
with repository_lock(Path(sys.argv[1]), 7, "alice/demo", timeout=5):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""


def _start_holder(locks: Path, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(locks), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "locked"
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def test_a_second_process_waits_then_gets_busy(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 30)
    try:
        started = time.monotonic()
        with pytest.raises(RepositoryBusy, match="repository alice/demo is busy"):
            with repository_lock(tmp_path, 7, "alice/demo", timeout=0.3):
                pass
        assert time.monotonic() - started >= 0.3
        # Another repository's lock is independent.
        with repository_lock(tmp_path, 8, "alice/other", timeout=0.3):
            pass
    finally:
        _stop(holder)


def test_the_lock_is_handed_over_when_the_holder_finishes(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 0.5)
    with repository_lock(tmp_path, 7, "alice/demo", timeout=10):
        assert holder.wait(5) == 0
    assert holder.stdout is not None and holder.stdout.read().strip() == "released"
    _stop(holder)


def test_kill_9_of_the_holder_releases_the_lock(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 60)
    os.kill(holder.pid, signal.SIGKILL)
    _stop(holder)
    with repository_lock(tmp_path, 7, "alice/demo", timeout=2):
        pass


def test_two_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    import threading

    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with repository_lock(tmp_path, 7, "alice/demo", timeout=5):
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(5)
    with pytest.raises(RepositoryBusy):
        with repository_lock(tmp_path, 7, "alice/demo", timeout=0.2):
            pass
    release.set()
    thread.join()
