"""The SQLite claims' file lock: one kept descriptor per thread and process, and still one
holder at a time across threads and forked processes (``flock`` excludes open file
descriptions, so a shared descriptor would exclude nothing)."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from forge_ci.coordinator import claim_lock
from forge_ci.coordinator.claim_lock import sqlite_claim_lock


def _kept_fd() -> int:
    kept = claim_lock._KEPT.descriptor
    assert kept is not None
    return kept.fd


def test_a_thread_keeps_its_descriptor_between_claims(tmp_path: Path) -> None:
    with sqlite_claim_lock(tmp_path / "locks"):  # the folder is made when missing
        first = _kept_fd()
    with sqlite_claim_lock(tmp_path / "locks"):
        assert _kept_fd() == first
    with sqlite_claim_lock(tmp_path / "other"):  # another folder: another file
        assert _kept_fd() != first
    assert (tmp_path / "locks" / "claims.lock").exists()
    assert (tmp_path / "other" / "claims.lock").exists()


def test_threads_exclude_each_other(tmp_path: Path) -> None:
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def holder() -> None:
        with sqlite_claim_lock(tmp_path):
            order.append("first in")
            inside.set()
            release.wait(10)
            order.append("first out")

    def second() -> None:
        with sqlite_claim_lock(tmp_path):
            order.append("second in")

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert inside.wait(10)
    threads.append(threading.Thread(target=second))
    threads[1].start()
    threads[1].join(0.3)
    assert threads[1].is_alive()  # waits for the first thread's release
    release.set()
    for thread in threads:
        thread.join(10)
    assert order == ["first in", "first out", "second in"]


def test_a_forked_child_does_not_share_its_parents_lock(tmp_path: Path) -> None:
    with sqlite_claim_lock(tmp_path):
        pass  # this thread now keeps a descriptor, which a child inherits
    go_read, go_write = os.pipe()
    in_read, in_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: once the parent holds the lock, a claim must wait for it
        try:
            os.read(go_read, 1)
            with sqlite_claim_lock(tmp_path):
                os.write(in_write, b"in")
        finally:
            os._exit(0)
    os.close(in_write)
    with sqlite_claim_lock(tmp_path):  # on the descriptor the child inherited
        os.write(go_write, b"!")
        os.set_blocking(in_read, False)
        threading.Event().wait(0.3)
        with pytest.raises(BlockingIOError):
            os.read(in_read, 2)  # the child still waits while the parent holds the lock
    os.set_blocking(in_read, True)
    assert os.read(in_read, 2) == b"in"  # and got it once the parent let go
    for fd in (go_read, go_write, in_read):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_claim_inside_a_held_lock_gets_a_descriptor_of_its_own(tmp_path: Path) -> None:
    with sqlite_claim_lock(tmp_path):
        outer = _kept_fd()
        inner = claim_lock._descriptor(tmp_path)
        # Not the held descriptor (whose release would end the outer claim's lock too): one
        # that the outer lock excludes, as another claimer's would be.
        assert inner.fd != outer
        with pytest.raises(BlockingIOError):
            fcntl.flock(inner.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        del inner
        assert _kept_fd() == outer
