"""Running one ``run`` step's shell and streaming its output.

The shell starts in a new session and process group (``setsid`` before ``exec``), with standard
input from ``/dev/null``, the environment built by :mod:`worker.runner.environment` and no
inherited file descriptors. Standard output and error are read without blocking, 64 KiB at a
time, decoded as UTF-8 incrementally (a character split between reads stays whole; invalid bytes
and NUL become U+FFFD) and handed to the uploader, which applies back-pressure.

After the shell exits, output is drained for at most 250 ms: a background process that keeps
the pipe open cannot stall the job (redirect long-lived background output to a file).
"""

from __future__ import annotations

import codecs
import os
import selectors
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol

from worker.runner.clock import now
from worker.runner.processes import ProcessGroup
from worker.runner.watchdog import Watchdog

READ_SIZE = 64 * 1024
DRAIN_SECONDS = 0.25
_POLL_SECONDS = 0.1


class OutputWriter(Protocol):
    def write(self, step_id: str, stream: str, text: str) -> None: ...


class StepStartError(Exception):
    """The shell could not be started."""


class StreamDecoder:
    """Bytes of one stream to text, incrementally; invalid UTF-8 and NUL become U+FFFD."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        return self._decoder.decode(data, final).replace("\x00", "\ufffd")


@dataclass(frozen=True)
class ProcessEnd:
    #: The exit status, or -1 when a signal ended the shell.
    exit_code: int
    #: The signal that ended it, or 0.
    signal: int


def run_script(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    step_id: str,
    watchdog: Watchdog,
    uploader: OutputWriter,
) -> ProcessEnd:
    """Run ``argv`` to its end (or until the watchdog stops it), streaming its output."""
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise StepStartError(f"cannot start {argv[0]}: {exc.strerror}") from None
    group = ProcessGroup(process)
    watchdog.attach(group)
    try:
        _pump(process, group, step_id, uploader)
    finally:
        watchdog.detach()
        code = process.wait()
        if group.terminated:
            group.kill_now()
    if code < 0:
        return ProcessEnd(-1, -code)
    return ProcessEnd(code, 0)


def _pump(
    process: subprocess.Popen[bytes], group: ProcessGroup, step_id: str, uploader: OutputWriter
) -> None:
    assert process.stdout is not None and process.stderr is not None
    streams = {
        process.stdout.fileno(): ("stdout", StreamDecoder()),
        process.stderr.fileno(): ("stderr", StreamDecoder()),
    }
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    ended_at: float | None = None
    try:
        while True:
            if ended_at is None and group.poll() is not None:
                ended_at = now()
            timeout = _POLL_SECONDS
            if ended_at is not None:
                remaining = ended_at + DRAIN_SECONDS - now()
                if remaining <= 0 or not selector.get_map():
                    break
                timeout = min(timeout, remaining)
            if not selector.get_map():
                # Both pipes closed but the shell still runs: wait for it (the watchdog can
                # still stop it, the group stays attached).
                time.sleep(timeout)
                continue
            for key, _ in selector.select(timeout):
                name, decoder = streams[key.fd]
                try:
                    data = os.read(key.fd, READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(key.fd)
                    uploader.write(step_id, name, decoder.decode(b"", final=True))
                    continue
                uploader.write(step_id, name, decoder.decode(data))
    finally:
        for key in list(selector.get_map().values()):
            name, decoder = streams[key.fd]
            uploader.write(step_id, name, decoder.decode(b"", final=True))
        selector.close()
        process.stdout.close()
        process.stderr.close()
