"""The Compose deployment's topology, read from the files as Compose itself merges them
(``docker-compose config``: Debian's 1.29, and ``docker compose`` v2 when installed), never
started: who is privileged, who mounts the Docker socket, which ports are published, where the
secrets are. Each rule is also shown to catch the mistake it is there for."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT, need

FILES = (REPO_ROOT / "deploy" / "compose.yml", REPO_ROOT / "deploy" / "compose.pipeline.yml")
#: The overlay for hosts that cannot run privileged containers (see the file).
CAPABILITIES = REPO_ROOT / "deploy" / "compose.dind-capabilities.yml"
PROVIDER_CAPABILITIES = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"}
SOCKET_VOLUMES = {"dind-socket", "provider-state"}
APPLICATION_VOLUMES = {"data", "postgres", "redis"}
SECRET_WORDS = re.compile(r"PASSWORD|TOKEN|SECRET|KEY", re.I)


def _compose_commands() -> list[list[str]]:
    commands = []
    if shutil.which("docker-compose"):
        commands.append(["docker-compose"])
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if shutil.which("docker") and probe.returncode == 0:
        commands.append(["docker", "compose"])
    return commands


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    commands = _compose_commands()
    if not commands:
        need("docker-compose is not installed (deploy/setup-host --tests installs it)")
    secrets = tmp_path_factory.mktemp("secrets")
    for name in ("forge-ci.toml", "metrics_token", "postgres_password", "provider_token"):
        (secrets / name).write_text("placeholder\n")
    env = {**os.environ, "FORGE_CI_SECRETS_DIR": str(secrets)}
    found = []
    for command, files in [(c, f) for c in commands for f in (FILES, (*FILES, CAPABILITIES))]:
        argv = [*command, "--project-name", "topology"]
        for path in files:
            argv += ["--file", str(path)]
        result = subprocess.run(
            [*argv, "config"], capture_output=True, text=True, env=env, check=False
        )
        assert result.returncode == 0, f"{' '.join(command)} refuses the files: {result.stderr}"
        found.append(yaml.safe_load(result.stdout))
    return found


def _volumes(service: dict[str, Any]) -> list[dict[str, Any]]:
    mounts = []
    for entry in service.get("volumes", []):
        if isinstance(entry, str):
            source, _, rest = entry.partition(":")
            target = rest.split(":")[0]
            kind = "bind" if source.startswith(("/", ".")) else "volume"
            entry = {"type": kind, "source": source, "target": target}
        mounts.append(entry)
    return mounts


def _ports(service: dict[str, Any]) -> list[int]:
    published = []
    for entry in service.get("ports", []):
        if isinstance(entry, str):
            published.append(int(entry.split("/")[0].split(":")[-1]))
        else:
            published.append(int(entry["target"]))
    return published


def topology_problems(config: dict[str, Any]) -> list[str]:
    """Every rule of docs/deployment.md ("What is privileged and why") the config breaks."""
    problems = []
    services: dict[str, dict[str, Any]] = config["services"]
    networks = config.get("networks", {})
    for name, service in services.items():
        if service.get("privileged") and name != "dind":
            problems.append(f"{name} is privileged")
        added = set(service.get("cap_add") or [])
        if added and name != "dind" and not (name == "provider" and added <= PROVIDER_CAPABILITIES):
            problems.append(f"{name} adds capabilities {sorted(added)}")
        if name not in ("dind", "provider", "postgres") and "ALL" not in service.get(
            "cap_drop", []
        ):
            problems.append(f"{name} keeps its capabilities")
        for mount in _volumes(service):
            source = str(mount.get("source", ""))
            if "docker.sock" in source or source in ("/var/run", "/run"):
                problems.append(f"{name} mounts the host's Docker socket ({source})")
            if mount["type"] == "bind":
                problems.append(f"{name} bind-mounts {source} from the host")
            if source in SOCKET_VOLUMES and name not in ("dind", "provider"):
                problems.append(f"{name} mounts {source}, which only dind and provider may")
            if source in APPLICATION_VOLUMES and name in ("dind", "provider"):
                problems.append(f"{name} mounts the application volume {source}")
        for key, value in (service.get("environment") or {}).items():
            if SECRET_WORDS.search(key) and not str(value).startswith("/run/secrets/"):
                problems.append(f"{name} gets {key} in its environment, not as a file")
            if re.search(r"://[^/\s:@]+:[^/\s@]+@", str(value)):
                problems.append(f"{name} gets a URL with a password in {key}")
        published = _ports(service)
        expected = {"web": [8080], "ssh": [2222]}.get(name, [])
        if published != expected:
            problems.append(f"{name} publishes {published} (expected {expected})")
        service_networks = set(service.get("networks") or {})
        if name in ("postgres", "redis") and service_networks != {"backend"}:
            problems.append(f"{name} is on {sorted(service_networks)}, not only backend")
        if name == "dind" and service.get("network_mode") != "none":
            problems.append("dind has a network")
        if name == "provider" and service_networks != {"runners"}:
            problems.append(f"provider is on {sorted(service_networks)}, not only runners")
    for network in ("backend", "runners"):
        if not (networks.get(network) or {}).get("internal"):
            problems.append(f"network {network} is not internal")
    secrets = {
        n: [s["source"] if isinstance(s, dict) else s for s in svc.get("secrets", [])]
        for n, svc in services.items()
    }
    for secret, owners in (("provider_token", {"provider"}), ("postgres_password", {"postgres"})):
        holders = {n for n, names in secrets.items() if secret in names}
        if holders != owners:
            problems.append(f"{secret} is given to {sorted(holders)}, not {sorted(owners)}")
    for secret, spec in (config.get("secrets") or {}).items():
        if "file" not in spec:
            problems.append(f"secret {secret} is not a file")
    return problems


def test_compose_accepts_the_files_and_the_topology_holds(configs: list[dict[str, Any]]) -> None:
    for config in configs:
        assert set(config["services"]) == {
            "web",
            "ssh",
            "worker",
            "postgres",
            "redis",
            "dind",
            "provider",
        }
        assert topology_problems(config) == []
        provider = config["services"]["provider"]
        assert {m["target"] for m in _volumes(provider)} == {
            "/run/dind",
            "/var/lib/forge-ci-provider",
        }
        assert {m["target"] for m in _volumes(config["services"]["dind"])} == {
            "/var/lib/docker",
            "/run/dind",
            "/var/lib/forge-ci-provider",
        }
        dind = config["services"]["dind"]
        assert dind.get("privileged") or "SYS_ADMIN" in dind.get("cap_add", [])
        # repo create and clone URLs name the published port, not the listener on 0.0.0.0.
        for name in ("web", "ssh", "worker"):
            environment = config["services"][name]["environment"]
            assert environment["FORGE_CI_PUBLIC_SSH_URL"] == "ssh://git@localhost:2222", name
    # The default is privileged; the overlay trades it for capabilities, never both.
    assert configs[0]["services"]["dind"]["privileged"] is True
    assert configs[1]["services"]["dind"].get("privileged") is False


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        (lambda c: c["services"]["web"].update(privileged=True), "web is privileged"),
        (
            lambda c: c["services"]["worker"]["volumes"].append(
                {"type": "volume", "source": "dind-socket", "target": "/run/dind"}
            ),
            "worker mounts dind-socket",
        ),
        (
            lambda c: c["services"]["provider"]["volumes"].append(
                {"type": "volume", "source": "data", "target": "/var/lib/forge-ci"}
            ),
            "provider mounts the application volume data",
        ),
        (
            lambda c: (
                c["services"]["ssh"]
                .setdefault("volumes", [])
                .append({"type": "bind", "source": "/var/run/docker.sock", "target": "/s"})
            ),
            "ssh mounts the host's Docker socket",
        ),
        (
            lambda c: c["services"]["postgres"]["environment"].update(POSTGRES_PASSWORD="pw"),
            "postgres gets POSTGRES_PASSWORD in its environment",
        ),
        (
            lambda c: c["services"]["worker"]["environment"].update(
                FORGE_CI_DATABASE_URL="postgresql://u:pw@postgres/db"
            ),
            "worker gets a URL with a password",
        ),
        (
            lambda c: c["services"]["redis"].update(ports=["6379:6379"]),
            "redis publishes [6379]",
        ),
        (
            lambda c: c["services"]["dind"].update(network_mode="bridge"),
            "dind has a network",
        ),
        (
            lambda c: c["services"]["web"]["secrets"].append({"source": "provider_token"}),
            "provider_token is given to ['provider', 'web']",
        ),
        (lambda c: c["networks"]["backend"].pop("internal"), "network backend is not internal"),
        (
            lambda c: c["services"]["provider"]["cap_add"].append("SYS_ADMIN"),
            "provider adds capabilities",
        ),
        (
            lambda c: c["services"]["worker"].update(cap_add=["NET_ADMIN"]),
            "worker adds capabilities",
        ),
    ],
)
def test_each_rule_catches_its_mistake(
    configs: list[dict[str, Any]], mistake: Any, expected: str
) -> None:
    broken = copy.deepcopy(configs[0])
    mistake(broken)
    problems = topology_problems(broken)
    assert any(expected in problem for problem in problems), problems
