"""A private Redis for tests and benchmarks: no port, no persistence, a socket of its own."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

#: Why a RedisServer cannot be made (LookupError's message): tests skip with it.
MISSING = "redis-server not installed (apt-get install redis-server)"


class RedisServer:
    """A private redis-server on a Unix socket; :meth:`start` it, :meth:`stop` it."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise LookupError(MISSING)
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None
        self.binary = binary

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not self.socket.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def flush(self) -> None:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket))
        client.flushall()
        client.close()
