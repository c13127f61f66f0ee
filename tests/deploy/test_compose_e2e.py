"""The Compose deployment for real: ``deploy/forge-ci-deploy`` on a fresh project name.

One module, one story, cleaning up only its own Compose project (``down -v``):

1. ``up``: images built (cached by content hash), everything healthy, the provider registered.
2. alice pushes over SSH to the composed ssh service; the run's ``ok`` job runs in a container
   of the DinD engine (seen there, never on the host engine) under the provider's limits, and
   succeeds; its ``hog`` job allocates past its memory limit and is killed by DinD's cgroups.
3. ``upgrade`` (to the same version) keeps the run and its logs.
4. ``backup``, ``down -v`` (every volume gone), ``restore``, ``up``: the user, the repository's
   refs (byte-identical, hidden pins included, compared through a second backup's manifest),
   the run and its logs are back, and the secret too: a new push's job reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forge_ci_testing.forge import free_port
from forge_ci_testing.git import GitClient
from forge_ci_testing.keys import make_key
from tests.conftest import REPO_ROOT, need
from tests.forge_ci.backup.test_backup_restore import SET_TOKEN

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

DEPLOY = REPO_ROOT / "deploy" / "forge-ci-deploy"
MEMORY_MB = 384
WORKFLOW = """\
name: CI
on: [push]
jobs:
  ok:
    runs-on: [self-hosted, linux]
    steps:
      - run: |
          echo "hello from dind"
          cat /sys/fs/cgroup/memory.max 2>/dev/null ||
            cat /sys/fs/cgroup/memory/memory.limit_in_bytes
          sleep 6
      - run: test "$TOKEN" = "$EXPECTED" && echo "secret ok"
        env:
          TOKEN: ${{ secrets.TOKEN }}
          EXPECTED: s3cret-value
  hog:
    runs-on: [self-hosted, linux]
    steps:
      - run: python3 -c "b = [bytearray(16 << 20) for _ in range(64)]; print('survived')"
"""


class Deployment:
    """``deploy/forge-ci-deploy`` for one Compose project, with its own deploy.env."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = f"fcie2e{uuid.uuid4().hex[:8]}"
        self.web_port = free_port()
        self.ssh_port = free_port()
        tag = os.environ.get("FORGE_CI_RUNNER_IMAGE", "forge-ci-runner:latest").rpartition(":")[2]
        settings = {
            "COMPOSE_PROJECT_NAME": self.project,
            "FORGE_CI_BIND_ADDRESS": "127.0.0.1",
            "FORGE_CI_WEB_PORT": str(self.web_port),
            "FORGE_CI_SSH_PORT": str(self.ssh_port),
            "FORGE_CI_PUBLIC_URL": f"http://127.0.0.1:{self.web_port}",
            "FORGE_CI_PUBLIC_SSH_HOST": "127.0.0.1",
            "FORGE_CI_SECRETS_DIR": str(root / "secrets"),
            "FORGE_CI_BACKUP_DIR": str(root / "backups"),
            "FORGE_CI_APP_IMAGE": f"forge-ci-app:{tag}",
            "FORGE_CI_DIND_IMAGE": f"forge-ci-dind:{tag}",
            "FORGE_CI_RUNNER_IMAGE": f"forge-ci-runner:{tag}",
            "FORGE_CI_POSTGRES_IMAGE": f"forge-ci-postgres:{tag}",
            "FORGE_CI_REDIS_IMAGE": f"forge-ci-redis:{tag}",
            "FORGE_CI_WEB_WORKERS": "1",
            "FORGE_CI_PROVIDER_NAME": "dind",
            "FORGE_CI_PROVIDER_LABELS": "self-hosted,linux,x64",
            "FORGE_CI_PROVIDER_SLOTS": "2",
            "FORGE_CI_JOB_CPUS": "1",
            "FORGE_CI_JOB_MEMORY_MB": str(MEMORY_MB),
            "FORGE_CI_JOB_PIDS": "128",
        }
        self.env_file = root / "deploy.env"
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FORGE_CI_", "COMPOSE"))}
        env["FORGE_CI_DEPLOY_ENV"] = str(self.env_file)
        result = subprocess.run(
            [str(DEPLOY), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"forge-ci-deploy {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
            )
        return result

    def cli(self, *args: str, stdin: str | None = None) -> str:
        return self("cli", *args, stdin=stdin).stdout

    def run(self, number: int) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            self.cli("run", "show", "alice/app", str(number), "--json")
        )
        return data

    def wait_run(self, number: int, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self("cli", "run", "show", "alice/app", str(number), "--json", check=False)
            if result.returncode == 0:
                run: dict[str, Any] = json.loads(result.stdout)
                if run["state"] == "completed":
                    return run
            time.sleep(2)
        logs = self("compose", "logs", "--tail=40", "provider", check=False).stdout
        raise AssertionError(f"run {number} did not complete; the provider said:\n{logs}")

    def dind_containers(self) -> str:
        return self(
            "compose",
            "exec",
            "-T",
            "dind",
            "docker",
            "-H",
            "unix:///run/dind/docker.sock",
            "ps",
            "--all",
            "--format",
            "{{.Labels}}",
        ).stdout


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if shutil.which("docker-compose") is None:
        need("docker-compose is not installed (deploy/setup-host --tests installs it)")
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        need("no Docker engine (deploy/start-dockerd)")
    deployment = Deployment(tmp_path_factory.mktemp("deployment"))
    try:
        yield deployment
    finally:
        deployment("down", "-v", "--remove-orphans", check=False, timeout=300)


def _jobs(run: dict[str, Any]) -> dict[str, str | None]:
    return {job["key"]: job["conclusion"] for job in run["jobs"]}


def test_compose_deployment_runs_jobs_in_dind_upgrades_and_survives_backup_and_restore(
    deployment: Deployment, tmp_path: Path
) -> None:
    # 1. up.
    out = deployment("up").stdout
    assert f"ssh://git@127.0.0.1:{deployment.ssh_port}/" in out
    assert f"http://127.0.0.1:{deployment.web_port}" in out
    key = make_key(tmp_path)
    deployment.cli("user", "add", "alice", "--no-password")
    deployment.cli("key", "add", "alice", "/dev/stdin", stdin=Path(f"{key}.pub").read_text())
    deployment.cli("repo", "create", "alice/app")
    deployment.cli("repo", "push-workflows", "alice/app", "on")
    # 2. A push over SSH (the branch first: a secret is granted to an existing branch), then
    # the workflow; its jobs run in DinD.
    git = GitClient(tmp_path / "alice", key, deployment.ssh_port)
    work = git.work_tree()
    git.git("push", "-q", git.url("alice/app.git"), "main", cwd=work)
    deployment.cli(*SET_TOKEN, "-", stdin="s3cret-value")

    (work / ".github" / "workflows").mkdir(parents=True)
    (work / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    git.git("add", ".", cwd=work)
    git.git("commit", "-q", "-m", "ci", cwd=work)
    git.git("push", "-q", git.url("alice/app.git"), "main", cwd=work)
    seen_in_dind = ""
    deadline = time.monotonic() + 300
    while "forge-ci.role:job" not in seen_in_dind and "forge-ci.role=job" not in seen_in_dind:
        assert time.monotonic() < deadline, "no job container ever appeared in the DinD engine"
        seen_in_dind = deployment.dind_containers()
        time.sleep(1)
    # The host engine never ran this deployment's jobs: it knows none of DinD's containers.
    for line in seen_in_dind.splitlines():
        container = line.split(" ", 1)[0]
        probe = subprocess.run(["docker", "inspect", container], capture_output=True, check=False)
        assert probe.returncode != 0, f"container {container} is on the host engine"
    run = deployment.wait_run(1)
    assert _jobs(run) == {"ok": "success", "hog": "failure"}, run
    logs = deployment("cli", "run", "logs", "alice/app", "1").stdout
    assert "hello from dind" in logs and "secret ok" in logs
    assert str(MEMORY_MB * 1024 * 1024) in logs  # the limit, as the job's cgroup shows it
    assert "hog | survived" not in logs.splitlines()  # killed before it could say so
    assert "Killed" in logs and "exit status 137" in logs

    # 3. upgrade to the same version keeps runs and logs.
    upgraded = deployment("upgrade")
    assert "to roll back" in upgraded.stderr
    assert _jobs(deployment.run(1)) == _jobs(run)
    assert deployment("cli", "run", "logs", "alice/app", "1").stdout == logs

    # 4. backup, down -v, restore, up.
    backup = Path(deployment("backup").stdout.strip().splitlines()[-1])
    manifest = json.loads((backup / "manifest.json").read_text())
    refs = manifest["repositories"]["alice/app"]
    assert any(name.startswith("refs/forge-ci/") for name in refs)  # the run's hidden pins
    deployment("down", "-v")
    volumes = subprocess.run(
        [
            "docker",
            "volume",
            "ls",
            "--quiet",
            "--filter",
            f"label=com.docker.compose.project={deployment.project}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert volumes.strip() == ""
    deployment("restore", str(backup))
    deployment("up")
    assert "alice" in deployment.cli("user", "list")
    assert _jobs(deployment.run(1)) == _jobs(run)
    assert deployment("cli", "run", "logs", "alice/app", "1").stdout == logs
    again = Path(deployment("backup").stdout.strip().splitlines()[-1])
    assert json.loads((again / "manifest.json").read_text())["repositories"]["alice/app"] == refs
    # The restored secret (and key file, and SSH host key) serve a new push.
    git.commit(work, "after restore")
    git.git("push", "-q", git.url("alice/app.git"), "main", cwd=work)
    rerun = deployment.wait_run(2)
    assert _jobs(rerun)["ok"] == "success", rerun
