"""Pushes with the real OpenSSH client: every accepted update has exactly one confirmed event
and (deletions aside) a pin; a refused push records nothing and changes no ref."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.settings import Settings, TestFault
from forge_ci_testing.git import GitClient
from hooks.install import install_hooks
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import ZERO, ServerProcess, accepted, event_pins, events, refs
from tests.ssh.test_push_limits import open_receive_pack


def rev(client: GitClient, work: Path, what: str = "HEAD") -> str:
    return client.git("rev-parse", what, cwd=work).stdout.strip()


def assert_pinned(settings: Settings, database: Database) -> None:
    """Every confirmed event except deletions is pinned at its new commit, and nothing else is."""
    expected = {
        f"refs/forge-ci/push-events/{event_id}": new
        for event_id, _ref, _old, new, state in events(database)
        if state == "confirmed" and new != ZERO
    }
    assert event_pins(settings) == expected


def test_branch_lifecycle_and_tags(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    c1 = rev(alice, work)

    assert accepted(alice.push(work, "main")) == {"refs/heads/main": "*"}
    c2 = alice.commit(work, "second")
    assert accepted(alice.push(work, "main")) == {"refs/heads/main": " "}
    alice.git("commit", "-q", "--amend", "-m", "second, rewritten", cwd=work)
    c3 = rev(alice, work)
    assert accepted(alice.push(work, "--force", "main")) == {"refs/heads/main": "+"}
    assert accepted(alice.push(work, "main:refs/heads/topic")) == {"refs/heads/topic": "*"}
    assert accepted(alice.push(work, ":refs/heads/topic")) == {"refs/heads/topic": "-"}
    alice.git("tag", "-a", "v1", "-m", "version 1", cwd=work)
    tag = rev(alice, work, "refs/tags/v1")
    assert accepted(alice.push(work, "refs/tags/v1")) == {"refs/tags/v1": "*"}

    assert [row[1:] for row in events(database)] == [
        ("refs/heads/main", ZERO, c1, "confirmed"),
        ("refs/heads/main", c1, c2, "confirmed"),
        ("refs/heads/main", c2, c3, "confirmed"),
        ("refs/heads/topic", ZERO, c3, "confirmed"),
        ("refs/heads/topic", c3, ZERO, "confirmed"),
        ("refs/tags/v1", ZERO, tag, "confirmed"),
    ]
    assert_pinned(world, database)
    server_refs = refs(world)
    assert server_refs["refs/heads/main"] == c3 and server_refs["refs/tags/v1"] == tag
    assert "refs/heads/topic" not in server_refs
    # The commit the force push threw away stays reachable through its event's pin.
    assert c2 in event_pins(world).values()


def test_several_refs_in_one_push_atomic_or_not(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    bob = client_for("bob", server.address[1])  # a writer, not the owner
    work = bob.work_tree()
    c1 = rev(bob, work)
    result = bob.push(work, "--atomic", "main", "main:refs/heads/b1", "main:refs/heads/b2")
    assert accepted(result) == {"refs/heads/main": "*", "refs/heads/b1": "*", "refs/heads/b2": "*"}
    c2 = bob.commit(work, "second")
    bob.git("tag", "t1", cwd=work)
    result = bob.push(work, "main:refs/heads/b1", ":refs/heads/b2", "refs/tags/t1")
    assert accepted(result) == {"refs/heads/b1": " ", "refs/heads/b2": "-", "refs/tags/t1": "*"}

    rows = [row[1:] for row in events(database)]
    assert sorted(rows[:3]) == [
        ("refs/heads/b1", ZERO, c1, "confirmed"),
        ("refs/heads/b2", ZERO, c1, "confirmed"),
        ("refs/heads/main", ZERO, c1, "confirmed"),
    ]
    assert sorted(rows[3:]) == [
        ("refs/heads/b1", c1, c2, "confirmed"),
        ("refs/heads/b2", c1, ZERO, "confirmed"),
        ("refs/tags/t1", ZERO, c2, "confirmed"),
    ]
    assert_pinned(world, database)


def test_refused_pushes_record_nothing_and_change_no_ref(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main")
    before_refs, before_events = refs(world), events(database)

    def refused(*refspecs: str, by_git: bool = False) -> str:  # by_git: of one ref
        result = alice.push(work, *refspecs, check=False)
        assert result.returncode != 0, result.stdout
        assert all(flag == "!" for flag in accepted(result).values()), result.stdout
        assert refs(world) == before_refs
        now = events(database)
        assert now[: len(before_events)] == before_events
        # An update that forge-ci's policy refuses is never recorded. One that git itself
        # refuses after pre-receive (receive.denyNonFastForwards) was recorded as an intent,
        # and settling the push found the ref unmoved: aborted, which nobody is shown.
        added = [row[4] for row in now[len(before_events) :]]
        assert added == (["aborted"] if by_git else []), now
        return result.stderr

    assert "refs/forge-ci/ is reserved for forge-ci" in refused("main:refs/forge-ci/x")
    assert "only branches (refs/heads/...) and tags" in refused("main:refs/notes/x")
    assert "refs/heads/HEAD: a branch or tag cannot be named HEAD" in refused("HEAD:HEAD")
    # One bad ref refuses the whole push, atomic or not.
    alice.commit(work, "second")
    assert "refs/notes/y" in refused("main", "main:refs/notes/y")
    assert "refs/notes/y" in refused("--atomic", "main", "main:refs/heads/ok", "main:refs/notes/y")

    # A non-fast-forward, refused by the client...
    other = client_for("bob", server.address[1])
    clone = other.home / "clone"
    other.git("clone", "-q", other.url(), str(clone))
    other.commit(clone, "from bob")
    other.git("push", "-q", other.url(), "main", cwd=clone)
    before_refs, before_events = refs(world), events(database)
    assert "Updates were rejected" in refused("main")
    # ...and by the server, when the repository denies them.
    owner_path = repository_path(world.repositories_dir, "alice", "demo")
    subprocess.run(
        ["git", "config", "receive.denyNonFastForwards", "true"], cwd=owner_path, check=True
    )
    assert "non-fast-forward" in refused("--force", "main", by_git=True)


def test_ten_concurrent_pushers_are_each_recorded_exactly_once(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    port = server.address[1]
    seed = client_for("alice", port)
    base = seed.work_tree("seed")
    seed.push(base, "main")

    clients: list[tuple[GitClient, Path]] = []
    for i in range(10):
        client = client_for("alice" if i % 2 else "bob", port)
        work = client.home / f"work{i}"
        client.git("clone", "-q", client.url(), str(work))
        client.commit(work, f"change {i}")
        clients.append((client, work))

    results: list[subprocess.CompletedProcess[str]] = [None] * 10  # type: ignore[list-item]
    start = threading.Barrier(10)

    def push(i: int) -> None:
        client, work = clients[i]
        start.wait()
        # Everyone races for main; everyone also pushes a branch of their own.
        results[i] = client.push(work, "main", f"main:refs/heads/p{i}", check=False)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)

    accepted_updates = []
    for i, result in enumerate(results):
        flags = accepted(result)
        assert flags[f"refs/heads/p{i}"] == "*", result.stderr
        for ref, flag in flags.items():
            if flag != "!":
                accepted_updates.append((ref, rev(clients[i][0], clients[i][1])))
    assert sum(1 for ref, _ in accepted_updates if ref == "refs/heads/main") == 1

    recorded = [(ref, new) for _id, ref, _old, new, state in events(database)[1:]]
    assert sorted(recorded) == sorted(accepted_updates)
    assert {row[4] for row in events(database)} == {"confirmed"}
    assert_pinned(world, database)


def test_internal_refs_are_never_advertised(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main", "main:refs/heads/other")
    assert event_pins(world)  # the pins exist on the server...
    for version in ("0", "2"):  # ...and no protocol shows them
        listed = alice.git("-c", f"protocol.version={version}", "ls-remote", alice.url()).stdout
        assert "refs/heads/main" in listed and "refs/forge-ci" not in listed
    clone = alice.home / "mirror"
    alice.git("clone", "-q", "--mirror", alice.url(), str(clone))
    mirrored = alice.git("for-each-ref", cwd=clone).stdout
    assert "refs/heads/other" in mirrored and "refs/forge-ci" not in mirrored


def test_missing_non_executable_or_retired_hooks_refuse_pushes(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    hook = world.hooks_dir / "pre-receive"
    hook.chmod(0o644)
    result = alice.push(work, "main", check=False)
    assert result.returncode != 0
    assert "the server's git hooks are not ready (pre-receive is not executable)" in (result.stderr)
    assert "forge-ci hooks install" in result.stderr
    hook.chmod(0o777)
    result = alice.push(work, "main", check=False)
    assert "pre-receive is writable by group or others" in result.stderr
    hook.unlink()
    result = alice.push(work, "main", check=False)
    assert "pre-receive is missing" in result.stderr
    install_hooks(world)
    # An upgrade that kept an earlier version's reference-transaction hook: git would run it
    # twice per ref, and this server does not answer it.
    retired = world.hooks_dir / "reference-transaction"
    retired.write_text("#!/bin/sh\nexit 0\n")
    retired.chmod(0o755)
    result = alice.push(work, "main", check=False)
    assert "reference-transaction is left from an earlier forge-ci version" in result.stderr
    assert refs(world) == {} and events(database) == []
    # Reads are not affected.
    alice.git("ls-remote", alice.url())

    install_hooks(world)
    assert not retired.exists()
    alice.push(work, "main")
    assert [row[4] for row in events(database)] == ["confirmed"]


def test_testing_mode_cannot_disable_the_hooks_of_a_server_started_normally(
    world: Settings, database: Database, client_for: MakeClient
) -> None:
    """``FORGE_CI_TESTING=1`` switches faults on, and no fault can skip the hook requirement.

    The fault that once let the benchmark push without hooks is refused at start, and a server
    started normally (``forge-ci ssh``) with testing on still refuses pushes without its hooks.
    """
    with pytest.raises(AssertionError, match="server did not start") as refused:
        ServerProcess(world, faults=(TestFault("unhooked", "alice/demo"),))
    assert "unknown fault 'unhooked'" in str(refused.value)
    (world.hooks_dir / "pre-receive").unlink()
    # Testing switched on (with a fault that only shortens job minutes), hooks missing.
    server = ServerProcess(world, faults=(TestFault("job-minute-seconds", "1"),))
    try:
        alice = client_for("alice", server.port)
        result = alice.push(alice.work_tree(), "main", check=False)
    finally:
        server.stop()
    assert result.returncode != 0
    assert "pre-receive is missing" in result.stderr
    assert refs(world) == {} and events(database) == []


def test_a_repository_never_brings_its_own_hooks(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    path = repository_path(world.repositories_dir, "alice", "demo")
    marker = world.data_dir / "repository-hook-ran"
    evil = path / "evil-hooks"
    for folder in (path / "hooks", evil):
        folder.mkdir(exist_ok=True)
        for name in ("pre-receive", "reference-transaction", "post-receive", "update"):
            hook = folder / name
            hook.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
            hook.chmod(0o755)
    subprocess.run(["git", "config", "core.hooksPath", str(evil)], cwd=path, check=True)

    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    alice.push(work, "main")
    assert not marker.exists()
    configured = subprocess.run(
        ["git", "config", "core.hooksPath"], cwd=path, capture_output=True, text=True, check=True
    )
    assert configured.stdout.strip() == str(world.hooks_dir)  # re-asserted under the lock
    assert [row[4] for row in events(database)] == ["confirmed"]


def test_a_push_whose_settling_fails_is_settled_by_the_next_write(
    server: SshServer,
    world: Settings,
    database: Database,
    client_for: MakeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The intents are durable before git moves a ref; the refs say later what happened."""
    import ssh.push
    from forge_ci.errors import Unavailable

    real = ssh.push.settle_push
    calls = []

    def lost_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise Unavailable("the database is unavailable; try again later")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssh.push, "settle_push", lost_once)
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    result = alice.push(work, "main", "main:refs/heads/gone")
    assert accepted(result) == {"refs/heads/main": "*", "refs/heads/gone": "*"}
    assert "forge-ci: warning: the database is unavailable" in result.stderr
    assert [row[4] for row in events(database)] == ["prepared", "prepared"]
    # The next push settles them first (under the lock), then records its own.
    alice.push(work, ":refs/heads/gone")
    assert [row[4] for row in events(database)] == ["confirmed", "confirmed", "confirmed"]
    assert_pinned(world, database)


def raw_push(port: int, key: Path, command: str, *, pack: bool) -> str:
    """One command sent to receive-pack as a hand-made client would (git's own client never
    sends an old value other than what the server advertised); returns what came back."""
    channel = open_receive_pack(port, key)
    payload = f"{command}\0report-status\n".encode()
    data = b"%04x" % (len(payload) + 4) + payload + b"0000"
    if pack:  # an empty pack: every object the command names is on the server already
        body = b"PACK" + struct.pack(">II", 2, 0)
        data += body + hashlib.sha1(body).digest()
    channel.sendall(data)
    answer = b""
    while chunk := channel.recv(65536):
        answer += chunk
    while channel.recv_stderr_ready():
        answer += channel.recv_stderr(65536)
    channel.get_transport().close()  # type: ignore[union-attr]
    return answer.decode(errors="replace")


def test_old_values_a_client_makes_up_record_nothing_and_stop_no_writes(
    server: SshServer,
    world: Settings,
    database: Database,
    client_for: MakeClient,
    keys: dict[str, Path],
) -> None:
    """pre-receive hears the client's old values, which git checks only afterwards: forge-ci
    records what git will really try, so a made-up old value can neither confirm an event for
    an update git refused nor leave an intent that stops the repository's writes."""
    port = server.address[1]
    alice = client_for("alice", port)
    work = alice.work_tree()
    c1 = rev(alice, work)
    c2 = alice.commit(work, "second")
    alice.push(work, "HEAD~1:refs/heads/main", "HEAD:refs/heads/other")
    before_events = events(database)
    # main is at c1. "c2 -> c1": the ref already holds the new value, the old one is false.
    answer = raw_push(port, keys["alice"], f"{c2} {c1} refs/heads/main", pack=True)
    assert "ng refs/heads/main" in answer, answer
    # A "creation" of a ref that exists (it is at neither side afterwards).
    answer = raw_push(port, keys["alice"], f"{ZERO} {c2} refs/heads/main", pack=True)
    assert "ng refs/heads/main" in answer, answer
    assert events(database) == before_events
    assert refs(world)["refs/heads/main"] == c1
    # A deletion from an object nobody has: git deletes whatever the ref holds, and the event
    # says what it held.
    answer = raw_push(port, keys["alice"], f"{'1' * 40} {ZERO} refs/heads/other", pack=False)
    assert "ok refs/heads/other" in answer, answer
    *_, (_id, ref, old, new, state) = events(database)
    assert (ref, old, new, state) == ("refs/heads/other", c2, ZERO, "confirmed")
    # Writes go on.
    alice.push(work, "main")
    assert refs(world)["refs/heads/main"] == c2
    assert {row[4] for row in events(database)} == {"confirmed"}
