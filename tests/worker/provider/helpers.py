"""Helpers for job-container tests: the docker CLI as an independent witness, a stand-in for
the provider's runner API socket, and ``Jobs``, which runs throwaway job containers end to end."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.provider.containers import DockerDriver
from worker.provider.jobspec import JobContainer, JobContainerSpec, JobLimits
from worker.provider.socket_dirs import (
    allow_job_connect,
    api_socket_path,
    make_socket_dir,
    remove_socket_dir,
)


def docker_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=120, check=check
    )


def inspect(kind: str, name: str) -> dict[str, Any] | None:
    """``docker <kind> inspect NAME`` as a dict, or None when it does not exist."""
    done = docker_cli(kind, "inspect", name, check=False)
    if done.returncode != 0:
        return None
    result: dict[str, Any] = json.loads(done.stdout)[0]
    return result


def labelled(provider_id: str) -> tuple[list[str], list[str]]:
    """Names of all containers and volumes labelled with ``provider_id``, per the docker CLI."""
    label = f"label=forge-ci.provider={provider_id}"
    containers = docker_cli("ps", "-a", "--filter", label, "--format", "{{.Names}}").stdout
    volumes = docker_cli("volume", "ls", "--filter", label, "--format", "{{.Name}}").stdout
    return containers.split(), volumes.split()


class ApiServer:
    """A stand-in for the provider's runner API socket: answers each line with ``pong <line>``."""

    def __init__(self, path: Path) -> None:
        self.received: list[bytes] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        allow_job_connect(path)
        self._sock.listen()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                line = conn.makefile("rb").readline()
                self.received.append(line)
                conn.sendall(b"pong " + line)

    def close(self) -> None:
        self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=5)


@dataclass
class JobResult:
    handle: JobContainer
    exit_code: int
    stdout: bytes
    stderr: bytes
    #: ``docker inspect`` of the container, taken before it was removed.
    inspect: dict[str, Any]
    #: What the API socket server received.
    received: list[bytes]

    def last_json(self) -> Any:
        return json.loads(self.stdout.decode().strip().splitlines()[-1])


class Jobs:
    """Runs throwaway job containers through one DockerDriver, serving an API socket for each."""

    def __init__(self, driver: DockerDriver, sockets_parent: Path) -> None:
        self.driver = driver
        self.sockets_parent = sockets_parent
        self._count = 0

    def attempt_id(self) -> str:
        self._count += 1
        return f"t{self._count}-{secrets.token_hex(3)}"

    def run(
        self,
        command: Sequence[str] | None,
        *,
        stdin: bytes = b"",
        network: str = "none",
        limits: JobLimits | None = None,
        timeout: float = 60,
    ) -> JobResult:
        attempt = self.attempt_id()
        socket_dir = make_socket_dir(self.sockets_parent, attempt)
        server = ApiServer(api_socket_path(socket_dir))
        workspace = self.driver.create_workspace(attempt)
        try:
            spec = JobContainerSpec(
                attempt_id=attempt,
                workspace=workspace,
                socket_dir=socket_dir,
                stdin=stdin,
                network=network,
                limits=limits,
                command=None if command is None else tuple(command),
            )
            handle = self.driver.start_job(spec)
            try:
                exit_code = self.driver.wait(handle, timeout)
                stdout = b"".join(self.driver.stream_output(handle, "stdout"))
                stderr = b"".join(self.driver.stream_output(handle, "stderr"))
                details = inspect("container", handle.id)
                assert details is not None
            finally:
                self.driver.remove_job(handle)
        finally:
            self.driver.remove_workspace(workspace)
            server.close()
            remove_socket_dir(socket_dir)
        return JobResult(handle, exit_code, stdout, stderr, details, server.received)


def new_provider_id() -> str:
    return f"test-{secrets.token_hex(4)}"
