"""The action cache (issue #15 item 2): upstream sources fetched with git, only from loopback
(a real ``git daemon`` on 127.0.0.1) or ``file://`` here; pins survive a moved tag and gc."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from forge_ci.runs.action_cache import ACTION_PIN_PREFIX, Fetched, fetch_action
from forge_ci_testing.forge import free_port


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """``<base>/acme/tool``: a bare repository with tag v1, branch main and an annotated tag."""
    base = tmp_path / "served"
    bare = base / "acme" / "tool"
    _git("init", "-q", "--bare", str(bare))
    work = tmp_path / "work"
    _git("init", "-q", "-b", "main", str(work))
    (work / "action.yml").write_text("name: Tool v1\nruns: {using: node20, main: a.js}\n")
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "v1", cwd=work)
    _git("tag", "v1", cwd=work)
    _git("tag", "-a", "-m", "annotated", "v1-annotated", cwd=work)
    _git("push", "-q", str(bare), "main", "v1", "v1-annotated", cwd=work)
    return base


@pytest.fixture
def daemon(upstream: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={upstream}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(upstream),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _commit_of(base: Path, ref: str) -> str:
    return _git(f"--git-dir={base / 'acme' / 'tool'}", "rev-parse", f"{ref}^{{commit}}")


def test_tags_branches_and_shas_over_a_loopback_git_daemon(
    daemon: str, upstream: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    url = f"{daemon}/acme/tool"
    v1 = _commit_of(upstream, "v1")
    for ref in ("v1", "main", "v1-annotated", v1):
        found = fetch_action(cache, url, ref)
        assert isinstance(found, Fetched), found
        assert found.commit == v1 and found.pin_ref == ACTION_PIN_PREFIX + v1
    missing = fetch_action(cache, url, "v9")
    assert missing == "no tag or branch v9"
    assert isinstance(fetch_action(cache, f"{daemon}/acme/none", "v1"), str)


def test_the_pin_survives_a_moved_tag_and_gc(upstream: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    url = f"file://{upstream}/acme/tool"
    first = fetch_action(cache, url, "v1")
    assert isinstance(first, Fetched)
    bare = upstream / "acme" / "tool"
    tree = _git(f"--git-dir={bare}", "mktree", cwd=tmp_path)  # an empty tree
    moved = _git(f"--git-dir={bare}", "commit-tree", tree, "-m", "moved")
    _git(f"--git-dir={bare}", "tag", "-f", "v1", moved)
    second = fetch_action(cache, url, "v1")
    assert isinstance(second, Fetched) and second.commit == moved
    _git(f"--git-dir={first.cache}", "gc", "-q", "--prune=now")
    git = pygit2.Repository(str(first.cache))
    assert str(git.references[first.pin_ref].target) == first.commit
    assert first.commit in git


def test_concurrent_fetches_of_one_cache_both_succeed(upstream: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    url = f"file://{upstream}/acme/tool"
    results: list[Fetched | str] = []

    def fetch() -> None:
        results.append(fetch_action(cache, url, "v1"))

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    commits = {r.commit if isinstance(r, Fetched) else r for r in results}
    assert commits == {_commit_of(upstream, "v1")}


def test_a_fetch_that_takes_too_long_is_stopped(tmp_path: Path) -> None:
    # A listener on loopback that accepts and never answers: git waits, the limit ends it.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        found = fetch_action(
            tmp_path / "cache", f"git://127.0.0.1:{port}/acme/tool", "v1", seconds=1
        )
    finally:
        listener.close()
    assert found == "git fetch took longer than 1 seconds"
