"""Who may clone, fetch and push: readers read, writers write, strangers see nothing."""

from __future__ import annotations

import re

from forge_ci.db import Database
from forge_ci.settings import Settings
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import events, refs


def test_readers_clone_and_fetch_but_cannot_push(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    port = server.address[1]
    alice, carol = client_for("alice", port), client_for("carol", port)
    work = alice.work_tree()
    alice.push(work, "main")

    clone = carol.home / "clone"
    carol.git("clone", "-q", carol.url(), str(clone))
    assert (clone / "file.txt").read_text() == "first\n"
    alice.commit(work, "second")
    alice.push(work, "main")
    carol.git("fetch", "-q", cwd=clone)
    assert carol.git("log", "-1", "--format=%s", "origin/main", cwd=clone).stdout == "second\n"

    before = refs(world), events(database)
    carol.commit(clone, "from carol")
    result = carol.git("push", carol.url(), "HEAD:main", cwd=clone, check=False)
    assert result.returncode != 0
    assert "forge-ci: write access to alice/demo is required; you have read" in result.stderr
    assert (refs(world), events(database)) == before


def test_strangers_and_unknown_repositories_get_the_same_not_found(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    port = server.address[1]
    dave = client_for("dave", port)  # a valid key, no role in alice/demo
    messages = []
    for url in (dave.url("alice/demo.git"), dave.url("alice/nope.git"), dave.url("zed/x.git")):
        for command in (["ls-remote", url], ["push", url, "HEAD:main"]):
            result = dave.git(*command, cwd=dave.work_tree(f"w{len(messages)}"), check=False)
            assert result.returncode != 0
            line = next(x for x in result.stderr.splitlines() if x.startswith("forge-ci:"))
            messages.append(re.sub(r"repository \S+ not found", "repository X not found", line))
    assert set(messages) == {"forge-ci: repository X not found"}
    assert refs(world) == {} and events(database) == []


def test_unknown_keys_and_other_login_names_are_refused(
    server: SshServer, world: Settings, client_for: MakeClient
) -> None:
    port = server.address[1]
    nobody = client_for("nobody", port)
    result = nobody.git("ls-remote", nobody.url(), check=False)
    assert result.returncode != 0 and "Permission denied (publickey)" in result.stderr
    # alice's key, but not logging in as "git": the login name never picks the user.
    alice = client_for("alice", port)
    as_alice = f"ssh://alice@127.0.0.1:{port}/alice/demo.git"
    result = alice.git("ls-remote", as_alice, check=False)
    assert result.returncode != 0 and "Permission denied (publickey)" in result.stderr


def test_every_path_form_git_sends_is_understood(
    server: SshServer, world: Settings, client_for: MakeClient
) -> None:
    port = server.address[1]
    alice = client_for("alice", port)
    work = alice.work_tree()
    alice.push(work, "main")
    for url in (
        alice.url("alice/demo.git"),  # sends '/alice/demo.git'
        alice.url("alice/demo"),  # '/alice/demo'
        "git@127.0.0.1:alice/demo.git",  # scp form: 'alice/demo.git' (the port is in -p)
        "git@127.0.0.1:alice/demo",
    ):
        assert "refs/heads/main" in alice.git("ls-remote", url).stdout, url
    for bad in ("git@127.0.0.1:alice/demo.git.git", "git@127.0.0.1:alice/../alice/demo"):
        result = alice.git("ls-remote", bad, check=False)
        assert "not found" in result.stderr, bad


def test_fetches_speak_protocol_v1_or_v0_never_v2(
    server: SshServer, world: Settings, client_for: MakeClient
) -> None:
    """GIT_PROTOCOL is the one environment variable the server accepts, and v2 is not served.

    v2's upload-pack hands out any object by SHA, hidden pins included (issue #14, finding 6;
    tests/ssh/test_fetch_hidden.py); git clients fall back to v0 by themselves.
    """
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main")
    alice.env["GIT_TRACE_PACKET"] = "1"
    traced = alice.git("-c", "protocol.version=2", "ls-remote", alice.url()).stderr
    assert "version 2" not in traced and "refs/heads/main" in traced
    traced = alice.git("-c", "protocol.version=1", "ls-remote", alice.url()).stderr
    assert "version 1" in traced
    traced = alice.git("-c", "protocol.version=0", "ls-remote", alice.url()).stderr
    assert "version 2" not in traced and "version 1" not in traced
