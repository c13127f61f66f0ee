"""Nothing force-pushed away is fetchable, by any protocol version (issue #14, finding 6).

The commit stays on the server, pinned under the hidden refs/forge-ci/* (a run needs its
source through force-pushes and gc), but a reader cannot fetch it by SHA: before, protocol v2
handed it out (``git -c protocol.version=2 fetch URL <sha>``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest

from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.settings import Settings
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import event_pins


@pytest.mark.parametrize("reader", ["carol", "alice"])
def test_a_force_pushed_commit_cannot_be_fetched_by_sha(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient, reader: str
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main")
    gone = alice.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    alice.git("commit", "-q", "--amend", "-m", "rewritten", cwd=work)
    kept = alice.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    alice.push(work, "--force", "main")
    server_repo = repository_path(world.repositories_dir, "alice", "demo")
    subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=server_repo, check=True)
    # The server keeps it, pinned for the run of its push event...
    assert any(pin == gone for pin in event_pins(world).values())
    subprocess.run(["git", "cat-file", "-e", gone], cwd=server_repo, check=True)
    person = client_for(reader, server.address[1])
    clone = person.home / "clone"
    person.git("clone", "-q", person.url(), str(clone))
    for version in ("0", "1", "2"):
        # ...but no reader, not even the owner, fetches it by its SHA...
        refused = person.git(
            "-c", f"protocol.version={version}", "fetch", person.url(), gone, cwd=clone, check=False
        )
        assert refused.returncode != 0, (version, refused.stdout)
        # (git itself declines to ask for an object the server did not advertise)
        assert "unadvertised object" in refused.stderr or "not our ref" in refused.stderr
        has = person.git("cat-file", "-e", gone, cwd=clone, check=False)
        assert has.returncode != 0
        # ...while what the refs show is fetched, by name and by SHA.
        person.git(
            "-c", f"protocol.version={version}", "fetch", "-q", person.url(), "main", cwd=clone
        )
        person.git(
            "-c", f"protocol.version={version}", "fetch", "-q", person.url(), kept, cwd=clone
        )


def pkt(line: str) -> bytes:
    data = line.encode()
    return f"{len(data) + 4:04x}".encode() + data


def raw_upload_pack(port: int, key: Path, protocol: str, request: bytes) -> bytes:
    """A hand-made fetch that sends wants the git client would not (it checks first)."""
    transport = paramiko.Transport(("127.0.0.1", port))
    try:
        transport.start_client(timeout=10)
        transport.auth_publickey("git", paramiko.Ed25519Key.from_private_key_file(str(key)))
        channel = transport.open_session(timeout=10)
        channel.set_environment_variable("GIT_PROTOCOL", protocol)
        channel.exec_command("git-upload-pack 'alice/demo.git'")
        channel.settimeout(10)
        answer = b""
        while not answer.endswith(b"0000"):  # the advertisement (v0) or capabilities (v2)
            chunk = channel.recv(65536)
            if not chunk:
                break
            answer += chunk
        channel.sendall(request)
        channel.shutdown_write()
        while chunk := channel.recv(65536):
            answer += chunk
        return answer
    finally:
        transport.close()


def test_the_server_itself_refuses_wants_of_hidden_commits(
    server: SshServer, world: Settings, client_for: MakeClient, keys: dict[str, Path]
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main")
    gone = alice.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    alice.git("commit", "-q", "--amend", "-m", "rewritten", cwd=work)
    alice.push(work, "--force", "main")
    request = pkt(f"want {gone}\n") + b"0000" + pkt("done\n")
    for protocol in ("version=0", "version=2"):
        answer = raw_upload_pack(server.address[1], keys["carol"], protocol, request)
        # Served as v0 even when v2 is asked for: v2 would accept any object it holds.
        assert b"version 2" not in answer
        assert b"not our ref" in answer, (protocol, answer[-300:])
        assert b"PACK" not in answer
