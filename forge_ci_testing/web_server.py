"""A real ``forge-ci web`` (gunicorn) in a child process on a loopback port (tests, benches)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from forge_ci_testing.forge import REPO_ROOT, free_port


@dataclass(frozen=True)
class LiveWeb:
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/health", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def running_web(
    data_dir: Path, database_url: str, *, workers: int = 2, threads: int = 16, dev: bool = False
) -> Iterator[LiveWeb]:
    """``forge-ci web`` on the data directory (laid out, database migrated) until the block ends."""
    port = free_port()
    log = data_dir / f"web-{port}.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(data_dir),
        "FORGE_CI_DATABASE_URL": database_url,
        "FORGE_CI_WEB_LISTEN": f"127.0.0.1:{port}",
    }
    env.pop("FORGE_CI_CONFIG", None)
    mode = ["--dev"] if dev else ["--workers", str(workers), "--threads", str(threads)]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "forge_ci", "web", *mode],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    live = LiveWeb(port, log)
    try:
        deadline = time.monotonic() + 60
        while not _answers(live.url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("forge-ci web did not start:\n" + log.read_text())
            time.sleep(0.1)
        yield live
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
