"""``forge-ci web``: refusals at start, and a real server (gunicorn or --dev) until SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from forge_ci.cli.setup import ensure_layout
from tests.conftest import REPO_ROOT, make_settings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _env(data_dir: Path, database_url: str, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(data_dir),
        "FORGE_CI_DATABASE_URL": database_url,
        "FORGE_CI_WEB_LISTEN": f"127.0.0.1:{port}",
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forge_ci", "web", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_web_refuses_an_unmigrated_database(data_dir: Path, empty_db_url: str) -> None:
    ensure_layout(make_settings(data_dir, empty_db_url))
    if empty_db_url.startswith("sqlite:"):
        Path(empty_db_url.removeprefix("sqlite:///")).write_bytes(b"")  # empty, no schema
    result = _run(_env(data_dir, empty_db_url, _free_port()))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "forge-ci: the database has no forge-ci schema yet; "
        "run `forge-ci db upgrade` (or `forge-ci init`)"
    ]


def test_web_refuses_without_a_session_secret(data_dir: Path, sqlite_db_url: str) -> None:
    result = _run(_env(data_dir, sqlite_db_url, _free_port()))
    assert result.returncode == 2
    assert "session secret" in result.stderr and "forge-ci init" in result.stderr


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return response.status, response.read().decode()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["gunicorn", "dev"])
def test_web_serves_pages_until_terminated(data_dir: Path, sqlite_db_url: str, mode: str) -> None:
    ensure_layout(make_settings(data_dir, sqlite_db_url))
    port = _free_port()
    log = data_dir / "web.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "forge_ci", "web", *(["--dev"] if mode == "dev" else [])],
            env=_env(data_dir, sqlite_db_url, port),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = _get(f"http://127.0.0.1:{port}/-/health")
                break
            except OSError:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert (status, body.strip()) == (200, '{"status":"ok"}')
        status, body = _get(f"http://127.0.0.1:{port}/-/login")
        assert status == 200 and "Sign in" in body
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    output_text = log.read_text()
    assert code == 0, output_text
    if mode == "gunicorn":
        assert "Using worker: web.intake.BufferingWorker" in output_text
        assert output_text.count("Booting worker") == 2
