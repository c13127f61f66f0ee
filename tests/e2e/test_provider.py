"""The provider's guarantees, seen from outside and from inside a job: a killed provider's job
ends ``lost`` and its restart removes what was left; a job cannot see credentials, the server's
settings, the Docker socket or the network, and its socket reaches only its own attempt."""

from __future__ import annotations

import json
import os
import signal

import pytest

from forge_ci_testing.forge import LEASE_SECONDS, LINUX, Forge, docker_names, wait_for, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CI = ".github/workflows/ci.yml"


def test_a_killed_provider_leaves_a_lost_job_and_its_restart_cleans_up(live: Forge) -> None:
    repository = live.repository("crash")
    live.push(
        repository,
        {
            CI: workflow(
                f"""\
  hang:
    runs-on: {LINUX}
    steps:
      - run: echo "hanging on"; sleep 300
"""
            )
        },
    )
    wait_for(
        "the step to be running",
        lambda: "hanging on" in live.logs(repository).get("hang", ""),
        90,
        0.2,
    )
    attempt = live.attempts(repository)["hang"]
    provider = live.processes["provider"]
    os.killpg(provider.pid, signal.SIGKILL)
    provider.wait(10)
    containers, volumes = docker_names(live.provider_id)
    assert containers == [f"forge-ci-job-{live.provider_id}-{attempt.id}"]
    assert len(volumes) == 1 and volumes[0].startswith(f"forge-ci-workspace-{attempt.id}-")

    # Nobody renews the lease: the server ends the job as lost, never as success.
    view = live.wait_run(repository, timeout=LEASE_SECONDS + 30)
    assert live.conclusions(view) == {"hang": "lost"}
    assert live.attempts(repository)["hang"].conclusion == "lost"

    live.start_provider()
    wait_for(
        "the restarted provider to remove the leftovers",
        lambda: docker_names(live.provider_id) == ([], []),
        60,
    )
    log = live.log("provider")
    assert f"attempt {attempt.id} was assigned before the provider stopped" in log
    assert f"forge-ci-job-{live.provider_id}-{attempt.id}" in log.split("removed leftovers")[-1]
    # The attempt was not started again, by this provider or any other.
    assert list(live.attempts(repository)) == ["hang"]
    assert live.attempts(repository)["hang"].id == attempt.id
    records = [json.loads(p.read_text()) for p in (live.state_dir / "claims").glob("*.json")]
    assert [r for r in records if r["attempt_id"]] == []  # only the slots' waiting claims


INSPECT = r"""
import hashlib, http.client, os, re, socket, sys

found = set()
pattern = re.compile(rb"[0-9a-f]{64}")

def scan(data):
    for match in pattern.findall(data):
        found.add(hashlib.sha256(match).hexdigest())

def scan_file(path):
    try:
        with open(path, "rb") as handle:
            scan(handle.read(1 << 20))
        return True
    except OSError:
        return False

for value in os.environ.values():
    scan(value.encode())
for pid in filter(str.isdigit, os.listdir("/proc")):
    for name in ("cmdline", "environ"):
        scan_file(f"/proc/{pid}/{name}")
for top in ("/run", "/tmp", "/workspace", "/etc", "/opt", "/home", "/root", "/var"):
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                scan_file(path)
print("secret hashes:", " ".join(sorted(found)) or "none")
print("runner environ readable:", scan_file("/proc/1/environ"))

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/run/forge-ci/api.sock")

for path in ("/-/runner-api/v1/claims", "/-/runner-api/v1/attempts/1/start"):
    connection = Unix("localhost")
    connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
    print("relay", path, connection.getresponse().status)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    print("server reachable")
except OSError as exc:
    print("server unreachable:", type(exc).__name__)
"""


def test_a_job_runs_locked_down(live: Forge) -> None:
    repository = live.repository("isolation")
    script = "\n".join("          " + line for line in INSPECT.strip().splitlines())
    live.push(
        repository,
        {
            CI: workflow(
                f"""\
  inspect:
    runs-on: {LINUX}
    steps:
      - run: |
          echo "uid=$(id -u) gid=$(id -g)"
          grep -E '^(Cap(Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status
          if touch /probe 2>/dev/null; then echo "root writable"; else echo "root read-only"; fi
          for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo "found $s"; done
          echo "interfaces: $(ls /sys/class/net | tr '\\n' ' ')"
          echo "variables: $(env | cut -d= -f1 | sort | tr '\\n' ' ')"
          cat > inspect.py <<'EOF'
{script}
          EOF
          python3 inspect.py {live.web_port}
"""
            )
        },
    )

    view = live.wait_run(repository)

    log = live.logs(repository)["inspect"]
    assert live.conclusions(view) == {"inspect": "success"}, log
    lines = dict(line.split(":", 1) for line in log.splitlines() if ":" in line)
    assert "uid=10001 gid=10001" in log
    for capability in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert lines[capability].strip() == "0000000000000000", capability
    assert lines["NoNewPrivs"].strip() == "1"
    assert "root read-only" in log
    assert "found /" not in log
    assert lines["interfaces"].split() == ["lo"]
    variables = lines["variables"].split()
    assert "PATH" in variables and "GITHUB_SHA" in variables
    # Nothing of the server's or the provider's settings, nor the runner's own socket variable.
    settings = {name for name in live.env if name.startswith("FORGE_CI_")}
    assert "FORGE_CI_DATABASE_URL" in settings
    forbidden = settings | {"FORGE_CI_RUNNER_SOCKET", "DOCKER_HOST"}
    assert not forbidden & set(variables), variables
    # Neither the provider token nor the attempt credential is anywhere the job can read.
    hashes = set(lines["secret hashes"].split())
    assert live.provider_hash not in hashes
    assert live.attempts(repository)["inspect"].token_hash not in hashes
    assert lines["runner environ readable"].strip() == "False"
    # The socket relays only this attempt's endpoints; the server is not reachable otherwise.
    assert "relay /-/runner-api/v1/claims 403" in log
    attempt_id = live.attempts(repository)["inspect"].id
    if attempt_id != 1:
        assert "relay /-/runner-api/v1/attempts/1/start 403" in log
    assert "server unreachable" in log
