"""deploy/start-dockerd beside a daemon it cannot reach.

A dockerd in another PID and mount namespace that shares this disk (a CI sandbox beside a
developer's daemon), or a containerd orphaned by a dead dockerd, keeps the bolt databases of its
data root locked. A second daemon on the same data root waits on those locks until dockerd gives
up ("timeout waiting for containerd to start"). start-dockerd must see the lock and use another
data root, and must keep using the data root it was given when nobody holds it.

Each test starts a real dockerd in fresh PID, mount and network namespaces with a private /run,
so it sees no other daemon's socket or pid file, and everything it starts dies with the
namespace.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, need

META_DB = Path("containerd/daemon/io.containerd.metadata.v1.bolt/meta.db")

# Runs as PID 1 of the new namespaces: a private /run, then start-dockerd, then the data root
# the started daemon reports.
IN_NAMESPACE = """
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/lock
"$START_DOCKERD"
echo "root: $(docker info --format '{{.DockerRootDir}}')"
"""


@pytest.fixture
def namespaces() -> None:
    if os.geteuid() != 0:
        need("starting a dockerd in its own namespaces needs root")
    for tool in ("unshare", "dockerd", "docker", "flock"):
        if shutil.which(tool) is None:
            need(f"{tool} is not installed (deploy/start-dockerd installs docker.io)")


def start_in_namespaces(data_root: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        START_DOCKERD=str(REPO_ROOT / "deploy" / "start-dockerd"),
        FORGE_CI_DOCKERD_DATA_ROOT=str(data_root),
        FORGE_CI_DOCKERD_LOG=str(log),
    )
    env.pop("DOCKER_HOST", None)
    return subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount",
            "--mount-proc",
            "--net",
            "bash",
            "-c",
            IN_NAMESPACE,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )


def reported_root(done: subprocess.CompletedProcess[str], log: Path) -> str:
    assert done.returncode == 0, (
        done.stdout + done.stderr + (log.read_text() if log.exists() else "")
    )
    roots = [
        line.removeprefix("root: ")
        for line in done.stdout.splitlines()
        if line.startswith("root: ")
    ]
    assert len(roots) == 1, done.stdout
    return roots[0]


def test_a_free_data_root_is_used(namespaces: None, tmp_path: Path) -> None:
    data_root = tmp_path / "docker"
    done = start_in_namespaces(data_root, tmp_path / "dockerd.log")

    assert reported_root(done, tmp_path / "dockerd.log") == str(data_root)
    assert "is locked by another process" not in done.stdout + done.stderr
    # The daemon created its own bolt database there, and nobody holds it any more.
    assert (data_root / META_DB).is_file()


def test_a_data_root_another_daemon_holds_is_left_to_it(namespaces: None, tmp_path: Path) -> None:
    data_root = tmp_path / "docker"
    held = data_root / META_DB
    held.parent.mkdir(parents=True)
    held.touch()
    fallbacks_before = {path for path in Path("/var/lib").glob("docker-forge-ci-*")}
    with held.open("rb") as holder:
        # What a running containerd does to its metadata database (bbolt: flock, exclusive).
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = start_in_namespaces(data_root, tmp_path / "dockerd.log")
    try:
        root = reported_root(done, tmp_path / "dockerd.log")
        assert f"{held} is locked by another process" in done.stderr
        assert root != str(data_root)
        assert root.startswith("/var/lib/docker-forge-ci-")
        assert f"data root: {root}" in done.stdout
        # Nothing was written into the held data root.
        assert sorted(path.name for path in data_root.iterdir()) == ["containerd"]
    finally:
        for path in set(Path("/var/lib").glob("docker-forge-ci-*")) - fallbacks_before:
            shutil.rmtree(path, ignore_errors=True)
