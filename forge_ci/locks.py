"""A cross-process, per-repository write lock.

Every managed write to a repository (a push, run creation, recovery of push events) happens under
this lock. It is an ``flock`` on ``<data dir>/locks/repo-<id>.lock``: the kernel releases it when
the holder dies, even by kill -9, so a crash never leaves a repository locked. Each acquisition
opens its own file description, so two threads of one process exclude each other as well.

The lock yields its file descriptor. A push passes it to ``git receive-pack`` (``pass_fds``):
the lock then stays held until *every* process of the push is gone, so if the SSH server is
killed mid-push, nobody can settle the repository while an orphaned receive-pack may still be
moving a ref.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forge_ci.errors import RepositoryBusy

_POLL_INTERVAL = 0.01
_MAX_POLL_INTERVAL = 0.1


def lock_path(locks_dir: Path, repository_id: int) -> Path:
    return locks_dir / f"repo-{repository_id}.lock"


@contextmanager
def repository_lock(
    locks_dir: Path, repository_id: int, full_name: str, timeout: float
) -> Iterator[int]:
    """Hold the repository's write lock for the block; RepositoryBusy after ``timeout`` seconds.

    Yields the locked descriptor (close-on-exec unless a child is given it explicitly).
    """
    locks_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(locks_dir, repository_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        interval = _POLL_INTERVAL
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RepositoryBusy(
                    f"repository {full_name} is busy: another write has held it for more than "
                    f"{timeout:g} s; try again shortly"
                )
            time.sleep(min(interval, remaining))
            interval = min(interval * 2, _MAX_POLL_INTERVAL)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
