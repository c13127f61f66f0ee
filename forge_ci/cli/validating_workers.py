"""Checking many workflow files at once in forked worker processes, as actionlint does.

A file is checked in about 2 ms of pure Python, so a whole repository's or a corpus's files are
bound by one core; :func:`check_in_workers` spreads them over the processors this process may
use. The result is the one the serial loop gives, in the same order: each worker takes every
N-th file, sends back ``(index, result or unreadable message)`` pairs (marshalled through a
pipe), and the caller merges them by index and prints as before. Nothing else changes: workers
never write to stdout or stderr, and whenever anything about them goes wrong (a worker crashed,
was killed, or raised, say on an unexpected bug) the caller is told to check every file serially,
which then prints, fails or raises exactly as it always did.

Workers are used only where forking is safe and worth it: on a platform with ``fork``, in a
process with no other thread, for at least :data:`FILES_PER_WORKER` files a worker.
``FORGE_CI_VALIDATE_WORKERS`` sets the number (``1`` checks serially, in this process; still at
most :data:`MAX_WORKERS` and one per :data:`FILES_PER_WORKER` files). A worker that cannot be
started (no descriptor or process left) or a bug in this process's own share also means the
serial check; workers die with the command (Linux's parent-death signal).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

#: Fewer files than this a worker are not worth a fork (about a millisecond each).
FILES_PER_WORKER = 16
#: At most this many processes, however many processors there are.
MAX_WORKERS = 8
WORKERS_VAR = "FORGE_CI_VALIDATE_WORKERS"
_SIGINT = {signal.SIGINT}

#: One file's outcome: its result dict, or the stderr line saying why it cannot be read.
Outcome = tuple[int, str | None, dict[str, Any] | None]
#: ``check_one(index) -> Outcome``.
CheckOne = Callable[[int], Outcome]


def worker_count(files: int) -> int:
    """How many processes (this one included) should check ``files`` files."""
    try:
        wanted = int(os.environ.get(WORKERS_VAR, "").strip(), 10)
    except ValueError:  # unset, or not a number ("²" is a digit, not a number)
        wanted = 0
    if wanted < 1:
        try:
            wanted = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            wanted = os.cpu_count() or 1
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    return max(1, min(wanted, MAX_WORKERS, files // FILES_PER_WORKER))


def check_in_workers(count: int, workers: int, check_one: CheckOne) -> list[Outcome] | None:
    """Every file's outcome in index order, or ``None``: then check them serially instead.

    This process forks ``workers - 1`` children, checks its own share, then collects theirs.
    """
    for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
        if stream is not None:  # a closed stream: the serial check reports it as before
            stream.flush()
    #: Children not waited for yet, and the pipe each sends its outcomes through.
    pending: dict[int, int] = {}
    outcomes: list[Outcome] | None
    parent = os.getpid()
    # A worker keeps what the caller does with Ctrl-C: ignored (a background job) or not.
    keep_sigint = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    try:
        for share in range(1, workers):
            try:
                reader, writer = os.pipe()
            except OSError:  # out of descriptors: check serially (the finally stops the rest)
                return None
            # Ctrl-C is held back while forking: a child must never run the caller's handlers.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
            try:
                pid = os.fork()
                if pid == 0:  # pragma: no cover - a child ends in os._exit, unseen by coverage
                    os.close(reader)
                    shares = range(share, count, workers)
                    _child(writer, shares, check_one, mask, parent, keep_sigint)
                pending[pid] = reader
            except OSError:  # no process left (EAGAIN): check serially
                os.close(reader)
                return None
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                os.close(writer)
        try:
            outcomes = [check_one(index) for index in range(0, count, workers)]
        except Exception:  # noqa: BLE001 - a bug: the serial check raises it in file order
            return None
        for pid in list(pending):
            received = _collect(pid, pending)
            if received is None:
                outcomes = None
            elif outcomes is not None:
                outcomes.extend(received)
    finally:
        _stop(pending)
    if outcomes is None or len(outcomes) != count:
        return None
    outcomes.sort(key=lambda outcome: outcome[0])
    return outcomes


def _child(
    writer: int,
    indexes: range,
    check_one: CheckOne,
    mask: set[int | signal.Signals],
    parent: int,
    keep_sigint: bool,
) -> None:  # pragma: no cover
    """Check a share and send it; never returns, never writes to stdout or stderr."""
    try:
        _die_with(parent)
        # Ctrl-C reaches the whole process group: a worker just stops, the caller reports it.
        signal.signal(signal.SIGINT, signal.SIG_IGN if keep_sigint else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        payload = marshal.dumps([check_one(index) for index in indexes])
        view = memoryview(payload)
        while view:
            view = view[os.write(writer, view) :]
        status = 0
    except BaseException:  # noqa: BLE001 - any failure: the caller checks serially
        status = 1
    finally:
        os._exit(status)


def _die_with(parent: int) -> None:  # pragma: no cover - runs in a worker
    """End this worker when the command does (killed, or stopped by ``timeout``), instead of
    checking its whole share for nobody: Linux's parent-death signal, then one look in case
    the command was gone before it was set."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the closed pipe ends it at its first write
        return
    if os.getppid() != parent:
        os._exit(1)


def _collect(pid: int, pending: dict[int, int]) -> list[Outcome] | None:
    """A child's outcomes, or ``None`` when it did not finish cleanly."""
    reader = pending[pid]
    chunks = []
    while chunk := os.read(reader, 1 << 16):
        chunks.append(chunk)
    # The child closed its end, so it is exiting. A reaped pid may be reused at once, so it
    # leaves ``pending`` (which _stop kills) with no Ctrl-C in between.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    try:
        _, status = os.waitpid(pid, 0)
        del pending[pid]
        os.close(reader)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    try:
        received: list[Outcome] = marshal.loads(b"".join(chunks))
    except (EOFError, ValueError, TypeError):
        return None
    return received


def _stop(pending: dict[int, int]) -> None:
    """After an interruption: stop the children not waited for yet (their pids are still
    theirs, unreaped) and wait for them."""
    for pid, reader in pending.items():
        os.close(reader)
        # An unreaped child is never gone, nor already waited for: neither error is expected.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    pending.clear()
