"""Forwarding between an SSH channel and a git process until both sides are done.

    client stdin  --channel.recv-->  [stdin thread]  --pipe-->  git's stdin   (EOF -> close)
    client stdout <--channel.sendall--  [this thread, select]  <--pipe--  git's stdout
    client stderr <--sendall_stderr--   [this thread, select]  <--pipe--  git's stderr

The exit status is not sent here: the caller finishes its own work first (a push is settled and
pinned before the client hears that it is over).

What ends the exchange early (issue #14, findings 4 and 5), as :class:`Watch` decides::

    client sending (before its EOF)                 | client done (after its EOF)
    --------------------------------------------------+-------------------------------
    idle: nothing moved for idle_seconds, and the    | never idle: only the server
      server is not working in a hook               |   works now (hooks, settling)
    too slow: less than min_rate bytes/s on average  |
      after the first rate_grace seconds (a push)   |
    --------------------------------------------------+-------------------------------
    total: longer than total_seconds in all (a push, under the repository's lock)
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import paramiko

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
#: A git process whose client sends and receives nothing for this long is ended, so that a
#: stalled client cannot hold a server thread (or a repository's write lock) forever.
IDLE_TIMEOUT = 600.0


@dataclass(frozen=True)
class Limits:
    idle_seconds: float = IDLE_TIMEOUT
    total_seconds: float | None = None
    min_rate: float | None = None
    rate_grace: float = 0.0


#: A fetch (upload-pack): only the idle rule.
FETCH = Limits()
#: A push holds its repository's lock: an hour in all, and after the first two minutes (a big
#: repository's client may count its objects that long) the client must average 1 KiB/s until
#: it has sent everything (one byte every 60 s held the lock for 12 minutes).
PUSH = Limits(total_seconds=3600.0, min_rate=1024.0, rate_grace=120.0)


def push_watch() -> Watch:
    """A watch with the push limits (read when called, so tests can change ``PUSH``)."""
    return Watch(PUSH)


class Watch:
    """What moved and who is working, shared by the pumping threads and a push's hook answers."""

    def __init__(self, limits: Limits = FETCH) -> None:
        self.limits = limits
        self.started = self.last = time.monotonic()
        self.received = 0
        self.client_done = False
        self._working = 0
        self._lock = threading.Lock()

    def touch(self, received: int = 0) -> None:
        with self._lock:
            self.last = time.monotonic()
            self.received += received

    @contextmanager
    def working(self) -> Iterator[None]:
        """The server is working for this exchange (a hook's request): the client may wait."""
        with self._lock:
            self._working += 1
        try:
            yield
        finally:
            with self._lock:
                self._working -= 1
                self.last = time.monotonic()

    def verdict(self, now: float) -> str | None:
        """Why the exchange must end now, or ``None``."""
        limits = self.limits
        with self._lock:
            elapsed = now - self.started
            if limits.total_seconds is not None and elapsed > limits.total_seconds:
                return f"longer than {limits.total_seconds:.0f} s in all"
            if self.client_done:
                return None
            if self._working == 0 and now - self.last > limits.idle_seconds:
                return f"idle for {limits.idle_seconds:.0f} s"
            if limits.min_rate is not None and elapsed > limits.rate_grace:
                if self.received < limits.min_rate * (elapsed - limits.rate_grace):
                    return (
                        f"arriving too slowly: {self.received} bytes in {elapsed:.0f} s "
                        f"(at least {limits.min_rate:.0f} bytes/s after the first "
                        f"{limits.rate_grace:.0f} s)"
                    )
        return None


def pump(
    channel: paramiko.Channel, process: subprocess.Popen[bytes], watch: Watch | None = None
) -> int:
    """Forward stdin, stdout and stderr until the process has exited; return its exit status."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    activity = watch or Watch()
    feeder = threading.Thread(
        target=_feed_stdin, args=(channel, process, activity), name="ssh-stdin", daemon=True
    )
    feeder.start()
    outputs = {process.stdout.fileno(): False, process.stderr.fileno(): True}  # fd -> is stderr
    client_gone = False
    ended = False
    while outputs:
        ready, _, _ = select.select(list(outputs), [], [], 1.0)
        reason = None if ended else activity.verdict(time.monotonic())
        if reason is not None:
            ended = True
            log.warning("ending git process %s: %s", process.pid, reason)
            _send(channel, f"forge-ci: {reason}; closing\n", True)
            process.kill()
        if not ready:
            continue
        for fd in ready:
            data = os.read(fd, CHUNK)
            if not data:
                del outputs[fd]
                continue
            activity.touch()
            if not client_gone and not _send(channel, data, outputs[fd]):
                # Keep draining git's output so it can finish (and a push can be settled), but
                # stop writing to a client that has left.
                client_gone = True
                process.kill()
    status = process.wait()
    process.stdout.close()
    process.stderr.close()
    return status if status >= 0 else 128 - status  # killed by signal N -> 128+N, like a shell


def _send(channel: paramiko.Channel, data: bytes | str, to_stderr: bool) -> bool:
    payload = data.encode() if isinstance(data, str) else data
    try:
        if to_stderr:
            channel.sendall_stderr(payload)
        else:
            channel.sendall(payload)
    except (OSError, EOFError, paramiko.SSHException):
        return False
    return True


def _feed_stdin(
    channel: paramiko.Channel, process: subprocess.Popen[bytes], activity: Watch
) -> None:
    assert process.stdin is not None
    fd = process.stdin.fileno()
    try:
        while True:
            try:
                data = channel.recv(CHUNK)
            except (OSError, EOFError, paramiko.SSHException):
                break
            if not data:
                activity.client_done = True
                break
            activity.touch(len(data))
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
    except BrokenPipeError:
        pass  # git exited before reading everything; its exit status says why
    finally:
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
