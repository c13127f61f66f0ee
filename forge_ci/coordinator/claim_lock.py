"""SQLite only: claim transactions queue for one file lock, in the kernel.

SQLite's busy handler polls with growing sleeps, so with dozens of claimers competing for
``BEGIN IMMEDIATE`` an unlucky one can miss every release for its whole busy timeout. A
blocking ``flock`` wakes waiters when the lock is released instead. Claim transactions are
short, and the kernel releases the lock of a process that dies.

``flock`` excludes open file descriptions, not processes or threads: two threads sharing one
descriptor would not exclude each other, nor would a forked child using its parent's. So each
thread of each process keeps a descriptor of its own, opened on its first claim and kept
(opening and closing the file on every claim was about 4% of a claim's time); a claim made
while its thread already holds the lock (never in the service) opens one for itself.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forge_ci.coordinator.direct_claims import EarlyLook

LOCK_NAME = "claims.lock"


class _Descriptor:
    """One open descriptor of a folder's lock file, closed when dropped."""

    def __init__(self, lock_dir: Path) -> None:
        path = lock_dir / LOCK_NAME
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            self.fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            lock_dir.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(path, flags, 0o600)
        self.lock_dir = lock_dir
        self.pid = os.getpid()
        self.held = False

    def __del__(self, close: Callable[[int], None] = os.close) -> None:
        close(self.fd)  # bound early: at interpreter exit ``os`` may be gone


class _Kept(threading.local):
    descriptor: _Descriptor | None = None


_KEPT = _Kept()


def _descriptor(lock_dir: Path) -> _Descriptor:
    """This thread's descriptor of the folder's lock file (a fresh one when it is in use)."""
    kept = _KEPT.descriptor
    if kept is not None and kept.pid == os.getpid():
        if kept.held:
            return _Descriptor(lock_dir)  # a claim inside a claim: closed when it ends
        if kept.lock_dir == lock_dir:
            return kept
    # A replaced descriptor (another folder, or inherited from a parent) is closed as it is
    # dropped; closing a forked child's copy leaves its parent's lock alone.
    _KEPT.descriptor = fresh = _Descriptor(lock_dir)
    return fresh


@contextmanager
def sqlite_claim_lock(
    lock_dir: Path | None, early: EarlyLook | None = None
) -> Iterator[EarlyLook | None]:
    """Hold the claims' file lock in ``lock_dir`` (made when missing) for the block.

    Yields ``early`` when the lock was free; a claim that has to wait gives the early look's
    connection back to the pool first (it would hold it for the whole wait, and a process's
    queued claimers could take every connection) and yields None: it looks again under the
    lock. Without ``lock_dir`` (PostgreSQL) it takes no lock.
    """
    if lock_dir is None:
        yield early
        return
    descriptor = _descriptor(lock_dir)
    try:
        fcntl.flock(descriptor.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if early is not None:
            early.connection.close()
            early = None
        fcntl.flock(descriptor.fd, fcntl.LOCK_EX)
    descriptor.held = True
    try:
        yield early
    finally:
        descriptor.held = False
        fcntl.flock(descriptor.fd, fcntl.LOCK_UN)
