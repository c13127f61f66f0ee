"""Pushes of many refs at once (issue #21): every ref update is recorded exactly once and
confirmed, with and without ``--atomic`` (without it git reports each ref on its own), and
concurrent many-ref pushers to one repository each get exactly their own events.

Behaviour only: how long these pushes take is bench/push_refs.py's business.
"""

from __future__ import annotations

import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import PushEvent, User
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import ZERO, accepted, event_pins, events, refs


def make_branches(client: GitClient, work: Path, prefix: str, count: int) -> list[str]:
    """``count`` new local branches at HEAD, named ``<prefix><i>``; returns their refs."""
    head = client.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    names = [f"refs/heads/{prefix}{i}" for i in range(count)]
    subprocess.run(
        ["git", "update-ref", "--stdin"],
        cwd=work,
        env=client.env,
        input="".join(f"create {name} {head}\n" for name in names),
        text=True,
        check=True,
    )
    return names


def rows(database: Database) -> list[tuple[str, str, str, str, str]]:
    """(push session, pusher, ref, new, state) of every push event."""
    with database.session(read_only=True) as session:
        found = session.execute(
            select(
                PushEvent.push_session, User.name, PushEvent.ref, PushEvent.new_sha, PushEvent.state
            )
            .join(User, User.id == PushEvent.pusher_id)
            .order_by(PushEvent.id)
        )
        return [tuple(row) for row in found]  # type: ignore[misc]


@pytest.mark.parametrize("atomic", [False, True], ids=["per-ref", "atomic"])
def test_a_thousand_ref_push_records_and_confirms_each_ref_once(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient, atomic: bool
) -> None:
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    head = alice.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    names = make_branches(alice, work, "many/", 1000)
    result = alice.push(work, *(["--atomic"] if atomic else []), *names)
    assert accepted(result) == {name: "*" for name in names}

    recorded = events(database)
    assert sorted((ref, old, new, state) for _id, ref, old, new, state in recorded) == sorted(
        (name, ZERO, head, "confirmed") for name in names
    )
    assert len({session for session, *_ in rows(database)}) == 1  # one push, one session
    assert event_pins(world) == {
        f"refs/forge-ci/push-events/{event_id}": head for event_id, *_ in recorded
    }
    server_refs = refs(world)
    assert all(server_refs[name] == head for name in names)
    # The pins went into packed-refs in one rewrite (forge_ci.packedrefs), not 1,000 files,
    # and git keeps working on the repository: it accepts the file, deletes packed and loose
    # branches beside it, and repacks it without losing a pin.
    bare = repository_path(world.repositories_dir, "alice", "demo")
    assert not (bare / "refs/forge-ci/push-events").exists()
    subprocess.run(["git", "fsck", "--no-dangling"], cwd=bare, check=True, capture_output=True)
    result = alice.push(work, *(f":{name}" for name in names[:10]))
    assert accepted(result) == {name: "-" for name in names[:10]}
    subprocess.run(["git", "pack-refs", "--all"], cwd=bare, check=True)
    assert len(event_pins(world)) == 1000 + 10 - 10  # deletions have nothing to pin
    assert sorted(state for *_, state in events(database)) == ["confirmed"] * 1010


def test_concurrent_many_ref_pushers_each_get_exactly_their_events(
    server: SshServer, world: Settings, database: Database, client_for: MakeClient
) -> None:
    port = server.address[1]
    seed = client_for("alice", port)
    base = seed.work_tree("seed")
    seed.push(base, "main")

    pushers: list[tuple[str, GitClient, Path, list[str], bool]] = []
    for i in range(4):
        name = "alice" if i % 2 else "bob"
        client = client_for(name, port)
        work = client.home / f"work{i}"
        client.git("clone", "-q", client.url(), str(work))
        client.commit(work, f"change {i}")
        pushers.append((name, client, work, make_branches(client, work, f"p{i}/", 150), i < 2))

    results: list[subprocess.CompletedProcess[str] | None] = [None] * len(pushers)
    start = threading.Barrier(len(pushers))

    def push(i: int) -> None:
        _name, client, work, names, atomic = pushers[i]
        start.wait()
        results[i] = client.push(work, *(["--atomic"] if atomic else []), *names, check=False)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(len(pushers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)

    found = rows(database)[1:]  # the seed's main aside
    by_session: dict[str, set[tuple[str, str, str]]] = {}
    for session, pusher, ref, new, state in found:
        assert state == "confirmed"
        by_session.setdefault(session, set()).add((pusher, ref, new))
    assert Counter(ref for _s, _p, ref, _n, _st in found).most_common(1)[0][1] == 1
    expected = []
    for i, (name, client, work, names, _atomic) in enumerate(pushers):
        result = results[i]
        assert result is not None and result.returncode == 0, result and result.stderr
        assert accepted(result) == {ref: "*" for ref in names}
        head = client.git("rev-parse", "HEAD", cwd=work).stdout.strip()
        expected.append({(name, ref, head) for ref in names})
    assert sorted(by_session.values(), key=sorted) == sorted(expected, key=sorted)
