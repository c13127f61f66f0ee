"""Starting and watching forge-ci's processes on one machine (``forge-ci up``).

Each service is a ``forge-ci <service>`` child process (plus a private ``redis-server`` when the
Redis URL is the default socket in the data directory). On SIGINT/SIGTERM it stops them in
reverse start order, and when any child dies unexpectedly it stops the others and reports which
one failed: a half-running installation is worse than a stopped one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forge_ci.errors import Unavailable
from forge_ci.settings import Settings


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: What it depends on stops after it: Redis 0, the services 1, the provider (which
    #: reports to the web server) 2. Children of one layer stop together.
    layer: int = 1


def private_redis_socket(settings: Settings) -> Path | None:
    """The socket path when forge-ci should run Redis itself (the default URL), else None."""
    default = f"unix://{settings.run_dir / 'redis.sock'}"
    return settings.run_dir / "redis.sock" if settings.redis_url == default else None


def redis_child(settings: Settings, socket: Path) -> Child:
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable(
            "redis-server is not installed; install it (apt-get install redis-server) or set "
            "FORGE_CI_REDIS_URL to a running Redis"
        )
    argv = [
        binary,
        "--port",
        "0",
        "--unixsocket",
        str(socket),
        "--unixsocketperm",
        "700",
        "--dir",
        str(settings.run_dir),
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    return Child("redis", argv, settings.run_dir / "redis.log", layer=0)


def service_child(settings: Settings, service: str, extra: Sequence[str] = ()) -> Child:
    argv = [sys.executable, "-m", "forge_ci", service, *extra]
    layer = 2 if service == "provider" else 1
    return Child(service, argv, settings.run_dir / f"{service}.log", layer=layer)


class Supervisor:
    """Owns the children: start in order, watch, stop in reverse order."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[Child] = []
        self._stopping = False

    def start(self, child: Child, ready: Path | None = None, timeout: float = 30) -> None:
        """Start ``child``; when ``ready`` is given, wait until that path exists."""
        child.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(child.log_path, "ab")  # noqa: SIM115 - the child owns it until it exits
        child.process = subprocess.Popen(
            child.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**self.env, **child.env},
            start_new_session=True,
        )
        log.close()
        self.children.append(child)
        if ready is not None:
            deadline = time.monotonic() + timeout
            while not ready.exists():
                if child.process.poll() is not None:
                    raise Unavailable(
                        f"{child.name} exited with status {child.process.returncode} while "
                        f"starting; see {child.log_path}"
                    )
                if time.monotonic() > deadline:
                    raise Unavailable(f"{child.name} did not become ready in {timeout:g} s")
                time.sleep(0.05)

    def failed(self) -> Child | None:
        for child in self.children:
            if child.process is not None and child.process.poll() is not None:
                return child
        return None

    def wait(self) -> Child | None:
        """Block until a signal asks us to stop or a child dies; return the dead child."""

        def _on_signal(signum: int, _frame: object) -> None:
            self._stopping = True

        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)
        while not self._stopping:
            dead = self.failed()
            if dead is not None:
                return dead
            time.sleep(0.2)
        return None

    def stop(self, timeout: float = 10) -> None:
        """Stop the children layer by layer, top first, each layer given ``timeout`` seconds.

        Each stops while what it depends on still runs: the provider (which reports its
        interrupted jobs to the web server) first, then web, ssh and worker, Redis last (Redis
        stopped with the others left the worker logging reconnect errors until it was killed).
        A child still running after ``timeout`` is killed; a further Ctrl-C cannot cut this
        short and leave children behind.
        """
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for layer in sorted({child.layer for child in self.children}, reverse=True):
            _stop_together([c for c in self.children if c.layer == layer], timeout)


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        return  # it already exited: nothing left to signal


def _stop_together(children: list[Child], timeout: float) -> None:
    """SIGTERM each running child, wait for all up to ``timeout``, then SIGKILL the rest."""
    running = [(c, c.process) for c in children if c.process is not None]
    for _, process in running:
        if process.poll() is None:
            _signal(process, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for child, process in running:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # Said aloud: a service that ignores SIGTERM is a bug to find in its log.
            print(
                f"{child.name} did not stop within {timeout:g} s of SIGTERM; killed it "
                f"(see {child.log_path})",
                file=sys.stderr,
            )
            _signal(process, signal.SIGKILL)
            process.wait()
