"""The standard runner image: its tools and its tool cache, as a job sees them.

Every check runs in a container hardened like a job's (UID 10001, read-only root, no network,
no capabilities, /tmp noexec, a writable workspace volume). The tool cache is checked with the
real ``actions/setup-python`` and ``actions/setup-node`` code (../shared/actions bundles): their
``dist`` bundles, run with node as the runner runs them, must find the image's versions in
``RUNNER_TOOL_CACHE`` without any download.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import action_bundle

pytestmark = pytest.mark.docker

REPO_ROOT = Path(__file__).resolve().parents[3]
TOOL_CACHE = "/opt/hostedtoolcache"


@pytest.fixture(scope="module")
def image(runner_image: str) -> str:
    """The runner image of this checkout (tests/conftest.py builds it once per session)."""
    return runner_image


@pytest.fixture
def volume(docker_engine: None) -> Iterator[str]:
    name = f"forge-ci-image-test-{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "volume", "create", name], check=True, capture_output=True)
    yield name
    subprocess.run(["docker", "volume", "rm", "-f", name], check=False, capture_output=True)


def run_job_like(
    image: str, volume: str, script: str, *, mounts: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    command = [
        "docker", "run", "--rm", "--read-only", "--network=none", "--user", "10001:10001",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
        "--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m,mode=1777",
        "--mount", f"type=volume,source={volume},target=/workspace",
    ]  # fmt: skip
    for mount in mounts:
        command += ["--mount", mount]
    command += ["--workdir", "/workspace", "--entrypoint", "bash", image, "-euc", script]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_each_tool_runs_as_the_job_user_with_a_read_only_root(image: str, volume: str) -> None:
    script = r"""
    test "$(id -u):$(id -g)" = 10001:10001
    for tool in bash git curl make gcc g++ cc python3 node npm npx; do
        printf '%s=%s\n' "$tool" "$("$tool" --version 2>&1 | head -n 1)"
    done
    test -f /etc/ssl/certs/ca-certificates.crt && echo certificates=yes
    printf 'int main(void) { return 42; }\n' > hello.c
    printf 'hello: hello.c\n\tcc -o $@ $<\n' > Makefile
    make -s && { ./hello || echo "c=$?"; }
    python3 -m venv venv && venv/bin/python -m pip --version | cut -d' ' -f1-2
    venv/bin/python -c 'import sys; print("venv", sys.prefix != sys.base_prefix)'
    HOME=$PWD node -e 'console.log("node", process.versions.node.split(".")[0])'
    HOME=$PWD npm --version >/dev/null && echo npm=runs
    git init -q repo && git -C repo -c user.name=a -c user.email=a@b commit -q --allow-empty -m x
    git -C repo log --format=log=%s
    touch /usr/local/bin/x 2>/dev/null && echo root=writable || echo root=read-only
    touch /opt/hostedtoolcache/x 2>/dev/null && echo cache=writable || echo cache=read-only
    curl -sS --max-time 5 http://127.0.0.1:9/ >/dev/null 2>&1 || echo network=refused
    """
    done = run_job_like(image, volume, script)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for tool in ("bash", "git", "curl", "make", "gcc", "g++", "cc", "python3", "node", "npm"):
        line = next(x for x in out.splitlines() if x.startswith(f"{tool}="))
        assert "not found" not in line and len(line) > len(tool) + 1, line
    assert "python3=Python 3." in out
    for expected in (
        "certificates=yes", "c=42", "venv True", "node 24", "npm=runs", "log=x",
        "root=read-only", "cache=read-only", "network=refused",
    ):  # fmt: skip
        assert expected in out.splitlines() or expected in out, (expected, out)
    assert "pip " in out


def test_the_tool_cache_has_githubs_layout(image: str, volume: str) -> None:
    script = f"""
    cd {TOOL_CACHE}
    find . -mindepth 1 -maxdepth 3 | sort
    python_version=$(python3 -c 'import platform; print(platform.python_version())')
    node_version=$(node -p process.versions.node)
    test "$(Python/$python_version/x64/bin/python -c 'import sys; print(sys.prefix)')" = /usr
    Python/$python_version/x64/bin/pip --version >/dev/null
    test "$(node/$node_version/x64/bin/node --version)" = "v$node_version"
    echo "versions $python_version $node_version"
    """
    done = run_job_like(image, volume, script)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    python_version, node_version = lines[-1].split()[1:]
    assert python_version.count(".") == 2 and node_version.startswith("24.")
    for tool, version in (("Python", python_version), ("node", node_version)):
        assert f"./{tool}/{version}/x64" in lines
        assert f"./{tool}/{version}/x64.complete" in lines


def _action_tree(tmp_path: Path, name: str, tag: str) -> Path:
    target = tmp_path / name
    bundle = action_bundle(name)
    subprocess.run(["git", "clone", "-q", str(bundle), str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "-q", tag], check=True)
    return target


@pytest.mark.parametrize(
    ("action", "tag", "inputs", "expect_path", "output"),
    [
        (
            "setup-python",
            "v5",
            {
                "python-version": "3.11", "token": "", "check-latest": "false",
                "update-environment": "true", "allow-prereleases": "false",
                "freethreaded": "false",
            },
            "/opt/hostedtoolcache/Python/3.11.",
            "python-version",
        ),
        (
            "setup-node",
            "v4",
            {"node-version": "24", "check-latest": "false", "token": ""},
            "/opt/hostedtoolcache/node/24.",
            "",
        ),
    ],
)  # fmt: skip
def test_setup_actions_find_the_image_versions_without_download(
    image: str,
    volume: str,
    tmp_path: Path,
    action: str,
    tag: str,
    inputs: dict[str, str],
    expect_path: str,
    output: str,
) -> None:
    tree = _action_tree(tmp_path, action, tag)
    tree.chmod(0o755)
    assigned = " ".join(f"'INPUT_{name.upper()}={value}'" for name, value in inputs.items())
    script = f"""
    mkdir -p t && : > t/path && : > t/env && : > t/out
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/workspace RUNNER_TOOL_CACHE={TOOL_CACHE} \\
        RUNNER_TEMP=/workspace/t GITHUB_PATH=/workspace/t/path GITHUB_ENV=/workspace/t/env \\
        GITHUB_OUTPUT=/workspace/t/out {assigned} node /action/dist/setup/index.js
    echo "--- path"; cat t/path; echo "--- out"; cat t/out
    """
    mount = f"type=bind,source={tree},target=/action,readonly"
    done = run_job_like(image, volume, script, mounts=(mount,))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Found in cache" in done.stdout or "Successfully set up" in done.stdout, done.stdout
    assert "::error::" not in done.stdout, done.stdout
    path_part = done.stdout.split("--- path", 1)[1].split("--- out", 1)[0]
    assert any(line.startswith(expect_path) for line in path_part.splitlines()), done.stdout
    if output:
        assert f"{output}<<" in done.stdout.split("--- out", 1)[1]


def test_an_unknown_version_is_not_found_in_the_cache(
    image: str, volume: str, tmp_path: Path
) -> None:
    """The refusal: a version the cache lacks is looked for online, which has no network here."""
    tree = _action_tree(tmp_path, "setup-python", "v5")
    tree.chmod(0o755)
    script = f"""
    mkdir -p t && : > t/path && : > t/env && : > t/out
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/workspace RUNNER_TOOL_CACHE={TOOL_CACHE} \\
        RUNNER_TEMP=/workspace/t GITHUB_PATH=/workspace/t/path GITHUB_ENV=/workspace/t/env \\
        GITHUB_OUTPUT=/workspace/t/out 'INPUT_PYTHON-VERSION=3.9' INPUT_TOKEN= \\
        INPUT_CHECK-LATEST=false INPUT_UPDATE-ENVIRONMENT=true INPUT_ALLOW-PRERELEASES=false \\
        INPUT_FREETHREADED=false node /action/dist/setup/index.js || echo "failed=$?"
    cat t/path
    """
    mount = f"type=bind,source={tree},target=/action,readonly"
    done = run_job_like(image, volume, script, mounts=(mount,))
    assert "failed=1" in done.stdout, done.stdout + done.stderr
    assert "/opt/hostedtoolcache/Python/3.9" not in done.stdout
