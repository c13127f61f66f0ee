"""Processes of the job: hardening the runner itself, step process groups, the final sweep.

The runner makes itself non-dumpable (``PR_SET_DUMPABLE`` 0: no core dumps, no ptrace by the
steps, which run as the same user, and ``/proc/<runner>/environ``, ``mem`` and ``fd`` become
unreadable to them), sets ``no_new_privs`` and becomes a *child subreaper*: a step's process
that detaches (double fork, ``setsid``) is re-parented to the runner instead of escaping, so
the sweep at the end of the job finds and kills it. In the job container the runner is PID 1,
where that holds anyway.

Each step runs in a new session and process group; stopping a step signals the whole group
(SIGTERM, then SIGKILL after a short grace). Background processes of a successful step may live
on into later steps; the sweep at job end kills every descendant. Zombies of re-parented
processes are reaped between steps.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
#: Between SIGTERM and SIGKILL of a stopped step.
KILL_GRACE = 2.0


class HardeningError(Exception):
    """The runner could not protect itself; it refuses to run anything."""


def harden() -> None:
    """Non-dumpable, no new privileges, child subreaper; HardeningError if any fails."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError) as exc:
        raise HardeningError(f"prctl is not available: {exc}") from None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    for option, value, what in (
        (PR_SET_DUMPABLE, 0, "make the runner non-dumpable"),
        (PR_SET_NO_NEW_PRIVS, 1, "set no_new_privs"),
        (PR_SET_CHILD_SUBREAPER, 1, "become a child subreaper"),
    ):
        if prctl(option, value, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise HardeningError(f"cannot {what}: {os.strerror(error)}")
    if prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise HardeningError("the runner is still dumpable after PR_SET_DUMPABLE")


class ProcessGroup:
    """A step's shell, leader of its own session and process group.

    The main thread polls the shell and the watchdog thread signals the group; both go through
    one lock, so the group is never signalled after its leader was reaped and its number could
    have been reused (escalation to SIGKILL is the one exception: by then a stop was asked for,
    and any member still alive keeps the group's number from being reused).
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._lock = threading.Lock()
        self._exited = False
        self._terminated_at: float | None = None
        self._killed = False

    @property
    def pgid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        with self._lock:
            code = self.process.poll()
            if code is not None:
                self._exited = True
            return code

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self, at: float) -> None:
        """Ask the whole group to stop (SIGTERM); :meth:`escalate` follows up."""
        with self._lock:
            if self._terminated_at is not None:
                return
            self._terminated_at = at
            if not self._exited:
                self._signal(signal.SIGTERM)

    def escalate(self, at: float) -> None:
        """SIGKILL the group once the grace after :meth:`terminate` has passed."""
        with self._lock:
            if self._terminated_at is None or self._killed:
                return
            if at - self._terminated_at >= KILL_GRACE:
                self._killed = True
                self._signal(signal.SIGKILL)

    @property
    def terminated(self) -> bool:
        return self._terminated_at is not None

    def kill_now(self) -> None:
        """SIGKILL what is left of a group that was asked to stop (after its leader ended)."""
        with self._lock:
            if self._terminated_at is not None and not self._killed:
                self._killed = True
                self._signal(signal.SIGKILL)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # pid (comm) state ppid ...; comm may contain spaces and parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _parent_of(int(name)) == pid:
            found.append(int(name))
    return found


def reap() -> None:
    """Collect exited children without waiting (re-parented processes become ours)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants(timeout: float = 5.0) -> list[int]:
    """SIGKILL every descendant (they are re-parented to us as their parents die); reap them.

    Returns the pids that were killed. Called at job end, when no step runs.
    """
    me = os.getpid()
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap()
        found = children(me)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    reap()
    return killed
