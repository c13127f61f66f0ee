"""What the server refuses, requested precisely with paramiko as the client (the OpenSSH client
hides most refusals behind its own fallbacks), and the limits on time and connections."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from forge_ci.db import Database
from forge_ci.settings import Settings
from ssh.auth import GitServerInterface
from ssh.server import SshServer
from tests.ssh.conftest import start_server


def connect(port: int, key: Path, username: str = "git") -> paramiko.Transport:
    transport = paramiko.Transport(("127.0.0.1", port))
    transport.start_client(timeout=10)
    transport.auth_publickey(username, paramiko.Ed25519Key.from_private_key_file(str(key)))
    return transport


@pytest.fixture
def alice(server: SshServer, keys: dict[str, Path]) -> Iterator[paramiko.Transport]:
    transport = connect(server.address[1], keys["alice"])
    yield transport
    transport.close()


def run(transport: paramiko.Transport, command: str) -> tuple[int, bytes, bytes]:
    channel = transport.open_session(timeout=10)
    channel.exec_command(command)
    out = channel.makefile("rb").read()
    err = channel.makefile_stderr("rb").read()
    status = channel.recv_exit_status()
    channel.close()
    return status, out, err


def test_only_public_keys_authenticate(server: SshServer, world: Settings) -> None:
    transport = paramiko.Transport(("127.0.0.1", server.address[1]))
    try:
        transport.start_client(timeout=10)
        with pytest.raises(paramiko.BadAuthenticationType) as caught:
            transport.auth_password("git", "secret")
        assert caught.value.allowed_types == ["publickey"]
        with pytest.raises(paramiko.BadAuthenticationType):
            transport.auth_interactive_dumb("git")
    finally:
        transport.close()


def test_a_shell_request_only_greets(alice: paramiko.Transport) -> None:
    channel = alice.open_session(timeout=10)
    channel.invoke_shell()
    err = channel.makefile_stderr("rb").read()
    assert channel.recv_exit_status() == 1
    assert b"Hi alice! You are authenticated, but forge-ci does not provide shell access" in err


def test_pty_subsystem_x11_and_second_requests_are_refused(alice: paramiko.Transport) -> None:
    channel = alice.open_session(timeout=10)
    with pytest.raises(paramiko.SSHException):
        channel.get_pty()
    with pytest.raises(paramiko.SSHException):
        channel.invoke_subsystem("sftp")
    with pytest.raises(paramiko.SSHException):
        channel.request_x11(auth_cookie=b"0" * 32)
    # One session channel per connection.
    with pytest.raises(paramiko.ChannelException):
        alice.open_session(timeout=10)
    channel.close()


def test_port_forwarding_is_refused(alice: paramiko.Transport) -> None:
    with pytest.raises(paramiko.ChannelException) as caught:
        alice.open_channel("direct-tcpip", ("127.0.0.1", 22), ("127.0.0.1", 1), timeout=10)
    assert caught.value.code == paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
    with pytest.raises(paramiko.SSHException):
        alice.request_port_forward("127.0.0.1", 0)


def test_only_git_and_forge_ci_commands_run(
    alice: paramiko.Transport, server: SshServer, keys: dict[str, Path]
) -> None:
    status, out, err = run(alice, "ls /; echo hacked")
    assert status == 2 and out == b""
    assert err.startswith(b"forge-ci: unknown command 'ls'")
    again = connect(server.address[1], keys["alice"])
    try:
        status, out, err = run(again, "git-upload-archive 'alice/demo.git'")
    finally:
        again.close()
    assert status == 2 and out == b""
    assert b"only git-upload-pack and git-receive-pack are served here" in err


def test_only_git_protocol_passes_through_the_environment(
    database: Database,
) -> None:
    interface = GitServerInterface(database)
    channel = None
    assert interface.check_channel_env_request(channel, b"GIT_PROTOCOL", b"version=2")  # type: ignore[arg-type]
    assert interface.git_protocol == "version=2"
    for name, value in [
        (b"GIT_PROTOCOL", b"version=2:evil"),
        (b"GIT_PROTOCOL", b"version=9"),
        (b"LD_PRELOAD", b"/tmp/x.so"),
        (b"GIT_EXEC_PATH", b"/tmp"),
        (b"LANG", b"C"),
    ]:
        assert not interface.check_channel_env_request(channel, name, value)  # type: ignore[arg-type]
    assert interface.git_protocol == "version=2"


def test_clients_that_do_not_authenticate_in_time_are_dropped(world: Settings) -> None:
    settings = dataclasses.replace(world, ssh_auth_timeout=1.0)
    server, thread = start_server(settings)
    try:
        started = time.monotonic()
        with socket.create_connection(server.address, timeout=10) as sock:
            assert sock.recv(100).startswith(b"SSH-2.0-")
            sock.sendall(b"SSH-2.0-slowpoke\r\n")
            while sock.recv(65536):  # the server's key exchange offer, then nothing, then EOF
                pass
        assert time.monotonic() - started < 8
        # A client that completes the handshake but never authenticates fares no better.
        transport = paramiko.Transport(server.address)
        transport.start_client(timeout=10)
        deadline = time.monotonic() + 8
        while transport.is_active() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not transport.is_active()
        transport.close()
    finally:
        server.close(grace=1)
        thread.join(10)


def test_connections_beyond_the_cap_are_closed_at_once(world: Settings) -> None:
    """With 2 connections in all, one address may hold 1 unauthenticated (ssh.admission)."""
    settings = dataclasses.replace(world, ssh_max_connections=2, ssh_auth_timeout=30.0)
    server, thread = start_server(settings)
    held = []
    try:
        sock = socket.create_connection(server.address, timeout=10)
        assert sock.recv(100).startswith(b"SSH-2.0-")
        held.append(sock)
        with socket.create_connection(server.address, timeout=10) as extra:
            assert extra.recv(100) == b""  # closed before a single byte of SSH
        held.pop().close()
        deadline = time.monotonic() + 10
        while True:  # the freed slot is reused
            with socket.create_connection(server.address, timeout=10) as again:
                if again.recv(100).startswith(b"SSH-2.0-"):
                    break
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        for sock in held:
            sock.close()
        server.close(grace=1)
        thread.join(10)
