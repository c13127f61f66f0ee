"""Job containers on the real Docker engine, checked from inside the container and by inspect."""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forge_ci.errors import ConfigurationError, Conflict, InvalidInput, PermissionDenied
from tests.worker.provider.helpers import (
    JobResult,
    Jobs,
    docker_cli,
    inspect,
    labelled,
    new_provider_id,
)
from worker.provider.containers import DockerDriver
from worker.provider.jobspec import JobContainer, JobContainerSpec, JobLimits, MiB
from worker.provider.socket_dirs import make_socket_dir

pytestmark = pytest.mark.docker

PROBE = (Path(__file__).parent / "probe.py").read_text()
# Looks like an attempt credential; it must reach the runner's stdin and nowhere else.
PAYLOAD = b'{"assignment": {"job": 7}}\n' + secrets.token_hex(32).encode() + b"\n"
DIGEST_OF_STDIN = "hashlib.sha256(sys.stdin.buffer.read()).hexdigest()"
PROBE_LIMITS = JobLimits(cpus=1.5, memory_bytes=384 * MiB, pids=128, tmp_bytes=32 * MiB)


@pytest.fixture(scope="module")
def probe(runner_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Run probe.py once in a job container; yield its facts plus the container's inspect."""
    driver = DockerDriver(new_provider_id(), runner_image=runner_image)
    jobs = Jobs(driver, tmp_path_factory.mktemp("probe") / "sockets")
    abstract_name = f"forge-ci-test-{secrets.token_hex(6)}"
    # Host-side listeners the job must NOT reach: an abstract Unix socket and a loopback port.
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen()
    loopback = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    loopback.bind(("127.0.0.1", 0))
    loopback.listen()
    port = loopback.getsockname()[1]
    try:
        result = jobs.run(
            ["python3", "-S", "-c", PROBE, abstract_name, str(port)],
            stdin=PAYLOAD,
            limits=PROBE_LIMITS,
        )
    finally:
        abstract.close()
        loopback.close()
    assert result.exit_code == 0, result.stderr.decode()
    yield {"facts": result.last_json(), "result": result, "provider": driver.provider_id}
    driver.remove_leftovers()
    driver.close()


def facts(probe: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = probe["facts"]
    return result


def host_config(probe: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = probe["result"].inspect["HostConfig"]
    return result


# -- what the job sees ------------------------------------------------------------------------


def test_job_runs_as_uid_and_gid_10001(probe: dict[str, Any]) -> None:
    seen = facts(probe)
    assert (seen["uid"], seen["euid"], seen["gid"]) == (10001, 10001, 10001)
    assert set(seen["groups"]) <= {10001}


def test_job_has_no_capabilities_at_all(probe: dict[str, Any]) -> None:
    status = facts(probe)["status"]
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])


def test_job_cannot_gain_privileges(probe: dict[str, Any]) -> None:
    status = facts(probe)["status"]
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # Docker's default seccomp filter is in force


def test_root_filesystem_code_and_socket_dir_are_read_only(probe: dict[str, Any]) -> None:
    writes = facts(probe)["write"]
    assert writes["/probe"] == "EROFS"
    assert writes["/etc/probe"] == "EROFS"
    assert writes["/opt/forge-ci/probe"] == "EROFS"
    assert writes["/run/forge-ci/probe"] == "EROFS"
    assert writes["/tmp/probe"] == "written"
    assert writes["/workspace/probe"] == "written"


def test_no_docker_socket_inside(probe: dict[str, Any]) -> None:
    assert facts(probe)["docker_sockets"] == []
    assert facts(probe)["run_forge_ci"] == ["api.sock"]


def test_tmp_is_a_bounded_noexec_tmpfs(probe: dict[str, Any]) -> None:
    tmp = facts(probe)["mounts"]["/tmp"]
    assert tmp["fstype"] == "tmpfs"
    assert {"noexec", "nosuid", "nodev"} <= set(tmp["options"].split(","))
    assert f"size={32 * 1024}k" in tmp["super"].split(",")
    assert facts(probe)["exec"]["/tmp"] == "EACCES"


def test_workspace_is_the_jobs_own_and_may_run_build_outputs(probe: dict[str, Any]) -> None:
    assert facts(probe)["workspace_owner"] == [10001, 10001]
    assert facts(probe)["exec"]["/workspace"] == "ran"


def test_home_and_tmpdir_are_on_the_tmpfs(probe: dict[str, Any]) -> None:
    env = facts(probe)["env"]
    assert env["HOME"] == "/tmp"
    assert env["TMPDIR"] == "/tmp"
    assert env["FORGE_CI_RUNNER_SOCKET"] == "/run/forge-ci/api.sock"


def test_job_command_is_pid_1_without_init_and_dumps_nothing(probe: dict[str, Any]) -> None:
    seen = facts(probe)
    assert seen["pid"] == 1
    assert seen["pid1_cmdline"][:3] == ["python3", "-S", "-c"]
    assert seen["core_limit"] == [0, 0]


def test_network_is_loopback_only(probe: dict[str, Any]) -> None:
    seen = facts(probe)
    assert seen["net"] == ["lo"]
    assert seen["reach"] == {
        "host_abstract_socket": "ECONNREFUSED",  # the host's abstract sockets are invisible
        "loopback_port_of_host": "ECONNREFUSED",  # its loopback is its own, nothing listens
        "docker_bridge_gateway": "ENETUNREACH",  # no route anywhere
    }


def test_runner_api_socket_is_reachable(probe: dict[str, Any]) -> None:
    assert facts(probe)["api_reply"] == "pong ping from job\n"
    assert probe["result"].received == [b"ping from job\n"]


def test_stdin_payload_arrives_and_appears_nowhere_else(probe: dict[str, Any]) -> None:
    seen = facts(probe)
    result: JobResult = probe["result"]
    assert seen["stdin_len"] == len(PAYLOAD)
    assert seen["stdin_sha256"] == hashlib.sha256(PAYLOAD).hexdigest()
    credential = PAYLOAD.splitlines()[1].decode()
    assert credential not in json.dumps(result.inspect)  # argv, env, labels, mounts
    assert credential not in json.dumps(seen["env"])
    assert credential not in json.dumps(seen["pid1_cmdline"])
    assert result.inspect["Config"]["OpenStdin"] is True
    assert result.inspect["Config"]["StdinOnce"] is True


def test_limits_are_set_and_in_force(probe: dict[str, Any]) -> None:
    config = host_config(probe)
    assert config["Memory"] == 384 * MiB
    assert config["MemorySwap"] == 384 * MiB  # equal: no swap
    assert config["PidsLimit"] == 128
    assert config["NanoCpus"] == 1_500_000_000
    seen = facts(probe)
    assert int(seen["cgroup_memory"]) == 384 * MiB
    if seen["cgroup_memsw"] is not None:
        assert seen["cgroup_memsw"] in (str(384 * MiB), "0")
    assert seen["cgroup_pids"] == "128"


def test_inspect_shows_every_hardening_control(probe: dict[str, Any]) -> None:
    config = host_config(probe)
    result: JobResult = probe["result"]
    assert config["Privileged"] is False
    assert config["CapDrop"] == ["ALL"]
    assert not config["CapAdd"]
    assert config["SecurityOpt"] == ["no-new-privileges:true"]
    assert config["ReadonlyRootfs"] is True
    assert config["NetworkMode"] == "none"
    assert config["Init"] is False
    assert config["IpcMode"] == "private"
    assert not config["Binds"]
    assert not config["Devices"]
    assert not config["PortBindings"]
    assert not config["VolumesFrom"]
    assert config["PidMode"] == ""
    assert config["Tmpfs"] == {"/tmp": f"rw,noexec,nosuid,nodev,size={32 * MiB},mode=1777"}
    assert config["Ulimits"] == [{"Name": "core", "Soft": 0, "Hard": 0}]
    assert config["LogConfig"]["Type"] == "json-file"
    assert result.inspect["Config"]["User"] == "10001:10001"
    mounts = sorted(result.inspect["Mounts"], key=lambda mount: mount["Destination"])
    assert [(m["Type"], m["Destination"], m["RW"]) for m in mounts] == [
        ("bind", "/run/forge-ci", False),
        ("volume", "/workspace", True),
    ]
    assert mounts[1]["Name"] == result.handle.workspace


def test_job_left_nothing_behind(probe: dict[str, Any]) -> None:
    assert labelled(probe["provider"]) == ([], [])


# -- behaviour --------------------------------------------------------------------------------


def test_default_command_is_the_runner(jobs: Jobs) -> None:
    result = jobs.run(None)
    assert result.inspect["Config"]["Cmd"] == ["python3", "-S", "-m", "worker.runner"]
    assert result.inspect["Config"]["WorkingDir"] == "/opt/forge-ci"
    # Empty stdin is no assignment: the runner reports a configuration error (exit 2).
    assert result.exit_code == 2
    assert result.last_json()["result"] == "error"
    assert "the runner input is empty" in result.last_json()["reason"]


def test_stdout_and_stderr_come_back_separately(jobs: Jobs) -> None:
    result = jobs.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")


def test_a_large_stdin_payload_arrives_whole(jobs: Jobs) -> None:
    payload = secrets.token_bytes(3 * MiB)
    result = jobs.run(
        ["python3", "-S", "-c", f"import hashlib,sys; print({DIGEST_OF_STDIN})"],
        stdin=payload,
    )
    assert result.stdout.decode().strip() == hashlib.sha256(payload).hexdigest()


def test_memory_limit_kills_a_job_that_exceeds_it(jobs: Jobs) -> None:
    result = jobs.run(
        ["python3", "-S", "-c", "x = bytearray(400 * 1024 * 1024); print('survived')"],
        limits=JobLimits(memory_bytes=128 * MiB, tmp_bytes=16 * MiB),
    )
    assert result.exit_code == 137
    assert result.inspect["State"]["OOMKilled"] is True
    assert b"survived" not in result.stdout


def test_pids_limit_stops_a_fork_bomb(jobs: Jobs) -> None:
    bomb = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(5); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('stopped', n, exc.errno)\n"
    )
    result = jobs.run(["python3", "-S", "-c", bomb], limits=JobLimits(pids=32))
    words = result.stdout.decode().split()
    assert words[0] == "stopped" and int(words[1]) < 32 and words[2] == "11"  # EAGAIN


def test_wait_times_out_and_kill_stops_the_job(driver: DockerDriver, tmp_path: Path) -> None:
    workspace = driver.create_workspace("slow")
    socket_dir = make_socket_dir(tmp_path / "sockets", "slow")
    handle = driver.start_job(
        JobContainerSpec("slow", workspace, socket_dir, b"", command=("sleep", "60"))
    )
    with pytest.raises(TimeoutError, match="still running"):
        driver.wait(handle, timeout=1)
    driver.kill(handle)
    assert driver.wait(handle, timeout=30) == 137
    driver.kill(handle)  # idempotent once stopped
    driver.remove_job(handle)
    driver.remove_job(handle)  # and once removed
    driver.kill(handle)
    driver.remove_workspace(workspace)
    driver.remove_workspace(workspace)
    assert labelled(driver.provider_id) == ([], [])
    assert not driver.list_leftovers()


def test_one_container_per_attempt(driver: DockerDriver, tmp_path: Path) -> None:
    workspace = driver.create_workspace("once")
    socket_dir = make_socket_dir(tmp_path / "sockets", "once")
    spec = JobContainerSpec("once", workspace, socket_dir, b"", command=("sleep", "60"))
    driver.start_job(spec)
    name = f"forge-ci-job-{driver.provider_id}-once"
    with pytest.raises(Conflict, match=name):
        driver.start_job(spec)
    assert labelled(driver.provider_id)[0] == [name]


def test_workspaces_are_fresh_labelled_and_reserved_labels_refused(driver: DockerDriver) -> None:
    first = driver.create_workspace("a1", {"run": "12"})
    second = driver.create_workspace("a1")
    assert first != second and first.startswith("forge-ci-workspace-a1-")
    details = inspect("volume", first)
    assert details is not None
    assert details["Labels"] == {
        "forge-ci.provider": driver.provider_id,
        "forge-ci.attempt": "a1",
        "forge-ci.role": "workspace",
        "run": "12",
    }
    with pytest.raises(InvalidInput, match="reserved prefix"):
        driver.create_workspace("a1", {"forge-ci.provider": "someone-else"})


def test_workspace_of_another_attempt_or_provider_is_refused(
    driver: DockerDriver, runner_image: str, tmp_path: Path
) -> None:
    socket_dir = make_socket_dir(tmp_path / "sockets", "a2")
    mine_for_a1 = driver.create_workspace("a1")
    other = DockerDriver(new_provider_id(), runner_image=runner_image)
    theirs_for_a2 = other.create_workspace("a2")
    try:
        for workspace in (mine_for_a1, theirs_for_a2, "no-such-volume"):
            with pytest.raises(InvalidInput, match="workspace"):
                driver.start_job(JobContainerSpec("a2", workspace, socket_dir, b""))
        assert labelled(driver.provider_id)[0] == []
    finally:
        other.remove_leftovers()
        other.close()


def test_image_checks(driver: DockerDriver, runner_image: str, tmp_path: Path) -> None:
    assert driver.image_exists()
    assert driver.image_exists(runner_image)
    assert not driver.image_exists("forge-ci-no-such-image:never")
    missing = DockerDriver(driver.provider_id, runner_image="forge-ci-no-such-image:never")
    workspace = missing.create_workspace("img")
    socket_dir = make_socket_dir(tmp_path / "sockets", "img")
    with missing, pytest.raises(ConfigurationError, match="build-runner-image"):
        missing.start_job(JobContainerSpec("img", workspace, socket_dir, b""))


def test_a_start_that_docker_refuses_leaves_nothing(driver: DockerDriver, tmp_path: Path) -> None:
    workspace = driver.create_workspace("big")
    socket_dir = make_socket_dir(tmp_path / "sockets", "big")
    spec = JobContainerSpec("big", workspace, socket_dir, b"", limits=JobLimits(cpus=512))
    with pytest.raises(ConfigurationError, match="(?i)cpu"):
        driver.start_job(spec)
    assert labelled(driver.provider_id) == ([], [workspace])


# -- leftovers: only our own --------------------------------------------------------------------


@pytest.fixture
def decoys(runner_image: str) -> Iterator[dict[str, str]]:
    """A container and a volume labelled for ANOTHER provider, made with the docker CLI."""
    suffix = secrets.token_hex(4)
    other = f"decoy-{suffix}"
    names = {"provider": other, "container": f"forge-ci-job-decoy-{suffix}"}
    names["volume"] = f"forge-ci-workspace-decoy-{suffix}"
    label = f"forge-ci.provider={other}"
    docker_cli("volume", "create", "--label", label, names["volume"])
    docker_cli("create", "--label", label, "--name", names["container"], runner_image, "true")
    yield names
    docker_cli("rm", "-f", names["container"], check=False)
    docker_cli("volume", "rm", names["volume"], check=False)


def test_remove_leftovers_removes_only_this_providers_objects(
    driver: DockerDriver, decoys: dict[str, str], tmp_path: Path
) -> None:
    workspace = driver.create_workspace("crashed")
    socket_dir = make_socket_dir(tmp_path / "sockets", "crashed")
    driver.start_job(
        JobContainerSpec("crashed", workspace, socket_dir, b"", command=("sleep", "60"))
    )
    spare = driver.create_workspace("never-started")
    found = driver.list_leftovers()
    assert found.containers == (f"forge-ci-job-{driver.provider_id}-crashed",)
    assert found.volumes == tuple(sorted([workspace, spare]))

    assert driver.remove_leftovers() == found
    assert labelled(driver.provider_id) == ([], [])
    assert not driver.list_leftovers()
    assert inspect("container", decoys["container"]) is not None
    assert inspect("volume", decoys["volume"]) is not None
    assert labelled(decoys["provider"]) == ([decoys["container"]], [decoys["volume"]])


def test_foreign_objects_are_never_removed_by_name(
    driver: DockerDriver, decoys: dict[str, str]
) -> None:
    with pytest.raises(PermissionDenied, match="does not carry"):
        driver.remove_workspace(decoys["volume"])
    container_id = inspect("container", decoys["container"])["Id"]  # type: ignore[index]
    handle = JobContainer(container_id, decoys["container"], "decoy", decoys["volume"])
    with pytest.raises(PermissionDenied, match="does not carry"):
        driver.remove_job(handle)
    assert inspect("container", decoys["container"]) is not None
    assert inspect("volume", decoys["volume"]) is not None


# -- egress ---------------------------------------------------------------------------------------


@pytest.fixture
def egress_network() -> Iterator[str]:
    """A dedicated, internal (no route out) bridge with inter-container traffic disabled."""
    name = f"forge-ci-test-egress-{secrets.token_hex(4)}"
    docker_cli(
        "network", "create", "--driver", "bridge", "--internal",
        "-o", "com.docker.network.bridge.enable_icc=false", name,
    )  # fmt: skip
    yield name
    docker_cli("network", "rm", name, check=False)


def test_allowed_egress_bridge_gives_the_job_an_interface(
    runner_image: str, egress_network: str, tmp_path: Path
) -> None:
    driver = DockerDriver(
        new_provider_id(), runner_image=runner_image, egress_network=egress_network
    )
    try:
        jobs = Jobs(driver, tmp_path / "sockets")
        result = jobs.run(["ls", "/sys/class/net"], network=egress_network)
        assert result.stdout.split() == [b"eth0", b"lo"]
        assert result.inspect["HostConfig"]["NetworkMode"] == egress_network
        # "none" stays the default even where egress is allowed.
        assert jobs.run(["ls", "/sys/class/net"]).stdout.split() == [b"lo"]
        with pytest.raises(InvalidInput, match="not allowed"):
            jobs.run(["true"], network="bridge")
    finally:
        driver.remove_leftovers()
        driver.close()


def test_egress_network_that_lets_jobs_talk_to_each_other_is_refused(
    runner_image: str, tmp_path: Path
) -> None:
    name = f"forge-ci-test-icc-{secrets.token_hex(4)}"
    docker_cli("network", "create", "--driver", "bridge", "--internal", name)
    driver = DockerDriver(new_provider_id(), runner_image=runner_image, egress_network=name)
    try:
        jobs = Jobs(driver, tmp_path / "sockets")
        with pytest.raises(ConfigurationError, match="enable_icc=false"):
            jobs.run(["true"], network=name)
        docker_cli("network", "rm", name)
        with pytest.raises(ConfigurationError, match="does not exist"):
            jobs.run(["true"], network=name)
        assert labelled(driver.provider_id)[0] == []
    finally:
        driver.remove_leftovers()
        driver.close()
        docker_cli("network", "rm", name, check=False)
