"""Job egress end to end: real providers (``forge-ci provider run --egress ...``), real job
containers with only ``lo``, the runner's forwarder, the provider's proxy, the audit and the
job log. Every target is on this machine's loopback: a package index (``python -m http.server``
over a wheel built here) on the allow-list, and listening sockets that must never see a
connection. Names are ``localhost`` only (answered by /etc/hosts, never by DNS).

One push, two jobs at once: ``listed`` on an allow-list provider installs from the index with
pip and fetches it with curl, and is refused every other loopback target; ``public`` on a
provider with the default policy is refused the same index, which it has no entry for.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import new_token
from forge_ci.coordinator.egress import attempt_egress
from forge_ci.coordinator.providers import create_provider, revoke_provider, show_provider
from forge_ci.models import EgressConnection
from forge_ci_testing.forge import Forge, free_port, wait_for, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = "egress_probe"


def build_wheel(directory: Path) -> Path:
    """A minimal pure-Python wheel, written by hand (what pip needs and nothing more)."""
    files = {
        f"{PROBE}/__init__.py": b'VALUE = "from the local index"\n',
        f"{PROBE}-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: egress-probe\n"
        b"Version: 0.1\n",
        f"{PROBE}-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: forge-ci tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256="
        + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        + f",{len(data)}"
        for name, data in files.items()
    ]
    files[f"{PROBE}-0.1.dist-info/RECORD"] = (
        "\n".join([*record, f"{PROBE}-0.1.dist-info/RECORD,,"]) + "\n"
    ).encode()
    directory.mkdir(parents=True)
    wheel = directory / f"{PROBE}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


class Silent:
    """A listening socket on loopback that must see no connection."""

    def __init__(self, family: socket.AddressFamily, host: str) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def saw_nothing(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return True
        conn.close()
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[int]:
    root = tmp_path / "index"
    build_wheel(root / "simple" / "egress-probe")
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--directory",
            str(root),
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for("the package index", lambda: _answers(port), 30)
        yield port
    finally:
        server.terminate()
        server.wait(10)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_provider(forge: Forge, name: str, label: str, *egress: str) -> subprocess.Popen[bytes]:
    token = new_token()
    token_file = forge.root / f"{name}-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    assert forge.database is not None
    with forge.database.session() as session:
        create_provider(session, Actor.operator(), name, token, f"self-hosted,linux,{label}", "all")
        session.commit()
    process = forge.spawn(
        name,
        "provider", "run",
        "--server", f"http://127.0.0.1:{forge.web_port}", "--allow-http",
        "--token-file", str(token_file),
        "--state-dir", str(forge.root / f"{name}-state"),
        "--cpus", "1", "--memory-mb", "512",
        *egress,
    )  # fmt: skip
    wait_for(
        f"provider {name}",
        lambda: "ready: server" in forge.log(name) or process.poll() is not None,
        60,
    )
    assert process.poll() is None, forge.log(name)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(60)


def jobs(index: int, quiet: Silent, other: Silent, six: Silent) -> str:
    # NO_PROXY is dropped: the runner sets it to localhost,127.0.0.1 (services a step starts
    # in the job stay direct), but here those names mean the host's loopback, via the proxy.
    curl = "curl -s -o /dev/null"
    return workflow(
        f"""\
  listed:
    runs-on: [self-hosted, linux, egress-list]
    steps:
      - name: pip install from the allow-listed index
        run: |
          unset NO_PROXY no_proxy
          test "$HTTP_PROXY" = "$https_proxy"
          case "$HTTP_PROXY" in http://127.0.0.1:*) ;; *) exit 9;; esac
          python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir \\
            --index-url http://127.0.0.1:{index}/simple/ egress-probe
          python3 -c 'import {PROBE}; print("probe:", {PROBE}.VALUE)'
      - name: curl the index
        run: |
          unset NO_PROXY no_proxy
          curl -sSf -o /dev/null -w 'index answered %{{http_code}}\\n' http://127.0.0.1:{index}/simple/
      - name: refused targets
        run: |
          unset NO_PROXY no_proxy
          echo "other port: $({curl} -w '%{{http_code}}' http://127.0.0.1:{quiet.port}/)"
          echo "name: $({curl} -w '%{{http_code}}' http://localhost:{quiet.port}/)"
          echo "ipv6: $({curl} -w '%{{http_code}}' 'http://[::1]:{six.port}/')"
          echo "connect: $({curl} -w '%{{http_connect}}' https://127.0.0.1:{other.port}/ || true)"
          echo "interfaces: $(ls /sys/class/net | tr '\\n' ' ')"
  public:
    runs-on: [self-hosted, linux, egress-public]
    steps:
      - name: the index without an allow entry
        run: |
          unset NO_PROXY no_proxy
          echo "index: $({curl} -w '%{{http_code}}' http://127.0.0.1:{index}/simple/)"
          echo "name: $({curl} -w '%{{http_code}}' http://localhost:{quiet.port}/)"
          echo "connect: $({curl} -w '%{{http_connect}}' https://127.0.0.1:{other.port}/ || true)"
          echo "interfaces: $(ls /sys/class/net | tr '\\n' ' ')"
"""
    )


def test_allow_listed_installs_work_and_everything_else_on_loopback_is_refused(
    live: Forge, index: int
) -> None:
    quiet, other = Silent(socket.AF_INET, "127.0.0.1"), Silent(socket.AF_INET, "127.0.0.1")
    six = Silent(socket.AF_INET6, "::1")
    listed = start_provider(
        live, "egress-list", "egress-list", "--egress", "allow-list",
        "--egress-allow", f"127.0.0.1:{index}", "--egress-allow", ".pythonhosted.org:443",
    )  # fmt: skip
    public = start_provider(live, "egress-public", "egress-public", "--egress", "public")
    try:
        repository = live.repository("egress")
        live.push(repository, {".github/workflows/ci.yml": jobs(index, quiet, other, six)})
        view = live.wait_run(repository, timeout=180)
        # One log line per denial, from the server, with the reason. The provider sends its
        # records every half second and once more after the container: the last may land
        # just after the run ended.
        expected = {
            "listed": [
                f"egress denied: GET 127.0.0.1:{quiet.port}: port {quiet.port} of 127.0.0.1",
                f"egress denied: GET localhost:{quiet.port}: localhost:{quiet.port} is not on",
                f"egress denied: GET ::1:{six.port}: ::1 is loopback: always denied",
                f"egress denied: CONNECT 127.0.0.1:{other.port}: port {other.port} of",
            ],
            "public": [
                f"egress denied: GET 127.0.0.1:{index}: 127.0.0.1 is loopback",
                f"egress denied: GET localhost:{quiet.port}: 127.0.0.1 is loopback",
                f"egress denied: CONNECT 127.0.0.1:{other.port}: 127.0.0.1 is loopback",
            ],
        }

        def settled() -> dict[str, str] | None:
            logs = live.logs(repository)
            done = all(
                line in logs.get(key, "") for key, lines in expected.items() for line in lines
            )
            return logs if done else None

        try:
            logs = wait_for("the denials in the job logs", settled, 30)
        except AssertionError:
            raise AssertionError(repr(live.logs(repository))) from None
        assert live.conclusions(view) == {"listed": "success", "public": "success"}, logs

        # What the jobs saw: the install and the fetch worked, every other target got 403.
        allowed_log, public_log = logs["listed"], logs["public"]
        assert "probe: from the local index" in allowed_log
        assert "index answered 200" in allowed_log
        for line in ("other port: 403", "name: 403", "ipv6: 403", "connect: 403"):
            assert line in allowed_log, allowed_log
        for line in ("index: 403", "name: 403", "connect: 403"):
            assert line in public_log, public_log
        # The job has loopback only, with or without egress.
        assert "interfaces: lo \n" in allowed_log and "interfaces: lo \n" in public_log
        # Refused before connecting: the listeners never saw anyone.
        assert quiet.saw_nothing() and other.saw_nothing() and six.saw_nothing()
        assert allowed_log.count("egress denied") == 4 and public_log.count("egress denied") == 3

        # The audit: every connection, allowed or not, with its address and bytes.
        assert live.database is not None
        attempts = live.attempts(repository)
        with live.database.session() as session:
            audit = {
                key: list(
                    session.scalars(
                        select(EgressConnection)
                        .where(EgressConnection.attempt_id == attempt.id)
                        .order_by(EgressConnection.sequence)
                    )
                )
                for key, attempt in attempts.items()
            }
            summary = attempt_egress(
                session, Actor.operator(), repository, 1, attempts["listed"].id
            )
            shown = {
                name: show_provider(session, Actor.operator(), name).egress_policy
                for name in ("egress-list", "egress-public")
            }
        to_index = [r for r in audit["listed"] if r.allowed]
        assert len(to_index) >= 3  # the simple page, the wheel, curl's fetch
        assert all(
            (r.host, r.port, r.address, r.explicit) == ("127.0.0.1", index, "127.0.0.1", True)
            for r in to_index
        )
        assert any(r.bytes_in > 1000 for r in to_index)  # a wheel came back
        denied = sorted((r.host, r.port) for r in audit["listed"] if not r.allowed)
        assert denied == sorted(
            [("127.0.0.1", quiet.port), ("localhost", quiet.port), ("::1", six.port),
             ("127.0.0.1", other.port)]
        )  # fmt: skip
        assert [(r.host, r.allowed) for r in audit["public"]] == [
            ("127.0.0.1", False),
            ("localhost", False),
            ("127.0.0.1", False),
        ]
        assert summary.text().startswith(f"Network: {len(to_index)} connections to 127.0.0.1:")
        assert "4 denied to" in summary.text()
        assert shown["egress-list"].startswith(f"allow-list: 127.0.0.1:{index}, .pythonhosted")
        assert shown["egress-public"].startswith("public (any public address)")
    finally:
        stop(listed)
        stop(public)
        # Their labels cover the shared forge's other jobs: a claim still waiting on the server
        # for a stopped provider would take the next test's job and lose it. Revoked, a waiting
        # claim (which authenticates on every try) takes nothing more.
        assert live.database is not None
        with live.database.session() as session:
            for name in ("egress-list", "egress-public"):
                revoke_provider(session, Actor.operator(), name)
            session.commit()
        for silent in (quiet, other, six):
            silent.close()
    for name in ("egress-list", "egress-public"):
        assert "Traceback" not in live.log(name), live.log(name)
