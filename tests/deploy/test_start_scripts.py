"""deploy/start-dockerd and deploy/start-postgres beside daemons they cannot see.

A CI sandbox may run in its own PID, mount and network namespaces while sharing the disk with a
developer's session whose dockerd and PostgreSQL still run. Neither daemon is visible there: no
socket (private /run), no live pid. The start scripts must then leave the other daemon's state
alone, because starting a second daemon on it fails or corrupts it:

- a second dockerd on a held data root waits on its bolt databases' flocks until it gives up
  ("timeout waiting for containerd to start"); start-dockerd must use another data root;
- a second postmaster on a cluster whose postmaster.pid names an invisible pid removes that
  "stale" file and runs on the same data directory; start-postgres must use another cluster.

And when nobody holds the data root or the cluster, the scripts must use it.

Each test runs the script in fresh PID, mount, network and IPC namespaces with a private /run,
so everything it starts dies with the namespace.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, need

DEPLOY = REPO_ROOT / "deploy"
META_DB = Path("containerd/daemon/io.containerd.metadata.v1.bolt/meta.db")
PRIVATE_RUN = """
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/lock
ip link set lo up
"""


@pytest.fixture
def namespaces() -> None:
    if os.geteuid() != 0:
        need("running the start scripts in their own namespaces needs root")
    for tool in ("unshare", "ip", "flock"):
        if shutil.which(tool) is None:
            need(f"{tool} is not installed")


def in_namespaces(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (bash) as PID 1 of new namespaces, after making /run private."""
    environment = dict(os.environ, **env)
    environment.pop("DOCKER_HOST", None)
    command = ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "--net", "--ipc"]
    return subprocess.run(
        [*command, "bash", "-c", PRIVATE_RUN + script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=150,
    )


def succeeded(done: subprocess.CompletedProcess[str], *logs: Path) -> str:
    """The run's stdout, after checking that it exited 0 (else its output and logs)."""
    extra = "".join(log.read_text() for log in logs if log.exists())
    assert done.returncode == 0, done.stdout + done.stderr + extra
    return done.stdout


def marked(stdout: str, mark: str) -> list[str]:
    return [line.removeprefix(mark) for line in stdout.splitlines() if line.startswith(mark)]


# --- start-dockerd ------------------------------------------------------------------------------

START_DOCKERD = """
"$START_DOCKERD"
echo "root: $(docker info --format '{{.DockerRootDir}}')"
"""


def start_dockerd(data_root: Path, log: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        need("docker.io is not installed (deploy/start-dockerd installs it)")
    return in_namespaces(
        START_DOCKERD,
        START_DOCKERD=str(DEPLOY / "start-dockerd"),
        FORGE_CI_DOCKERD_DATA_ROOT=str(data_root),
        FORGE_CI_DOCKERD_LOG=str(log),
    )


def test_dockerd_uses_a_free_data_root(namespaces: None, tmp_path: Path) -> None:
    data_root, log = tmp_path / "docker", tmp_path / "dockerd.log"
    done = start_dockerd(data_root, log)

    assert marked(succeeded(done, log), "root: ") == [str(data_root)]
    assert "is locked by another process" not in done.stdout + done.stderr
    # The daemon made its own bolt database there.
    assert (data_root / META_DB).is_file()


def test_dockerd_leaves_a_held_data_root_to_its_daemon(namespaces: None, tmp_path: Path) -> None:
    data_root, log = tmp_path / "docker", tmp_path / "dockerd.log"
    held = data_root / META_DB
    held.parent.mkdir(parents=True)
    held.touch()
    fallbacks_before = set(Path("/var/lib").glob("docker-forge-ci-*"))
    with held.open("rb") as holder:
        # What a running containerd does to its metadata database (bbolt: flock, exclusive).
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = start_dockerd(data_root, log)
    try:
        [root] = marked(succeeded(done, log), "root: ")
        assert f"{held} is locked by another process" in done.stderr
        assert root != str(data_root)
        assert root.startswith("/var/lib/docker-forge-ci-")
        assert f"data root: {root}" in done.stdout
        # Nothing was written into the held data root.
        assert [path.name for path in data_root.iterdir()] == ["containerd"]
    finally:
        for path in set(Path("/var/lib").glob("docker-forge-ci-*")) - fallbacks_before:
            shutil.rmtree(path, ignore_errors=True)


# --- start-postgres -----------------------------------------------------------------------------

# Start a cluster, stop it cleanly, start again: the second run must find the first one's cluster
# down and free and start it rather than make another.
START_POSTGRES_TWICE = """
echo "first: $("$START_POSTGRES")"
for cluster in $(pg_lsclusters --no-header | awk '$4 ~ /^online/ {print $1 "/" $2}'); do
    pg_ctlcluster "${cluster%/*}" "${cluster#*/}" stop
done
echo "second: $("$START_POSTGRES")"
"""


def host_clusters() -> dict[str, tuple[str, int]]:
    """The clusters this machine knows, as ``version/name`` -> (status, port)."""
    listing = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout
    rows = map(str.split, listing.splitlines())
    return {f"{row[0]}/{row[1]}": (row[3], int(row[2])) for row in rows}


def test_postgres_leaves_a_cluster_run_elsewhere_alone(namespaces: None) -> None:
    if shutil.which("pg_lsclusters") is None:
        need("PostgreSQL is not installed (deploy/setup-host installs it)")
    before = host_clusters()
    running = [cluster for cluster, (status, _) in before.items() if status.startswith("online")]
    if not running:
        need("no PostgreSQL cluster runs here (deploy/start-postgres starts one)")
    version, name = running[0].split("/")
    pid_file = Path(f"/var/lib/postgresql/{version}/{name}/postmaster.pid")
    pid_before = pid_file.read_text()

    done = in_namespaces(START_POSTGRES_TWICE, START_POSTGRES=str(DEPLOY / "start-postgres"))
    created = set(re.findall(r"creating cluster (\S+)", done.stderr))
    try:
        stdout = succeeded(done)
        [first], [second] = marked(stdout, "first: "), marked(stdout, "second: ")
        assert f"{running[0]} is down here but {pid_file} exists" in done.stderr
        # The namespace's cluster is another one, made once and started again the second time.
        assert len(created) == 1 and not created & set(before), done.stderr
        assert first == second
        url = re.fullmatch(r"postgresql\+psycopg://[^@]+@127\.0\.0\.1:(\d+)/postgres", first)
        assert url and int(url[1]) not in {port for _, port in before.values()}
        # The cluster running here still holds its lock file and still answers.
        assert pid_file.read_text() == pid_before
        assert host_clusters()[running[0]][0].startswith("online")
    finally:
        for cluster in created:
            subprocess.run(["pg_dropcluster", *cluster.split("/")], capture_output=True)
