"""The watchdog: one thread that decides, on the runner's monotonic clock, when work must stop.

It never does I/O, so a hung request cannot delay it. Every answer of the server is folded in
(:meth:`Watchdog.observe`) and turned into local deadlines, conservatively: a duration the
server states is counted from when the request was *sent*::

    job deadline   sent + (job_deadline_ms - server_time_ms), minus 2 s so that the report
                   still arrives before the server's own deadline          -> timed_out
    lease          sent + (lease_deadline_ms - server_time_ms), minus a margin of a quarter
                   of the lease (at least 0.5 s, at most 10 s); a lease that lasts until the
                   job deadline is not a separate clock                    -> lost
    cancellation   cancel_requested in any answer                          -> cancelled
    ended          the attempt is completed on the server                  -> ended
    step timeout   the running step's own limit (never past the job's)     -> that step only

The first reason to stop the job wins and is kept. The running step's process group is asked
to stop (SIGTERM) at once and killed (SIGKILL) after a short grace.

Clean-up after a stop, as GitHub's runner does: once an action with a ``post`` script ran its
main, or when a step's ``if`` names ``always()`` or ``cancelled()``, the job deadline is brought
forward by :data:`POST_GRACE` (:meth:`Watchdog.reserve`), and after a cancellation or the job's
time limit the steps left whose condition holds under ``cancelled()`` run in one window of at
most ``POST_GRACE`` seconds (:meth:`Watchdog.begin_cleanup`, never past the job deadline);
while it lasts the stop no longer kills new step processes, only the window's end does. A stop
whose result the server no longer takes (lost, ended, refused) ends the window at once::

    cancel / time limit ──► the running step is stopped ──► each later step: if: always() /
      cancelled() runs, the others are skipped ──► post steps (post-if sees cancelled())
      ──► complete (whatever the window's end left is not run)
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from forge_ci.protocol import AttemptStatus
from worker.runner.clock import now
from worker.runner.processes import ProcessGroup

TICK = 0.05
JOB_DEADLINE_MARGIN = 2.0
MIN_LEASE_MARGIN = 0.5
MAX_LEASE_MARGIN = 10.0
#: Heartbeats go out this often, or four times per lease when the lease is shorter.
HEARTBEAT_SECONDS = 5.0
#: At most this long for post steps after a cancellation or the job's time limit. The server's
#: cancellation grace (forge_ci.coordinator.leases.CANCEL_GRACE, 30 s) covers a heartbeat to
#: notice it (5 s), the step's SIGTERM grace (2 s), this window and the final log and
#: completion (3 s + 3 s).
POST_GRACE = 10.0
#: Stops after which clean-up still reports (the server takes the results).
CLEANUP_KINDS = frozenset({"cancelled", "timed_out"})
#: Stops after which the server takes nothing any more.
ABANDON_KINDS = frozenset({"lost", "ended", "refused"})

#: Reasons to stop the job, and the conclusion the runner reports for each (None: it does not
#: report, the server decides or already decided).
STOP_CONCLUSIONS = {
    "cancelled": "cancelled",
    "interrupted": "cancelled",
    "timed_out": "timed_out",
    "lost": None,
    "ended": None,
    "refused": None,
}


@dataclass(frozen=True)
class Stop:
    """Why the job stops: a kind (a key of STOP_CONCLUSIONS) and a message for people."""

    kind: str
    message: str


class Watchdog:
    """Deadlines, the lease, the stop decision and the running step's process group."""

    def __init__(self, timeout_minutes: int) -> None:
        self.timeout_minutes = timeout_minutes
        self._lock = threading.Lock()
        self._stop: Stop | None = None
        self.stopped = threading.Event()
        self._job_deadline = math.inf
        self._lease_expiry = math.inf
        self._lease_seconds = 0.0
        self._lease_capped = False
        self._group: ProcessGroup | None = None
        self._step_deadline = math.inf
        self._step_timed_out = False
        self._reserve = 0.0
        self._cleanup_until = -math.inf
        self._abandoned = False
        #: The newest answer of the server (by its clock).
        self.last_status: AttemptStatus | None = None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)

    # -- what the server said -------------------------------------------------------------------

    def observe(self, status: AttemptStatus, sent_at: float) -> None:
        """Fold in an answer to a request sent at ``sent_at`` (clock time)."""
        server = status.server_time_ms
        with self._lock:
            if self.last_status is None or server >= self.last_status.server_time_ms:
                self.last_status = status
            if status.job_deadline_ms:
                deadline = sent_at + (status.job_deadline_ms - server) / 1000
                self._job_deadline = min(self._job_deadline, deadline)
            if status.lease_deadline_ms and status.state != "completed":
                seconds = (status.lease_deadline_ms - server) / 1000
                self._lease_seconds = max(self._lease_seconds, seconds)
                expiry = sent_at + seconds
                self._lease_expiry = (
                    expiry if math.isinf(self._lease_expiry) else max(self._lease_expiry, expiry)
                )
                self._lease_capped = bool(
                    status.job_deadline_ms and status.lease_deadline_ms >= status.job_deadline_ms
                )
        if status.state == "completed":
            self.request_stop(
                "ended", f"the server ended the attempt ({status.conclusion or 'completed'})"
            )
        elif status.cancel_requested:
            self.request_stop("cancelled", f"cancelled: {status.cancel_reason or 'by request'}")

    def lease_margin(self) -> float:
        return min(MAX_LEASE_MARGIN, max(MIN_LEASE_MARGIN, self._lease_seconds / 4))

    def heartbeat_interval(self) -> float:
        if self._lease_seconds <= 0:
            return HEARTBEAT_SECONDS
        return min(HEARTBEAT_SECONDS, max(0.2, self._lease_seconds / 4))

    def safe_until(self) -> float:
        """Clock time until which the lease is surely held (for retry deadlines)."""
        with self._lock:
            if self._lease_capped:
                return self._job_deadline
            return self._lease_expiry - self.lease_margin()

    # -- the stop decision ----------------------------------------------------------------------

    def request_stop(self, kind: str, message: str) -> None:
        """Stop the job for ``kind``; the first reason is kept."""
        assert kind in STOP_CONCLUSIONS, kind
        with self._lock:
            if kind in ABANDON_KINDS:
                self._abandoned = True
                self._cleanup_until = -math.inf
            if self._stop is None:
                self._stop = Stop(kind, message)
                self.stopped.set()

    @property
    def stop(self) -> Stop | None:
        return self._stop

    def lost(self) -> bool:
        """True once the lease can no longer be trusted (nothing should be retried then)."""
        return self._abandoned

    # -- clean-up after a stop ------------------------------------------------------------------

    def reserve(self, seconds: float) -> None:
        """Stop for the job's time limit ``seconds`` early, so that clean-up fits before it."""
        with self._lock:
            self._reserve = max(self._reserve, seconds)

    def begin_cleanup(self, seconds: float) -> float:
        """Open the clean-up window (see the module doc); the clock time it ends (in the past
        when the stop allows none)."""
        with self._lock:
            stop = self._stop
            if stop is None or stop.kind not in CLEANUP_KINDS or self._abandoned:
                return -math.inf
            until = min(now() + seconds, self._job_deadline - JOB_DEADLINE_MARGIN)
            self._cleanup_until = until
            return until

    def cleaning(self, at: float | None = None) -> bool:
        """True while the clean-up window is open."""
        return (now() if at is None else at) < self._cleanup_until

    def halted(self) -> bool:
        """The job is stopped and no clean-up window is open: nothing more may run."""
        return self.stopped.is_set() and not self.cleaning()

    # -- the running step -----------------------------------------------------------------------

    def begin_step(self, deadline: float) -> None:
        with self._lock:
            self._step_deadline = deadline
            self._step_timed_out = False

    def attach(self, group: ProcessGroup) -> None:
        with self._lock:
            self._group = group
        if self.halted():
            group.terminate(now())

    def detach(self) -> None:
        with self._lock:
            self._group = None

    def end_step(self) -> bool:
        """Forget the step; True when it ran out of time."""
        with self._lock:
            timed_out = self._step_timed_out
            self._group = None
            self._step_deadline = math.inf
            self._step_timed_out = False
            return timed_out

    def step_expired(self) -> bool:
        return self._step_timed_out or self.halted()

    # -- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._finished.set()
        self._thread.join(timeout=5)

    def check(self, at: float) -> None:
        """One tick (the thread calls it; tests may too)."""
        with self._lock:
            job_due = at >= self._job_deadline - JOB_DEADLINE_MARGIN - self._reserve
            lease_due = not self._lease_capped and at >= self._lease_expiry - self.lease_margin()
            if at >= self._step_deadline and not self._step_timed_out:
                self._step_timed_out = True
            group = self._group
            step_stop = self._step_timed_out
        if job_due:
            self.request_stop(
                "timed_out",
                f"the job reached its time limit (timeout-minutes: {self.timeout_minutes})",
            )
        elif lease_due:
            self.request_stop(
                "lost",
                "the lease could not be renewed in time (no answer from the runner API); "
                "stopping everything",
            )
        if group is not None:
            if step_stop or (self.stopped.is_set() and not self.cleaning(at)):
                group.terminate(at)
            group.escalate(at)

    def _run(self) -> None:
        while not self._finished.wait(TICK):
            self.check(now())
