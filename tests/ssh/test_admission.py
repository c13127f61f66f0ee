"""SSH startups (connections not yet authenticated) are limited apart: issue #14, finding 3.

The rules as a table (ssh.admission), then real floods of idle TCP connections from several
loopback addresses (127.0.0.0/8 is all loopback) while a real ``git push`` gets in.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from forge_ci.settings import Settings
from ssh import admission
from ssh.admission import Admission, Limits
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient, start_server


def new_sock() -> socket.socket:
    return socket.socket()  # never connected: the admission only keeps it to hang up


def test_limits_scale_with_the_total() -> None:
    assert Limits.for_total(64) == Limits(total=64, start=16, full=32, per_source=12)
    assert Limits.for_total(2) == Limits(total=2, start=1, full=1, per_source=1)


def test_the_rules_as_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = Limits(total=6, start=2, full=4, per_source=2, rate=0.5)
    draws = iter([0.9, 0.1, 0.9, 0.9])
    gate = Admission(limits, chance=lambda: next(draws))
    sockets = [new_sock() for _ in range(10)]
    try:
        a1 = gate.admit("a", sockets[0])
        a2 = gate.admit("a", sockets[1])
        assert a1 and a2
        assert gate.admit("a", sockets[2]) is None  # per address
        # From start (2) to full (4): dropped with odds 0.5, then 0.75.
        b1 = gate.admit("b", sockets[3])  # draw 0.9 >= 0.5: admitted
        assert b1 is not None
        assert gate.admit("c", sockets[4]) is None  # draw 0.1 < 0.75: dropped
        c1 = gate.admit("c", sockets[4])  # draw 0.9: admitted
        assert c1 is not None and gate.counts == (4, 0)
        # At full: nothing is old enough to be closed, so the newcomer is dropped...
        assert gate.admit("d", sockets[5]) is None
        # ...until the oldest is MIN_AGE old: it is closed to make room (from `start` on).
        monkeypatch.setattr(admission, "MIN_AGE", 0.0)
        d1 = gate.admit("d", sockets[5])
        assert d1 is not None and a1.state == "evicted" and gate.counts == (4, 0)
        # Authenticated connections leave the startups: room again, and the total still holds.
        for ticket in (a2, b1):
            ticket.authenticated()
        assert gate.counts == (2, 2)
        a1.authenticated()  # evicted: stays out
        a1.release()
        assert gate.counts == (2, 2)
        c1.release()
        c1.release()  # once only
        assert gate.counts == (1, 2)
        e1 = gate.admit("e", sockets[6])
        assert e1 is not None and gate.counts == (2, 2)
        e1.authenticated()
        d1.authenticated()
        assert gate.counts == (0, 4)
        f1 = gate.admit("f", sockets[7])
        assert f1 is not None
        f1.authenticated()
        assert gate.counts == (0, 5)
        # One left in all; then the total refuses even a fresh address.
        assert gate.admit("g", sockets[8]) is not None
        assert gate.admit("h", sockets[9]) is None
    finally:
        for sock in sockets:
            sock.close()


def idle_connection(source: str, address: tuple[str, int]) -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(address)
    return sock


def greeted(sock: socket.socket) -> bool:
    """Whether the server said SSH-2.0 (admitted) rather than closing at once."""
    try:
        return sock.recv(100).startswith(b"SSH-2.0-")
    except OSError:
        return False


@pytest.fixture
def small_server(world: Settings) -> Iterator[SshServer]:
    # 16 in all: random drops from 4 startups, 8 at most, 3 per address; 30 s to authenticate.
    settings = dataclasses.replace(world, ssh_max_connections=16, ssh_auth_timeout=30.0)
    server, thread = start_server(settings)
    yield server
    server.close(grace=1)
    thread.join(10)


def test_one_address_holds_only_its_share_of_startups(
    small_server: SshServer, world: Settings, client_for: MakeClient, keys: dict[str, Path]
) -> None:
    address = small_server.address
    held = [idle_connection("127.0.0.2", address) for _ in range(12)]
    try:
        answers = [greeted(sock) for sock in held]
        assert answers.count(True) == 3, answers
        # One address holds less than `start`: alice's startups are never dropped at random, and
        # an authenticated session is not a startup: alice is in despite the flood.
        transport = paramiko.Transport(address)
        transport.start_client(timeout=10)
        transport.auth_publickey(
            "git", paramiko.Ed25519Key.from_private_key_file(str(keys["alice"]))
        )
        assert transport.is_authenticated()
        # A key proved and a channel opened: a session now, no longer a startup.
        transport.open_session(timeout=10)
        gate = small_server.admission
        deadline = time.monotonic() + 10
        while gate.counts != (3, 1) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gate.counts == (3, 1)
        alice = client_for("alice", address[1])
        work = alice.work_tree()
        alice.push(work, "main")
        transport.close()
    finally:
        for sock in held:
            sock.close()


@pytest.mark.slow
def test_a_push_gets_in_through_a_flood_of_idle_connections_from_many_addresses(
    small_server: SshServer, client_for: MakeClient
) -> None:
    address = small_server.address
    """Before: 16 idle connections filled every slot for ssh_auth_timeout (30 s)."""
    held: list[socket.socket] = []
    try:
        for round_ in range(3):
            for n in range(2, 22):
                held.append(idle_connection(f"127.0.{round_}.{n}", address))
        answers = [greeted(sock) for sock in held]
        # Never more than `full` startups at once, although 60 came from 60 addresses.
        assert 1 <= answers.count(True) <= 8, answers
        time.sleep(admission.MIN_AGE + 0.2)
        alice = client_for("alice", address[1])
        work = alice.work_tree()
        for message in ("second", "third"):
            alice.commit(work, message)
            alice.push(work, "main")  # each push closes the oldest idle startup
    finally:
        for sock in held:
            sock.close()
