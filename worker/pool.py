"""``forge-ci worker --processes N``: N worker processes, so one hung job cannot stall them all.

RQ runs one job at a time per worker, in a forked work horse. One worker whose horse hung (issue
#14, finding 9: ``futex_do_wait`` for 4 minutes) processed no repository's events meanwhile.
Here the parent starts N children, each a whole ``forge-ci worker --processes 1`` (scan, RQ
loop); only the first also sweeps leases. The parent runs no jobs and holds no connection:

    forge-ci worker --processes 2
      ├── forge-ci worker --processes 1                (scan + RQ + lease sweeper)
      └── forge-ci worker --processes 1 --no-sweeper   (scan + RQ)

A child that exits while the pool is not stopping is started again (after RESTART_SECONDS).
SIGTERM/SIGINT go to every child, and the parent exits once they all have.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from types import FrameType

log = logging.getLogger(__name__)

RESTART_SECONDS = 1.0
STOP_SECONDS = 60.0


def child_command(index: int, scan_interval: float) -> list[str]:
    command = [sys.executable, "-m", "forge_ci", "worker", "--processes", "1"]
    command += ["--scan-interval", str(scan_interval)]
    if index > 0:
        command.append("--no-sweeper")
    return command


def run_pool(processes: int, scan_interval: float) -> int:
    """Run ``processes`` worker children until SIGTERM/SIGINT; return the exit status."""
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    children = [subprocess.Popen(child_command(i, scan_interval)) for i in range(processes)]
    log.info("worker pool: %d processes %s", processes, [c.pid for c in children])
    try:
        while not stopping.wait(0.5):
            for index, child in enumerate(children):
                status = child.poll()
                if status is None:
                    continue
                log.warning(
                    "worker process %d exited with %s; starting it again", child.pid, status
                )
                time.sleep(RESTART_SECONDS)
                children[index] = subprocess.Popen(child_command(index, scan_interval))
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for child in children:
            try:
                child.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)
    return 0
