"""kill -9 of ``forge-ci ssh`` after it recorded a push's intents, before or after git moved the
refs: nothing is lost, nothing is invented, and a ref moved behind forge-ci's back stops writes
until someone looks."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.settings import Settings, TestFault
from forge_ci_testing.git import GitClient
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import ZERO, ServerProcess, event_pins, events, refs


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def push_in_background(client: GitClient, work: Path, *refspecs: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["git", "push", client.url(), *refspecs],
        cwd=work,
        env=client.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def crash_at(
    settings: Settings, fault: str, client_for: MakeClient, database: Database
) -> tuple[GitClient, Path, str]:
    """Start a server that stops at ``fault``, push main from alice, kill -9 it there."""
    server = ServerProcess(settings, faults=(TestFault(fault),))
    try:
        alice = client_for("alice", server.port)
        work = alice.work_tree()
        commit = alice.git("rev-parse", "HEAD", cwd=work).stdout.strip()
        push = push_in_background(alice, work, "main")
        marker = settings.run_dir / f"fault-{fault}"
        wait_for(marker.exists, f"the server to reach {fault}")
        assert [row[1:] for row in events(database)] == [
            ("refs/heads/main", ZERO, commit, "prepared")
        ]
        server.kill()
        _out, err = push.communicate(timeout=60)
        # The pusher never heard that the push succeeded (no exit status came).
        assert push.returncode != 0, err
        marker.unlink()
    finally:
        server.stop()
    return alice, work, commit


def restarted(settings: Settings, client_for: MakeClient) -> tuple[ServerProcess, GitClient]:
    server = ServerProcess(settings)
    return server, client_for("alice", server.port)


def test_a_crash_before_git_hears_the_answer_aborts_the_intent(
    world: Settings, database: Database, client_for: MakeClient
) -> None:
    _, work, commit = crash_at(world, "pause-before-answer", client_for, database)
    # The hook saw its connection die without an answer, so git refused the update.
    assert "refs/heads/main" not in refs(world)

    server, alice = restarted(world, client_for)
    try:
        alice.push(work, "main")
    finally:
        server.stop()
    assert [row[1:] for row in events(database)] == [
        ("refs/heads/main", ZERO, commit, "aborted"),
        ("refs/heads/main", ZERO, commit, "confirmed"),
    ]
    second_id = events(database)[1][0]
    assert event_pins(world) == {f"refs/forge-ci/push-events/{second_id}": commit}


def test_a_crash_after_git_moved_the_ref_confirms_the_intent(
    world: Settings, database: Database, client_for: MakeClient
) -> None:
    _, work, first = crash_at(world, "pause-before-confirm", client_for, database)
    # receive-pack had moved the ref and ended; only the record lags behind.
    assert refs(world)["refs/heads/main"] == first

    server, alice = restarted(world, client_for)
    try:
        second = alice.commit(work, "second")
        alice.push(work, "main")
    finally:
        server.stop()
    rows = events(database)
    assert [row[1:] for row in rows] == [
        ("refs/heads/main", ZERO, first, "confirmed"),  # recovered before the second push
        ("refs/heads/main", first, second, "confirmed"),
    ]
    assert event_pins(world) == {
        f"refs/forge-ci/push-events/{rows[0][0]}": first,
        f"refs/forge-ci/push-events/{rows[1][0]}": second,
    }


def test_a_ref_moved_by_hand_stops_writes_and_names_the_event(
    world: Settings, database: Database, client_for: MakeClient
) -> None:
    # Crashed after git moved the ref (before the pre-receive answer, the pushed commit was
    # still in git's quarantine, and was dropped with it).
    _, work, commit = crash_at(world, "pause-before-confirm", client_for, database)
    [(event_id, *_rest)] = events(database)
    # Someone moves the ref by hand, to a third value (git update-ref runs no push hook).
    bare = repository_path(world.repositories_dir, "alice", "demo")
    env = {
        **os.environ,
        "GIT_COMMITTER_NAME": "Operator",
        "GIT_COMMITTER_EMAIL": "op@example.com",
        "GIT_AUTHOR_NAME": "Operator",
        "GIT_AUTHOR_EMAIL": "op@example.com",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=bare, env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    third = git("commit-tree", f"{commit}^{{tree}}", "-m", "by hand")
    git("update-ref", "refs/heads/main", third)

    server, alice = restarted(world, client_for)
    try:
        alice.commit(work, "second")
        result = alice.push(work, "main", check=False)
        assert result.returncode != 0
        assert "writes to alice/demo are refused until an operator inspects it" in result.stderr
        assert (
            f"push event {event_id} (refs/heads/main {ZERO[:12]} -> {commit[:12]}, pushed by "
            f"alice) needs inspection: the ref is now at {third[:12]}"
        ) in result.stderr
        assert refs(world)["refs/heads/main"] == third  # nothing changed
        assert "refs/heads/main" in alice.git("ls-remote", alice.url()).stdout  # reads go on

        git("update-ref", "-d", "refs/heads/main")  # the operator restores the recorded old value
        alice.push(work, "main")
    finally:
        server.stop()
    assert [row[4] for row in events(database)] == ["aborted", "confirmed"]
