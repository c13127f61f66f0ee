"""What a job container is made of, without Docker: IDs, limits, the spec a caller may choose.

The provider's other modules (and the CLI) build these; only :mod:`worker.provider.containers`
turns them into Docker calls. The mount points are the runner's (``forge_ci.protocol``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from forge_ci.errors import InvalidInput
from forge_ci.protocol import RUNNER_API_SOCKET_NAME, RUNNER_SOCKET_DIR, RUNNER_WORKSPACE

JOB_UID = 10001
JOB_GID = 10001
DEFAULT_RUNNER_IMAGE = "forge-ci-runner:latest"
# The mount points, as the runner expects them (forge_ci.protocol.runner_input draws them).
WORKSPACE_PATH = RUNNER_WORKSPACE
SOCKET_DIR_PATH = RUNNER_SOCKET_DIR
API_SOCKET_NAME = RUNNER_API_SOCKET_NAME
NO_NETWORK = "none"

LABEL_PROVIDER = "forge-ci.provider"
LABEL_ATTEMPT = "forge-ci.attempt"
LABEL_ROLE = "forge-ci.role"
RESERVED_LABEL_PREFIX = "forge-ci."

MiB = 1024 * 1024
GiB = 1024 * MiB
#: The stdin payload is an assignment and a credential, not a data channel.
MAX_STDIN_BYTES = 16 * MiB
#: How long the runner may take to read its stdin before the start counts as failed.
STDIN_TIMEOUT_SECONDS = 30.0

# Provider and attempt IDs become container names and label values.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_id(value: object, what: str) -> str:
    """Return ``value`` if it is a valid provider or attempt ID (a name and label component)."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"{what} must be 1-64 letters, digits, '_', '.' or '-' starting with a letter or"
            f" digit, got {value!r}"
        )
    return value


@dataclass(frozen=True)
class JobLimits:
    """Resources of one job container. Memory includes the /tmp tmpfs; there is no swap."""

    cpus: float = 2.0
    memory_bytes: int = 2 * GiB
    pids: int = 512
    tmp_bytes: int = 256 * MiB
    #: Cap on what Docker keeps of the runner's stdout and stderr (its JSON report goes last).
    log_bytes: int = 8 * MiB

    def __post_init__(self) -> None:
        if isinstance(self.cpus, bool) or not isinstance(self.cpus, int | float):
            raise InvalidInput(f"job limit cpus must be a number, got {self.cpus!r}")
        if not 0.01 <= self.cpus <= 1024:
            raise InvalidInput(f"job limit cpus must be between 0.01 and 1024, got {self.cpus!r}")
        minimums = {"memory_bytes": 64 * MiB, "pids": 16, "tmp_bytes": MiB, "log_bytes": 64 * 1024}
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidInput(
                    f"job limit {name} must be a whole number of at least {minimum}, got {value!r}"
                )
        if self.tmp_bytes >= self.memory_bytes:
            raise InvalidInput("job limit tmp_bytes must be smaller than memory_bytes")

    @classmethod
    def for_memory(cls, *, cpus: float, memory_bytes: int, pids: int) -> JobLimits:
        """Limits with /tmp sized for the memory: the default 256 MiB, but at most a quarter of
        it (/tmp counts against the memory), so that ``--memory-mb 128`` leaves jobs 96 MiB."""
        tmp = min(cls.tmp_bytes, max(memory_bytes // 4, MiB))
        return cls(cpus=cpus, memory_bytes=memory_bytes, pids=pids, tmp_bytes=tmp)


@dataclass(frozen=True)
class JobContainerSpec:
    """What a caller may choose about one job container. Everything else is fixed."""

    attempt_id: str
    #: Name returned by ``DockerDriver.create_workspace`` for this attempt.
    workspace: str
    #: Per-attempt host directory holding only the runner API socket (see ``socket_dirs``).
    socket_dir: Path
    #: Written to the runner's stdin, then stdin is closed. Never argv, environment or a file.
    stdin: bytes
    #: ``"none"``, or the egress bridge network this provider's operator allowed.
    network: str = NO_NETWORK
    #: ``None``: the driver's limits.
    limits: JobLimits | None = None
    #: ``None``: the image's command (the runner). Tests and diagnostics override it.
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_id(self.attempt_id, "attempt id")
        if not isinstance(self.workspace, str) or not self.workspace:
            raise InvalidInput(f"workspace must be a volume name, got {self.workspace!r}")
        if not isinstance(self.socket_dir, Path):
            raise InvalidInput(f"socket_dir must be a pathlib.Path, got {self.socket_dir!r}")
        if not isinstance(self.stdin, bytes):
            raise InvalidInput(f"stdin must be bytes, got {type(self.stdin).__name__}")
        if len(self.stdin) > MAX_STDIN_BYTES:
            raise InvalidInput(
                f"stdin payload is {len(self.stdin)} bytes; at most {MAX_STDIN_BYTES} are allowed"
            )
        if not isinstance(self.network, str) or not self.network:
            raise InvalidInput(f"network must be a network name, got {self.network!r}")
        if self.limits is not None and not isinstance(self.limits, JobLimits):
            raise InvalidInput(f"limits must be JobLimits, got {self.limits!r}")
        if self.command is not None and (
            not isinstance(self.command, tuple)
            or not self.command
            or not all(isinstance(arg, str) for arg in self.command)
        ):
            raise InvalidInput(
                f"command must be a non-empty tuple of strings, got {self.command!r}"
            )


@dataclass(frozen=True)
class JobContainer:
    """Handle of a started job container."""

    id: str
    name: str
    attempt_id: str
    workspace: str


@dataclass(frozen=True)
class Leftovers:
    """Containers and volumes carrying one provider's label, by name."""

    containers: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.containers or self.volumes)


def container_name(provider_id: str, attempt_id: str) -> str:
    """One name per (provider, attempt): attempt ids start at 1 in every forge-ci database, so
    providers of two servers (or a leftover of another provider) sharing an engine never clash."""
    return f"forge-ci-job-{provider_id}-{check_id(attempt_id, 'attempt id')}"
