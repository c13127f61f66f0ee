"""Forwarding between an SSH channel and a git process until both sides are done.

    client stdin  --channel.recv-->  [stdin thread]  --pipe-->  git's stdin   (EOF -> close)
    client stdout <--channel.sendall--  [this thread, select]  <--pipe--  git's stdout
    client stderr <--sendall_stderr--   [this thread, select]  <--pipe--  git's stderr

The exit status is not sent here: the caller finishes its own work first (a push is settled and
pinned before the client hears that it is over).
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
import time

import paramiko

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
#: A git process whose client sends and receives nothing for this long is ended, so that a
#: stalled client cannot hold a repository's write lock (or a server thread) forever.
IDLE_TIMEOUT = 600.0


class _Activity:
    """When bytes last moved in either direction (shared by the two pumping threads)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()


def pump(
    channel: paramiko.Channel,
    process: subprocess.Popen[bytes],
    idle_timeout: float = IDLE_TIMEOUT,
) -> int:
    """Forward stdin, stdout and stderr until the process has exited; return its exit status."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    activity = _Activity()
    feeder = threading.Thread(
        target=_feed_stdin, args=(channel, process, activity), name="ssh-stdin", daemon=True
    )
    feeder.start()
    outputs = {process.stdout.fileno(): False, process.stderr.fileno(): True}  # fd -> is stderr
    client_gone = False
    while outputs:
        ready, _, _ = select.select(list(outputs), [], [], 1.0)
        if not ready:
            if time.monotonic() - activity.last > idle_timeout:
                log.warning("ending idle git process %s after %.0f s", process.pid, idle_timeout)
                _send(channel, f"forge-ci: idle for {idle_timeout:.0f} s; closing\n", True)
                process.kill()
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
    channel: paramiko.Channel, process: subprocess.Popen[bytes], activity: _Activity
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
                break
            activity.touch()
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
