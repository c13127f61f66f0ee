"""``forge-ci up --demo`` from an empty data directory, as the README's main command runs it:
every service, a provider when Docker can run jobs, and the demo pipeline to its end."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path

import pygit2
import pytest

from forge_ci.cli.up import cli_hint, up_environment
from tests.conftest import REPO_ROOT


def _command_lines() -> list[str]:
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:  # the process ended while we looked
            continue
    return lines


def _up(data: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(data),
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        "FORGE_CI_WEB_LISTEN": "127.0.0.1:0",
        **extra,
    }
    env.pop("FORGE_CI_DATABASE_URL", None)
    env.pop("FORGE_CI_REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "forge_ci", "up", "--demo", "--exit-after-demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _stopped(data: Path) -> bool:
    """Every child was stopped: no process of this data directory is left."""
    return not [cmd for cmd in _command_lines() if str(data) in cmd]


@pytest.mark.docker
@pytest.mark.slow
def test_up_demo_runs_the_pipeline_and_a_second_start_reuses_everything(
    tmp_path: Path, runner_image: str
) -> None:
    data = tmp_path / "data"
    first = _up(data, FORGE_CI_RUNNER_IMAGE=runner_image)

    out = first.stdout
    assert "created provider local" in out
    assert "provider  started" in out
    assert "demo repo   demo/hello" in out
    assert "run #1 of demo/hello: success" in out
    for job in ("lint", "test (Ada)", "test (Grace)", "report"):
        assert f"  {job:<12} success" in out, out
    assert "Hello, Ada!" in out and "Hello, Grace!" in out
    assert "lint chose 'Hello'" in out  # the output went from lint to report through needs
    assert "/demo/hello/pipelines" in out and "git push origin main" in out
    assert pygit2.Repository(str(data / "repositories" / "demo" / "hello.git")).is_bare
    assert (data / "provider-token").stat().st_mode & 0o777 == 0o600
    assert _stopped(data)
    # The standard (Debian) image is offered for GitHub's standard Ubuntu x64 labels.
    with closing(sqlite3.connect(data / "forge-ci.db")) as db:
        (labels,) = db.execute("SELECT labels FROM providers WHERE name = 'local'").fetchone()
    assert set(labels.split(",")) == {
        "self-hosted", "linux", "x64", "ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04",
    }  # fmt: skip

    again = _up(data, FORGE_CI_RUNNER_IMAGE=runner_image)

    assert "updated provider local" in again.stdout
    assert "created user" not in again.stdout and "created repository" not in again.stdout
    assert "run #2 of demo/hello: success" in again.stdout
    assert _stopped(data)


@pytest.mark.slow
def test_up_says_what_is_missing_when_jobs_cannot_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = _up(data, FORGE_CI_RUNNER_IMAGE="forge-ci-runner:missing-on-purpose")

    out = result.stdout
    assert "provider  not started:" in out
    assert "jobs will stay queued" in out
    assert "deploy/build-runner-image" in out or "deploy/start-dockerd" in out
    assert "run #1 created; its jobs stay queued until a provider runs them" in out
    assert pygit2.Repository(str(data / "repositories" / "demo" / "hello.git")).is_bare
    assert _stopped(data)
    # A newcomer copies the lines the demo printed into a fresh shell, and the CLI works.
    exports = [line.strip() for line in out.splitlines() if line.startswith("  export ")]
    assert f"export FORGE_CI_DATA_DIR={data}" in exports
    script = "\n".join([*exports, out.split("use it from another shell:\n")[1].splitlines()[-1]])
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_CI_")}
    listed = subprocess.run(
        ["bash", "-c", script], env=clean, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert "demo" in listed.stdout


def test_up_options_win_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "forge-ci.toml").write_text('ssh_listen = "127.0.0.1:7000"\n')
    environ = {
        "FORGE_CI_DATA_DIR": str(tmp_path / "elsewhere"),
        "FORGE_CI_WEB_LISTEN": "127.0.0.2:9000",
        "FORGE_CI_SSH_LISTEN": "127.0.0.3:9001",
    }
    monkeypatch.chdir(tmp_path)

    env = up_environment(environ, data_dir=Path("data"), web_port=8100)

    assert env["FORGE_CI_DATA_DIR"] == str(tmp_path / "data")
    assert env["FORGE_CI_WEB_LISTEN"] == "127.0.0.2:8100"  # the port replaced, the host kept
    assert env["FORGE_CI_SSH_LISTEN"] == "127.0.0.3:9001"  # no option: the environment's
    env = up_environment({}, data_dir=tmp_path / "data", host="::1", ssh_port=2300)
    assert env["FORGE_CI_SSH_LISTEN"] == "[::1]:2300"
    assert env["FORGE_CI_WEB_LISTEN"] == "[::1]:8080"
    env = up_environment({"FORGE_CI_DATA_DIR": str(tmp_path / "data")}, host="0.0.0.0")
    assert env["FORGE_CI_SSH_LISTEN"] == "0.0.0.0:7000"  # the configuration file's port
    assert up_environment({}, data_dir=None)["FORGE_CI_DATA_DIR"] == "/var/lib/forge-ci"


def test_up_help_offers_the_options_with_their_variables_and_defaults() -> None:
    from click.testing import CliRunner

    from forge_ci.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["up", "--help"]).output.split())
    for option, variable, default in (
        ("--data-dir", "FORGE_CI_DATA_DIR", "/var/lib/forge-ci"),
        ("--host", "FORGE_CI_WEB_LISTEN and FORGE_CI_SSH_LISTEN", "127.0.0.1"),
        ("--web-port", "FORGE_CI_WEB_LISTEN", "8080"),
        ("--ssh-port", "FORGE_CI_SSH_LISTEN", "2222"),
    ):
        assert option in text
        assert variable in text.split(option, 1)[1].split(" --", 1)[0], option
        assert f"default: {default}" in text.split(option, 1)[1].split(" --", 1)[0], option


def test_the_cli_hint_never_prints_a_password() -> None:
    lines = cli_hint(
        {
            "FORGE_CI_DATA_DIR": "/srv/forge ci",
            "FORGE_CI_DATABASE_URL": "postgresql://forge:hunter2@db/forge",
        }
    )
    assert "  export FORGE_CI_DATA_DIR='/srv/forge ci'" in lines
    assert lines[2].startswith("  export FORGE_CI_DATABASE_URL='postgresql://forge:***@db/forge'")
    assert "hunter2" not in "\n".join(lines)
    assert lines[-1].endswith("user list")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for(path: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        assert process.poll() is None, content
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not printed in {timeout} s")


#: What the services log when what they depend on went first, or a crash.
BAD_LOG_LINES = ("Traceback", "ERROR", "could not connect", "Connection refused", "retrying")


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("provider", [False, pytest.param(True, marks=pytest.mark.docker)])
def test_ctrl_c_stops_every_service_promptly_and_cleanly(
    provider: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    image = request.getfixturevalue("runner_image") if provider else "forge-ci-runner:missing"
    data, web_port, ssh_port = tmp_path / "data", _free_port(), _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FORGE_CI_")},
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_RUNNER_IMAGE": image,
        # The options below must win over these.
        "FORGE_CI_DATA_DIR": str(tmp_path / "not-this-one"),
        "FORGE_CI_WEB_LISTEN": "127.0.0.1:1",
        "FORGE_CI_SSH_LISTEN": "127.0.0.1:1",
    }
    out = tmp_path / "up.out"
    argv = ["up", "--data-dir", str(data), "--host", "127.0.0.1"]
    argv += ["--web-port", str(web_port), "--ssh-port", str(ssh_port)]
    with open(out, "wb") as sink:
        up = subprocess.Popen(
            [sys.executable, "-m", "forge_ci", *argv],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        text = _wait_for(out, "press Ctrl-C to stop", up, timeout=120)
        assert ("provider  started" in text) == provider, text
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/", timeout=5) as page:
            assert page.status == 200
        assert f"listening on 127.0.0.1:{ssh_port}" in (data / "run" / "ssh.log").read_text()
        assert not (tmp_path / "not-this-one").exists()
        time.sleep(1)  # let the worker reach RQ's idle wait on Redis

        stopping = time.monotonic()
        up.send_signal(signal.SIGINT)
        code = up.wait(timeout=60)
        took = time.monotonic() - stopping
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
    assert code == 0, out.read_text()
    assert took < 10, f"stopping took {took:.1f} s"
    assert _stopped(data)
    logs = {path.name: path.read_text() for path in sorted((data / "run").glob("*.log"))}
    assert set(logs) >= {"redis.log", "worker.log", "ssh.log", "web.log"}
    for name, log in {**logs, "up": out.read_text()}.items():
        bad = [line for line in log.splitlines() if any(b in line for b in BAD_LOG_LINES)]
        assert not bad, f"{name}: {bad}"
