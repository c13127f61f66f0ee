"""A push's time under the repository lock is bounded (issue #14, findings 4 and 5).

A client trickling its push one byte at a time is cut off by the minimum rate and the total
time, and its lock is free for the next pusher; an idle client is cut off; but a push whose
server side works in a hook for longer than the idle time is not.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from forge_ci.settings import Settings, TestFault
from ssh import pump
from tests.ssh.conftest import MakeClient, start_server


def open_receive_pack(port: int, key: Path) -> paramiko.Channel:
    transport = paramiko.Transport(("127.0.0.1", port))
    transport.start_client(timeout=10)
    transport.auth_publickey("git", paramiko.Ed25519Key.from_private_key_file(str(key)))
    channel = transport.open_session(timeout=10)
    channel.exec_command("git-receive-pack 'alice/demo.git'")
    advertised = b""
    while not advertised.endswith(b"0000"):  # the ref advertisement ends with a flush packet
        chunk = channel.recv(65536)
        assert chunk, advertised
        advertised += chunk
    return channel


def ended_within(channel: paramiko.Channel, seconds: float) -> tuple[bool, str]:
    """Whether the server sent an exit status within ``seconds``, and its stderr."""
    done = channel.status_event.wait(seconds)
    err = b""
    while channel.recv_stderr_ready():
        err += channel.recv_stderr(65536)
    return done, err.decode(errors="replace")


@pytest.fixture
def server_port(world: Settings) -> Iterator[int]:
    server, thread = start_server(dataclasses.replace(world, repo_lock_timeout=2.0))
    yield server.address[1]
    server.close(grace=1)
    thread.join(10)


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (pump.Limits(total_seconds=60, min_rate=20, rate_grace=1), "arriving too slowly"),
        (pump.Limits(total_seconds=3), "longer than 3 s in all"),
    ],
)
def test_a_trickling_push_is_cut_off_and_frees_the_lock(
    server_port: int,
    keys: dict[str, Path],
    client_for: MakeClient,
    monkeypatch: pytest.MonkeyPatch,
    limits: pump.Limits,
    reason: str,
) -> None:
    monkeypatch.setattr(pump, "PUSH", limits)
    channel = open_receive_pack(server_port, keys["alice"])
    stop = threading.Event()

    def trickle() -> None:  # a byte every 0.2 s: always "active", never done
        command = b"fff0" + b"a" * 5000  # a pkt-line that never ends
        for byte in command:
            if stop.wait(0.2) or channel.closed:
                return
            try:
                channel.send(bytes([byte]))
            except (OSError, EOFError, paramiko.SSHException):
                return

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        # Before: each byte reset the 600 s idle timer, so the lock was held for as long.
        done, err = ended_within(channel, 20)
        assert done, "the trickling push was not cut off"
        assert reason in err and "closing" in err, err
        assert channel.recv_exit_status() != 0
    finally:
        stop.set()
        channel.get_transport().close()  # type: ignore[union-attr]
        sender.join(5)
    # The lock is free: the next push goes through (a busy lock would refuse within 2 s).
    monkeypatch.setattr(pump, "PUSH", pump.Limits(total_seconds=60, min_rate=20, rate_grace=1))
    bob = client_for("bob", server_port)
    bob.push(bob.work_tree(), "main")


def test_an_idle_push_client_is_cut_off(
    server_port: int, keys: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pump, "PUSH", pump.Limits(idle_seconds=2, total_seconds=60))
    channel = open_receive_pack(server_port, keys["alice"])
    try:
        done, err = ended_within(channel, 15)
        assert done and "idle for 2 s; closing" in err, err
    finally:
        channel.get_transport().close()  # type: ignore[union-attr]


def test_a_push_is_not_idle_while_the_server_works_in_its_hooks(
    world: Settings, client_for: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "idle for 600 s; closing" and exit 128 while the hooks were still recording."""
    monkeypatch.setattr(pump, "PUSH", pump.Limits(idle_seconds=1, total_seconds=120))
    settings = dataclasses.replace(world, test_faults=(TestFault("pause-before-record"),))
    server, thread = start_server(settings)
    try:
        alice = client_for("alice", server.address[1])
        work = alice.work_tree()
        result: list[object] = []
        pusher = threading.Thread(
            target=lambda: result.append(alice.push(work, "main", check=False)), daemon=True
        )
        pusher.start()
        marker = settings.run_dir / "fault-pause-before-record"
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the push never reached its hook"
            time.sleep(0.05)
        time.sleep(3.5)  # the hook's answer takes three and a half idle times
        marker.unlink()
        pusher.join(60)
        (done,) = result
        assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
        assert "idle" not in done.stderr  # type: ignore[attr-defined]
        assert alice.git("ls-remote", alice.url(), "refs/heads/main").stdout.strip()
    finally:
        server.close(grace=5)
        thread.join(10)
