"""``forge-ci worker``: RQ's worker, with a database scan around it so that Redis is never the
only copy of anything.

    loop:
      scan   settle repositories a crash left with open intents (under their locks),
             enqueue every confirmed event that nobody holds and no job is waiting for
      work   RQ jobs until idle for ``scan_interval`` s, or ``MAX_JOBS_BETWEEN_SCANS`` jobs
    beside it, in a thread: the lease sweeper (``forge_ci.coordinator.sweeper``) every 2 s,
    which ends attempts whose runner fell silent (``lost``) or ran out of time
    and in another: the scheduler (``forge_ci.runs.scheduler``), which creates the runs of
    ``on: schedule`` workflows once per matching UTC minute while the worker is up

A push whose enqueue failed (Redis down) is picked up by the next scan; a job that failed is
enqueued again by the scan after it (RQ keeps it as failed, not pending). Every process of a
pool scans, and the push enqueues too: ``JobQueue.enqueue_push_events`` is atomic, so an event
is queued once, and the event's claim (``forge_ci.pushes.events``) lets one work horse process
it. A work horse killed mid-job (kill -9, out of memory) leaves its claim; this worker gives it
back at once, so the next scan offers the event again.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from types import FrameType
from typing import Any

import redis
from rq import Worker
from rq.exceptions import StopRequested
from rq.job import Job
from sqlalchemy.exc import SQLAlchemyError

from forge_ci.coordinator.sweeper import Sweeper
from forge_ci.coordinator.wakeups import install_publisher
from forge_ci.db import Database
from forge_ci.errors import ForgeCIError, RepositoryBusy, Unavailable
from forge_ci.locks import repository_lock
from forge_ci.pushes.events import (
    claim_holder,
    offered_event_ids,
    release_claim,
    repositories_with_open_events,
    still_offered,
)
from forge_ci.pushes.settling import settle_repository
from forge_ci.queueing import PROCESS_PUSH_EVENT, PUSH_EVENTS_QUEUE, JobQueue
from forge_ci.runs.scheduler import Scheduler
from forge_ci.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_SCAN_INTERVAL = 30.0
MAX_JOBS_BETWEEN_SCANS = 100
#: The scan never waits long for a repository: a push holding the lock settles it anyway.
_SCAN_LOCK_TIMEOUT = 1.0


class _Worker(Worker):
    """RQ's forking worker, remembering a warm shutdown (SIGTERM/SIGINT) for the loop above it,
    and giving back the claim of a work horse that died mid-job."""

    stop_requested = False
    database: Database | None = None
    #: Set by the loop's own handlers: a signal that came before RQ installed its handlers.
    stopping: threading.Event | None = None

    def _install_signal_handlers(self) -> None:
        # A signal between the loop's last look at ``stopping`` and this point went to the
        # loop's handler, not RQ's: without this check RQ would block on Redis for the whole
        # idle time (the scan interval) before anyone looked again.
        super()._install_signal_handlers()  # type: ignore[no-untyped-call]
        if self.stopping is not None and self.stopping.is_set():
            self.handle_warm_shutdown_request()
            self._stop_requested = True

    def handle_warm_shutdown_request(self) -> None:
        self.stop_requested = True
        super().handle_warm_shutdown_request()  # type: ignore[no-untyped-call]

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
        if self.database is None or job.func_name != PROCESS_PUSH_EVENT or not job.args:
            return
        try:
            with self.database.session() as session:
                release_claim(session, int(job.args[0]), claim_holder(retpid))
        except SQLAlchemyError as exc:  # the claim runs out by itself
            log.warning("push event %s: could not release its claim: %s", job.args[0], exc)
        finally:
            self.database.dispose()  # the next work horse forks from this process


def scan(settings: Settings, database: Database, queue: JobQueue) -> list[int]:
    """Settle what crashes left behind, then enqueue every confirmed event; return those ids."""
    with database.session(read_only=True) as session:
        repository_ids = repositories_with_open_events(session)
    for repository_id in repository_ids:
        try:
            with repository_lock(
                settings.locks_dir, repository_id, f"#{repository_id}", _SCAN_LOCK_TIMEOUT
            ):
                with database.session() as session:
                    settle_repository(session, settings, repository_id)
        except RepositoryBusy:
            continue
        except ForgeCIError as exc:  # NeedsInspection above all: an operator must look
            log.error("repository #%s: %s", repository_id, exc.message)
    with database.session(read_only=True) as session:
        ids = offered_event_ids(session)
    if ids:
        queue.enqueue_push_events(ids, still_offered(database))
    return ids


def run(
    settings: Settings,
    *,
    burst: bool = False,
    scan_interval: float = DEFAULT_SCAN_INTERVAL,
    sweeper: bool = True,
) -> None:
    """Scan and work until SIGTERM/SIGINT; with ``burst``, one scan and the queue drained.

    ``sweeper``: run the lease sweeper too (one process of a pool does: worker/pool.py).
    """
    database = Database(settings)
    database.require_current_schema()
    queue = JobQueue(settings)
    stopping = threading.Event()
    # Jobs this process queues (a lost attempt's dependents) wake waiting claims at once.
    install_publisher(settings.redis_url)
    # Work horses get the job's code, loaded and configured, from their parent (fork).
    from worker.jobs import preload

    preload()

    sweeper_database = Database(settings)
    lease_sweeper = Sweeper(sweeper_database.session)
    scheduler_database = Database(settings)
    scheduler = Scheduler(scheduler_database.session, settings)
    if burst:
        lease_sweeper.run_once()
        scheduler.tick()
    elif sweeper:
        # One process of the pool sweeps leases and fires scheduled minutes (the scheduler's
        # database key keeps it exactly-once anyway, across hosts too).
        threading.Thread(
            target=lease_sweeper.run_forever, name="lease-sweeper", daemon=True
        ).start()
        threading.Thread(target=scheduler.run_forever, name="scheduler", daemon=True).start()

    worker_pid = os.getpid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != worker_pid:
            # RQ's scheduler is a fork of this process and inherits this handler until it
            # installs its own; a stop that soon must end it, or RQ waits for it for ever.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stopping.set()

    try:
        while not stopping.is_set():
            # RQ installs its own handlers while it works; these cover the scan in between.
            signal.signal(signal.SIGTERM, on_signal)
            signal.signal(signal.SIGINT, on_signal)
            if _scan_and_work(settings, database, queue, stopping, burst, scan_interval):
                break
    except StopRequested:
        # RQ's handler, still installed for a moment after RQ returns, raises this wherever
        # the signal lands: it means "stop" as much as ours does.
        stopping.set()
    finally:
        lease_sweeper.stop()
        scheduler.stop()
        queue.close()
        database.dispose()
        sweeper_database.dispose()
        scheduler_database.dispose()


def _scan_and_work(
    settings: Settings,
    database: Database,
    queue: JobQueue,
    stopping: threading.Event,
    burst: bool,
    scan_interval: float,
) -> bool:
    """One round of the loop: a scan, then RQ until idle; True when the worker should stop."""
    try:
        scan(settings, database, queue)
    except SQLAlchemyError as exc:
        if burst:
            raise Unavailable("the database is unavailable; try again later") from exc
        log.warning("scan skipped, database unavailable: %s", exc)
    finally:
        # RQ forks a work horse per job: leave it no pooled connection to share.
        database.dispose()
    if stopping.is_set():
        return True
    try:
        # The scheduler starts retries that jobs asked for (Retry in 30 s).
        worker = _Worker([PUSH_EVENTS_QUEUE], connection=queue.connection)
        worker.database = database
        worker.stopping = stopping
        worker.work(
            burst=burst,
            with_scheduler=True,
            max_jobs=MAX_JOBS_BETWEEN_SCANS,
            max_idle_time=max(1, math.ceil(scan_interval)),
            logging_level="INFO",
        )
    except (redis.RedisError, OSError) as exc:
        if burst:
            raise Unavailable(f"Redis is unavailable ({exc}); try again later") from exc
        log.warning("Redis unavailable, retrying in %.0f s: %s", scan_interval, exc)
        stopping.wait(scan_interval)
        return False
    return burst or worker.stop_requested
