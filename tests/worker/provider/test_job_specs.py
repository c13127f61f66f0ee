"""What a caller cannot ask for: refusals that happen before anything reaches Docker.

The driver here points at a socket that does not exist, so every refusal below is proven to come
from our own checks, not from the engine.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from forge_ci.errors import ConfigurationError, InvalidInput, Unavailable
from worker.provider.containers import DockerDriver
from worker.provider.jobspec import MAX_STDIN_BYTES, JobContainerSpec, JobLimits, MiB

NOWHERE = "unix:///nonexistent/forge-ci-test/docker.sock"


@pytest.fixture
def offline() -> DockerDriver:
    return DockerDriver("offline", base_url=NOWHERE, egress_network="forge-ci-egress")


@pytest.fixture
def socket_dir(tmp_path: Path) -> Path:
    path = tmp_path / "sock"
    path.mkdir(mode=0o700)
    return path


def spec(socket_dir: Path, **changes: Any) -> JobContainerSpec:
    fields: dict[str, Any] = {
        "attempt_id": "42",
        "workspace": "forge-ci-workspace-42-00000000",
        "socket_dir": socket_dir,
        "stdin": b"{}",
    }
    return JobContainerSpec(**{**fields, **changes})


def test_spec_has_no_field_for_privileges_users_env_or_mounts() -> None:
    names = {field.name for field in dataclasses.fields(JobContainerSpec)}
    assert names == {
        "attempt_id",
        "workspace",
        "socket_dir",
        "stdin",
        "network",
        "limits",
        "command",
    }


@pytest.mark.parametrize(
    "forbidden",
    [
        {"privileged": True},
        {"cap_add": ["SYS_ADMIN"]},
        {"user": "0"},
        {"mounts": ["/var/run/docker.sock:/var/run/docker.sock"]},
        {"volumes": {"/": {"bind": "/host"}}},
        {"devices": ["/dev/kvm"]},
        {"environment": {"FORGE_CI_PROVIDER_TOKEN": "x"}},
        {"security_opt": ["seccomp=unconfined"]},
        {"network_mode": "host"},
    ],
)
def test_spec_refuses_anything_else(socket_dir: Path, forbidden: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="unexpected keyword"):
        spec(socket_dir, **forbidden)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"attempt_id": ""}, "attempt id"),
        ({"attempt_id": "../etc"}, "attempt id"),
        ({"attempt_id": "a b"}, "attempt id"),
        ({"attempt_id": "-rm"}, "attempt id"),
        ({"attempt_id": "x" * 65}, "attempt id"),
        ({"attempt_id": 42}, "attempt id"),
        ({"workspace": ""}, "workspace"),
        ({"stdin": "text"}, "stdin must be bytes"),
        ({"stdin": b"x" * (MAX_STDIN_BYTES + 1)}, "at most"),
        ({"network": ""}, "network"),
        ({"limits": {"cpus": 1}}, "limits must be JobLimits"),
        ({"command": ()}, "command"),
        ({"command": ["sh"]}, "command"),
        ({"command": ("sh", 1)}, "command"),
    ],
)
def test_spec_rejects_bad_values(socket_dir: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        spec(socket_dir, **changes)


def test_spec_wants_a_path_for_the_socket_dir() -> None:
    with pytest.raises(InvalidInput, match="pathlib.Path"):
        JobContainerSpec("42", "w", "/tmp", b"")  # type: ignore[arg-type]


def test_job_limits_defaults() -> None:
    limits = JobLimits()
    assert (limits.cpus, limits.memory_bytes, limits.pids) == (2.0, 2048 * MiB, 512)
    assert limits.tmp_bytes < limits.memory_bytes


@pytest.mark.parametrize(("memory_mb", "tmp_mb"), [(128, 32), (256, 64), (1024, 256), (2048, 256)])
def test_provider_limits_size_tmp_below_the_memory(memory_mb: int, tmp_mb: int) -> None:
    """``forge-ci provider run --memory-mb 128..256`` failed at start: /tmp was 256 MiB."""
    limits = JobLimits.for_memory(cpus=1, memory_bytes=memory_mb * MiB, pids=64)
    assert (limits.memory_bytes, limits.tmp_bytes) == (memory_mb * MiB, tmp_mb * MiB)
    assert (limits.cpus, limits.pids) == (1, 64)


@pytest.mark.parametrize(
    "changes",
    [
        {"cpus": 0},
        {"cpus": True},
        {"cpus": "2"},
        {"memory_bytes": 1024},
        {"memory_bytes": 2.5 * 1024 * MiB},
        {"pids": 0},
        {"pids": -1},
        {"tmp_bytes": 0},
        {"log_bytes": 10},
        {"memory_bytes": 128 * MiB, "tmp_bytes": 128 * MiB},
    ],
)
def test_job_limits_reject_nonsense(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="job limit"):
        JobLimits(**changes)


@pytest.mark.parametrize("name", ["host", "bridge", "default", "none", "container:abc", "a b"])
def test_driver_refuses_an_egress_network_that_is_no_dedicated_bridge(name: str) -> None:
    with pytest.raises(ConfigurationError, match="dedicated bridge"):
        DockerDriver("p1", base_url=NOWHERE, egress_network=name)


@pytest.mark.parametrize("network", ["host", "bridge", "default", "container:abc", "other-net"])
def test_start_job_refuses_networks_other_than_none_or_the_allowed_bridge(
    offline: DockerDriver, socket_dir: Path, network: str
) -> None:
    with pytest.raises(InvalidInput, match="not allowed; this provider allows 'none' or"):
        offline.start_job(spec(socket_dir, network=network))


def test_without_egress_only_none_is_allowed(socket_dir: Path) -> None:
    driver = DockerDriver("p1", base_url=NOWHERE)
    with pytest.raises(InvalidInput, match="allows 'none'$"):
        driver.start_job(spec(socket_dir, network="forge-ci-egress"))


def test_start_job_refuses_socket_dirs_that_could_expose_the_host(
    offline: DockerDriver, socket_dir: Path, tmp_path: Path
) -> None:
    def refused(path: Path, message: str) -> None:
        with pytest.raises(InvalidInput, match=message):
            offline.start_job(spec(path))

    refused(Path("relative/dir"), "absolute")
    refused(Path(f"{socket_dir}/../sock"), "normalized")
    refused(tmp_path / "missing", "does not exist")
    link = tmp_path / "link"
    link.symlink_to(socket_dir)
    refused(link, "without symlinks")
    (tmp_path / "file").write_text("x")
    refused(tmp_path / "file", "must be a directory")
    refused(Path("/"), "owned by the provider|may hold only Unix sockets")
    (socket_dir / "secret.txt").write_text("x")
    refused(socket_dir, "may hold only Unix sockets; found 'secret.txt'")
    os.unlink(socket_dir / "secret.txt")
    os.chmod(socket_dir, 0o777)
    refused(socket_dir, "not be writable by group or others")


def test_a_socket_dir_of_sockets_passes_our_checks(offline: DockerDriver, socket_dir: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(socket_dir / "api.sock"))
        # Our checks pass; then the (absent) engine is needed for the workspace.
        with pytest.raises(Unavailable, match="not reachable"):
            offline.start_job(spec(socket_dir))


def test_ping_names_an_unreachable_engine(offline: DockerDriver) -> None:
    with pytest.raises(Unavailable, match="Docker engine not reachable"):
        offline.ping()
