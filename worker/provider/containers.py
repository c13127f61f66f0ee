"""Job containers: the provider's verbs for Docker, and the only module that imports ``docker``.

Like builds.sr.ht's ``images/control``, the rest of the provider sees a handful of verbs:

    ping, image_exists               is the engine there, is the runner image built?
    create_workspace                 a fresh labelled named volume for one attempt
    start_job                        create the hardened container, start it, write the stdin
                                     payload (assignment and attempt credential), close stdin
    stream_output, wait              follow it
    interrupt, kill                  ask it to stop (SIGTERM to the runner), or end it (SIGKILL)
    remove_job, remove_workspace     dispose of it: the container first, then its volume
    list_leftovers, remove_leftovers after a crash: only what carries this provider's label

Every job container is created from ``DockerDriver._create_args``, the one place where the
hardening lives (docs/security-model.md, "Job containers"). ``JobContainerSpec`` deliberately has
no field for privileged mode, capabilities, users, devices, environment or extra mounts, so no
caller can ask for them. A job container looks like this from inside:

    /                  the runner image, read-only
    /opt/forge-ci/     the runner's code (root-owned); working directory; PID 1 is the runner
    /workspace         per-attempt named volume: writable, executables allowed (builds run them)
    /tmp               tmpfs rw,noexec,nosuid,nodev,size=limits.tmp_bytes; HOME and TMPDIR
    /run/forge-ci/     per-attempt host directory, read-only, holding api.sock: the runner API,
                       served by the provider for this attempt only, and the only way out
    network            "none"; or the operator's egress bridge when this provider allows egress
"""

from __future__ import annotations

import os
import secrets
import socket
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
import docker.utils
import requests
from docker.types import LogConfig, Mount, Ulimit

from forge_ci.errors import (
    ConfigurationError,
    Conflict,
    ForgeCIError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from forge_ci.protocol import RUNNER_API_SOCKET
from worker.provider.jobspec import (
    DEFAULT_RUNNER_IMAGE,
    ID_PATTERN,
    JOB_GID,
    JOB_UID,
    LABEL_ATTEMPT,
    LABEL_PROVIDER,
    LABEL_ROLE,
    NO_NETWORK,
    RESERVED_LABEL_PREFIX,
    SOCKET_DIR_PATH,
    STDIN_TIMEOUT_SECONDS,
    WORKSPACE_PATH,
    JobContainer,
    JobContainerSpec,
    JobLimits,
    Leftovers,
    check_id,
    container_name,
)

# Not a dedicated bridge: the host's namespace, Docker's shared default bridge, no network at all.
_NOT_EGRESS = frozenset({"host", "bridge", "default", NO_NETWORK})
_ICC_OPTION = "com.docker.network.bridge.enable_icc"
_DEFAULT_SOCKET_URL = "unix:///var/run/docker.sock"


def _explain(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc)


@contextmanager
def _docker_errors(what: str) -> Iterator[None]:
    """Translate Docker SDK failures into forge-ci's typed errors, naming what was being done."""
    try:
        yield
    except ForgeCIError:
        raise
    except docker.errors.NotFound as exc:
        raise NotFound(f"{what}: {_explain(exc)}") from exc
    except docker.errors.APIError as exc:
        if exc.status_code == 409:
            raise Conflict(f"{what}: {_explain(exc)}") from exc
        if exc.is_client_error():
            raise ConfigurationError(f"{what}: Docker refused: {_explain(exc)}") from exc
        raise Unavailable(f"{what}: Docker engine error: {_explain(exc)}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise Unavailable(f"{what}: Docker engine not reachable: {exc}") from exc


class DockerDriver:
    """Runs job containers for one provider on one Docker engine.

    Objects it creates carry ``forge-ci.provider=<provider_id>``; it inspects, removes and lists
    only those. Nothing connects until the first verb is called.
    """

    def __init__(
        self,
        provider_id: str,
        *,
        runner_image: str = DEFAULT_RUNNER_IMAGE,
        base_url: str | None = None,
        egress_network: str | None = None,
        limits: JobLimits | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.provider_id = check_id(provider_id, "provider id")
        if egress_network is not None and (
            egress_network in _NOT_EGRESS or not ID_PATTERN.fullmatch(egress_network)
        ):
            raise ConfigurationError(
                f"egress network {egress_network!r} is not allowed: name a dedicated bridge"
                " network (not host, bridge, default, none or another container's)"
            )
        self.runner_image = runner_image
        self.egress_network = egress_network
        self.limits = limits or JobLimits()
        self._base_url = base_url
        self._timeout = timeout
        self._client: Any = None

    def close(self) -> None:
        """Close the connections to the engine. The driver reconnects if used again."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> DockerDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- engine -------------------------------------------------------------------------------

    @property
    def _api(self) -> Any:
        if self._client is None:
            params: dict[str, Any] = (
                {"base_url": self._base_url} if self._base_url else docker.utils.kwargs_from_env()
            )
            where = params.get("base_url") or _DEFAULT_SOCKET_URL
            if where.startswith("unix://"):
                # Fail before the SDK does: its version negotiation leaks its socket on failure.
                _check_unix_socket(where)
            with _docker_errors(f"connecting to Docker at {where}"):
                self._client = docker.APIClient(version="auto", timeout=self._timeout, **params)
        return self._client

    def ping(self) -> None:
        """Raise ``Unavailable`` (with the reason) unless the engine answers."""
        with _docker_errors("pinging the Docker engine"):
            self._api.ping()

    def image_exists(self, name: str | None = None) -> bool:
        """Whether ``name`` (default: the runner image) is present. Never pulls."""
        with _docker_errors(f"looking up image {name or self.runner_image}"):
            try:
                self._api.inspect_image(name or self.runner_image)
            except docker.errors.ImageNotFound:
                return False
        return True

    # -- workspaces ---------------------------------------------------------------------------

    def create_workspace(self, attempt_id: str, labels: Mapping[str, str] | None = None) -> str:
        """Create a fresh named volume for one attempt and return its name. Never reused."""
        check_id(attempt_id, "attempt id")
        extra = dict(labels or {})
        for key, value in extra.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidInput(f"workspace label {key!r}={value!r} must be strings")
            if key.startswith(RESERVED_LABEL_PREFIX):
                raise InvalidInput(f"workspace label {key!r} uses the reserved prefix forge-ci.")
        name = f"forge-ci-workspace-{attempt_id}-{secrets.token_hex(4)}"
        with _docker_errors(f"creating workspace volume {name}"):
            self._api.create_volume(
                name=name, driver="local", labels={**extra, **self._labels(attempt_id, "workspace")}
            )
        return name

    def remove_workspace(self, name: str) -> None:
        """Remove a workspace volume of this provider; already gone is fine. Container first."""
        with _docker_errors(f"removing workspace volume {name}"):
            try:
                info = self._api.inspect_volume(name)
            except docker.errors.NotFound:
                return
            self._require_own(info.get("Labels"), f"volume {name}")
            try:
                self._api.remove_volume(name)
            except docker.errors.NotFound:
                return

    # -- jobs ---------------------------------------------------------------------------------

    def start_job(self, spec: JobContainerSpec) -> JobContainer:
        """Create and start the job container, write ``spec.stdin`` to it and close its stdin.

        Refuses (``InvalidInput``) a network other than none or the allowed egress bridge, a
        socket directory that is not a private directory of sockets, and a workspace that is not
        this attempt's. If anything fails after the container was created, it is removed again.
        """
        network = self._check_network(spec.network)
        _check_socket_dir(spec.socket_dir)
        self._check_workspace(spec)
        name = container_name(self.provider_id, spec.attempt_id)
        with _docker_errors(f"creating job container {name}"):
            try:
                created = self._api.create_container(**self._create_args(spec, network))
            except docker.errors.ImageNotFound:
                raise ConfigurationError(
                    f"runner image {self.runner_image!r} is not present in this Docker engine;"
                    " build it with deploy/build-runner-image (it is never pulled implicitly)"
                ) from None
        container_id = str(created["Id"])
        try:
            with _docker_errors(f"starting job container {name}"):
                # Attach before start so the runner's first read finds the payload's stream.
                attachment = self._api.attach_socket(container_id, {"stdin": 1, "stream": 1})
                # The SDK hands over the hijacked connection's socket (wrapped in a SocketIO on
                # Unix sockets); it is ours to close.
                raw: socket.socket = getattr(attachment, "_sock", attachment)
                try:
                    self._api.start(container_id)
                    _write_and_close(raw, spec.stdin, name)
                finally:
                    attachment.close()
                    raw.close()
        except BaseException:
            # Keep the original error; a container that cannot be removed now is a leftover
            # that remove_leftovers finds by its label.
            with suppress(ForgeCIError), _docker_errors(f"removing job container {name}"):
                self._api.remove_container(container_id, v=True, force=True)
            raise
        return JobContainer(container_id, name, spec.attempt_id, spec.workspace)

    def stream_output(
        self, handle: JobContainer, stream: Literal["stdout", "stderr"] = "stdout"
    ) -> Iterator[bytes]:
        """Yield the container's ``stream`` from its start, following it until the container exits.

        Docker keeps at most ``limits.log_bytes`` of it; the oldest output is dropped first.
        """
        if stream not in ("stdout", "stderr"):
            raise InvalidInput(f"stream must be 'stdout' or 'stderr', got {stream!r}")
        with _docker_errors(f"reading {stream} of job container {handle.name}"):
            yield from self._api.logs(
                handle.id,
                stdout=stream == "stdout",
                stderr=stream == "stderr",
                stream=True,
                follow=True,
            )

    def wait(self, handle: JobContainer, timeout: float) -> int:
        """Wait for the container to exit and return its exit status (137 after ``kill``).

        Raises ``TimeoutError`` when it is still running after ``timeout`` seconds.
        """
        with _docker_errors(f"waiting for job container {handle.name}"):
            try:
                result = self._api.wait(handle.id, timeout=timeout)
            except requests.exceptions.ConnectionError:
                # The SDK reports a read timeout as a connection error: tell them apart by asking.
                if self._api.inspect_container(handle.id)["State"]["Running"]:
                    raise TimeoutError(
                        f"job container {handle.name} still running after {timeout} s"
                    ) from None
                raise
        return int(result["StatusCode"])

    def interrupt(self, handle: JobContainer) -> None:
        """SIGTERM the runner (PID 1), which stops the job's steps and reports. Idempotent."""
        self._signal(handle, "SIGTERM", "interrupting")

    def kill(self, handle: JobContainer) -> None:
        """SIGKILL the container. Idempotent: a stopped or removed container is fine."""
        self._signal(handle, "SIGKILL", "killing")

    def _signal(self, handle: JobContainer, signal: str, doing: str) -> None:
        with _docker_errors(f"{doing} job container {handle.name}"):
            try:
                self._api.kill(handle.id, signal=signal)
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: not running
                    raise

    def remove_job(self, handle: JobContainer) -> None:
        """Remove the container (killing it if needed). Idempotent. Then remove_workspace."""
        with _docker_errors(f"removing job container {handle.name}"):
            try:
                info = self._api.inspect_container(handle.id)
            except docker.errors.NotFound:
                return
            self._require_own(info["Config"].get("Labels"), f"container {handle.name}")
            try:
                self._api.remove_container(handle.id, v=True, force=True)
            except docker.errors.NotFound:
                return

    # -- leftovers ----------------------------------------------------------------------------

    def list_leftovers(self) -> Leftovers:
        """Containers and volumes labelled with this provider's ID (after a crash or restart)."""
        label = f"{LABEL_PROVIDER}={self.provider_id}"
        with _docker_errors("listing leftover job containers and workspaces"):
            containers = self._api.containers(all=True, filters={"label": label})
            volumes = self._api.volumes(filters={"label": label}).get("Volumes") or []
        # The engine filtered by label already; check again before anything gets removed.
        return Leftovers(
            containers=tuple(
                sorted(
                    c["Names"][0].lstrip("/")
                    for c in containers
                    if self._is_own(c.get("Labels")) and c.get("Names")
                )
            ),
            volumes=tuple(sorted(v["Name"] for v in volumes if self._is_own(v.get("Labels")))),
        )

    def remove_leftovers(self) -> Leftovers:
        """Remove this provider's leftover containers, then their volumes; return what went."""
        found = self.list_leftovers()
        for name in found.containers:
            with _docker_errors(f"removing leftover container {name}"):
                try:
                    self._api.remove_container(name, v=True, force=True)
                except docker.errors.NotFound:
                    pass
        for name in found.volumes:
            self.remove_workspace(name)
        return found

    # -- the one place where job containers are configured -----------------------------------

    def _create_args(self, spec: JobContainerSpec, network: str) -> dict[str, Any]:
        """Arguments of ``create_container`` for a job. All hardening lives here; see
        docs/security-model.md "Job containers" before changing anything."""
        limits = spec.limits or self.limits
        host_config = self._api.create_host_config(
            privileged=False,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            read_only=True,
            tmpfs={"/tmp": f"rw,noexec,nosuid,nodev,size={limits.tmp_bytes},mode=1777"},
            mounts=[
                Mount(WORKSPACE_PATH, spec.workspace, type="volume", read_only=False),
                Mount(SOCKET_DIR_PATH, str(spec.socket_dir), type="bind", read_only=True),
            ],
            network_mode=network,
            nano_cpus=round(limits.cpus * 1e9),
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            pids_limit=limits.pids,
            # No core dumps: the runner holds the attempt credential in memory.
            ulimits=[Ulimit(name="core", soft=0, hard=0)],
            # The runner is PID 1 and reaps the job's processes itself; no daemon-default init.
            init=False,
            ipc_mode="private",
            cgroupns="private",
            log_config=LogConfig(
                type="json-file", config={"max-size": str(limits.log_bytes), "max-file": "1"}
            ),
        )
        return {
            "image": self.runner_image,
            "command": list(spec.command) if spec.command else None,
            "name": container_name(self.provider_id, spec.attempt_id),
            "user": f"{JOB_UID}:{JOB_GID}",
            "detach": False,  # with stdin_open: StdinOnce, so closing our stdin ends the runner's
            "stdin_open": True,
            "tty": False,
            "environment": {
                "HOME": "/tmp",
                "TMPDIR": "/tmp",
                "FORGE_CI_RUNNER_SOCKET": RUNNER_API_SOCKET,
            },
            "labels": {
                **self._labels(spec.attempt_id, "job"),
                "forge-ci.workspace": spec.workspace,
            },
            "host_config": host_config,
            # The SDK would otherwise copy proxy settings from ~/.docker/config.json into the job.
            "use_config_proxy": False,
        }

    # -- checks -------------------------------------------------------------------------------

    def _labels(self, attempt_id: str, role: str) -> dict[str, str]:
        return {LABEL_PROVIDER: self.provider_id, LABEL_ATTEMPT: attempt_id, LABEL_ROLE: role}

    def _is_own(self, labels: Mapping[str, str] | None) -> bool:
        return bool(labels) and (labels or {}).get(LABEL_PROVIDER) == self.provider_id

    def _require_own(self, labels: Mapping[str, str] | None, what: str) -> None:
        if not self._is_own(labels):
            raise PermissionDenied(
                f"{what} does not carry {LABEL_PROVIDER}={self.provider_id}; not touching it"
            )

    def _check_network(self, network: str) -> str:
        if network == NO_NETWORK:
            return NO_NETWORK
        if self.egress_network is None or network != self.egress_network:
            allowed = "'none'" + (f" or {self.egress_network!r}" if self.egress_network else "")
            raise InvalidInput(
                f"job network {network!r} is not allowed; this provider allows {allowed}"
            )
        with _docker_errors(f"inspecting egress network {network}"):
            try:
                info = self._api.inspect_network(network)
            except docker.errors.NotFound:
                raise ConfigurationError(
                    f"egress network {network!r} does not exist; create it with: docker network"
                    f" create --driver bridge -o {_ICC_OPTION}=false {network}"
                ) from None
        if info.get("Driver") != "bridge":
            raise ConfigurationError(f"egress network {network!r} is not a bridge network")
        if (info.get("Options") or {}).get(_ICC_OPTION) != "false":
            raise ConfigurationError(
                f"egress network {network!r} lets containers reach each other; recreate it with"
                f" -o {_ICC_OPTION}=false"
            )
        return network

    def _check_workspace(self, spec: JobContainerSpec) -> None:
        with _docker_errors(f"inspecting workspace volume {spec.workspace}"):
            try:
                labels = self._api.inspect_volume(spec.workspace).get("Labels") or {}
            except docker.errors.NotFound:
                raise InvalidInput(f"workspace volume {spec.workspace!r} does not exist") from None
        expected = self._labels(spec.attempt_id, "workspace")
        if any(labels.get(key) != value for key, value in expected.items()):
            raise InvalidInput(
                f"workspace volume {spec.workspace!r} is not this provider's workspace for"
                f" attempt {spec.attempt_id}"
            )


def _check_socket_dir(path: Path) -> None:
    """The socket directory must be a private directory of the provider holding only sockets,
    so that mounting it can expose nothing else of the host."""
    if not path.is_absolute() or os.path.normpath(path) != str(path):
        raise InvalidInput(f"socket directory {path} must be an absolute, normalized path")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise InvalidInput(f"socket directory {path} does not exist") from None
    if not stat.S_ISDIR(info.st_mode) or os.path.realpath(path) != str(path):
        raise InvalidInput(f"socket directory {path} must be a directory, reached without symlinks")
    if info.st_uid != os.geteuid():
        raise InvalidInput(f"socket directory {path} must be owned by the provider's user")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InvalidInput(f"socket directory {path} must not be writable by group or others")
    with os.scandir(path) as entries:
        for entry in entries:
            if not stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                raise InvalidInput(
                    f"socket directory {path} may hold only Unix sockets; found {entry.name!r}"
                )


def _check_unix_socket(url: str) -> None:
    path = url.removeprefix("unix://")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(10)
    try:
        probe.connect(path)
    except OSError as exc:
        raise Unavailable(f"Docker engine not reachable at {url}: {exc.strerror or exc}") from None
    finally:
        probe.close()


def _write_and_close(raw: socket.socket, payload: bytes, name: str) -> None:
    """Write the payload to the attached stdin and half-close it, so the runner reads EOF."""
    raw.settimeout(STDIN_TIMEOUT_SECONDS)
    try:
        raw.sendall(payload)
        raw.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        # The container exited without reading everything; its exit status will say so.
        pass
    except TimeoutError:
        raise TimeoutError(
            f"job container {name} did not read its stdin within {STDIN_TIMEOUT_SECONDS} s"
        ) from None
