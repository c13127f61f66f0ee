"""The runner runs only as a non-root PID 1 of its own PID namespace (seed 000, issue #14 item 12).

Elsewhere it refuses before reading its input, unless ``--unsafe-local`` says it is one of its
own tests on a trusted machine; ``test_runner_in_container.py`` runs it where it belongs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.worker.runner.conftest import REPO_ROOT
from worker.runner.main import placement_problem


@pytest.mark.parametrize(
    ("argv", "pid", "uid", "euid", "why"),
    [
        ([], 1, 10001, 10001, None),  # a job container
        (["--unsafe-local"], 4242, 0, 0, None),  # its own tests
        ([], 4242, 10001, 10001, "must be PID 1 of its own PID namespace"),
        ([], 1, 0, 0, "must not run as root"),
        ([], 1, 10001, 0, "must not run as root"),
        (["--local"], 1, 10001, 10001, "unknown arguments"),
    ],
)
def test_where_the_runner_may_run(
    argv: list[str], pid: int, uid: int, euid: int, why: str | None
) -> None:
    problem = placement_problem(argv, pid, uid, euid)
    if why is None:
        assert problem is None
    else:
        assert problem is not None and why in problem


def test_started_on_a_host_it_refuses_before_reading_its_input() -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-m", "worker.runner"],
        input=b"never read",
        capture_output=True,
        timeout=30,
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "PYTHONSAFEPATH": "1"},
    )
    assert done.returncode == 2
    assert b"must be PID 1 of its own PID namespace" in done.stderr
    assert b"--unsafe-local" in done.stderr
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert report["result"] == "error"
