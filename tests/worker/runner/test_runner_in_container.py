"""The real runner in a real, hardened job container, against the real runner API.

The provider's loop (claim, container, supervision) is not part of this test; it wires the
pieces by hand the way that loop will: the runner API is served on the attempt's socket
directory, the job container is created by the Docker driver, and the runner reads the
envelope from its standard input with the container's own paths.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from forge_ci.protocol import RUNNER_API_SOCKET, RUNNER_WORKSPACE
from tests.worker.runner.conftest import Executable, Forge, workflow
from worker.provider.containers import DockerDriver
from worker.provider.jobspec import JobContainerSpec
from worker.provider.socket_dirs import (
    allow_job_connect,
    api_socket_path,
    make_socket_dir,
    remove_socket_dir,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def driver(runner_image: str) -> Iterator[DockerDriver]:
    driver = DockerDriver(f"test-runner-{os.getpid()}", runner_image=runner_image)
    yield driver
    driver.remove_leftovers()
    driver.close()


def test_a_job_runs_in_a_hardened_container(
    forge: Forge, driver: DockerDriver, tmp_path: Path
) -> None:
    steps = """\
      - uses: forge-ci/checkout@v1
      - id: inside
        run: |
          ./hello.sh
          echo "uid=$(id -u) pid1=$(tr '\\0' ' ' < /proc/1/cmdline)"
          echo "workspace=$GITHUB_WORKSPACE home=$HOME tmp=$TMPDIR"
          echo "result=built" >> "$GITHUB_OUTPUT"
          sleep 1000 > /dev/null 2>&1 &
"""
    outputs = "      result: ${{ steps.inside.outputs.result }}\n"
    forge.dispatch(
        workflow(steps, outputs=outputs), {"hello.sh": Executable("#!/bin/sh\necho hello\n")}
    )
    claimed = forge.claim()
    attempt = f"a{claimed.attempt_id}"
    socket_dir = make_socket_dir(tmp_path / "sockets", attempt)
    path = api_socket_path(socket_dir)
    server = make_server(f"unix://{path}", 0, forge.app, threaded=True)
    allow_job_connect(path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    envelope = {
        "version": 1,
        "credential": claimed.token,
        "api_socket": RUNNER_API_SOCKET,
        "workspace": RUNNER_WORKSPACE,
        "assignment": claimed.assignment,
    }
    workspace = driver.create_workspace(attempt)
    try:
        handle = driver.start_job(
            JobContainerSpec(
                attempt_id=attempt,
                workspace=workspace,
                socket_dir=socket_dir,
                stdin=json.dumps(envelope).encode(),
            )
        )
        try:
            exit_code = driver.wait(handle, 60)
            stdout = b"".join(driver.stream_output(handle, "stdout")).decode()
            stderr = b"".join(driver.stream_output(handle, "stderr")).decode()
        finally:
            driver.remove_job(handle)
    finally:
        driver.remove_workspace(workspace)
        server.shutdown()
        server.server_close()
        remove_socket_dir(socket_dir)

    report = json.loads(stdout.strip().splitlines()[-1])
    assert exit_code == 0, (report, stderr)
    assert report["result"] == "success" and report["confirmed"]
    log = forge.log(claimed.attempt_id, "inside", "stdout")
    assert log == (
        "hello\nuid=10001 pid1=python3 -S -m worker.runner \n"
        "workspace=/workspace home=/workspace/.home tmp=/workspace/.tmp\n"
    )
    assert forge.attempt(claimed.attempt_id).conclusion == "success"
    assert forge.job_outputs(claimed.attempt_id) == {"result": "built"}
    assert claimed.token not in stdout + stderr
