"""``forge-ci provider run``: claim jobs for this provider and run each in a job container.

::

    start ──► lock the state dir ──► Docker answers? runner image present?
          ──► claims left by a previous run: assigned -> never started again (its container's
              fate is unknown; the server's lease ends it as lost); pending -> replayed first
          ──► remove this provider's leftover containers, then volumes (its label only)
          ──► N slots, each: persist a fresh claim ──► long-poll claims ──► run the assignment
              (worker.provider.execution) ──► forget the claim ──► claim again

    SIGTERM/SIGINT   stop claiming (waiting claims are abandoned and stay on disk for a replay),
                     interrupt running jobs (their runners report them cancelled), clean up, exit
    cleanup failed   stop claiming at once, say so on the log, let other slots finish, exit 1
    token refused    the server does not know this provider (or revoked it): exit 2

A slot never runs more than one container; ``--slots N`` runs up to N attempts at once.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

from forge_ci import states
from forge_ci.egress import EgressPolicy
from forge_ci.errors import ConfigurationError, ForgeCIError
from worker.provider.claims import (
    CLAIM_WAIT_SECONDS,
    ClaimClient,
    ClaimConflict,
    ClaimRefused,
    ProviderRefused,
    Stopped,
)
from worker.provider.containers import DockerDriver
from worker.provider.egress_audit import own_addresses
from worker.provider.execution import AttemptExecutor
from worker.provider.jobspec import NO_NETWORK, JobLimits
from worker.provider.socket_dirs import remove_socket_dir
from worker.provider.state import ClaimRecord, ProviderState
from worker.provider.upstream import Server

log = logging.getLogger(__name__)

#: Pause after a refused claim before the next one.
REFUSED_PAUSE_SECONDS = 5.0
MAX_SLOTS = 64


class ProviderFailed(ForgeCIError):
    """The provider stopped because it could not go on safely (cleanup failed, token refused)."""

    code = "provider_failed"


@dataclass(frozen=True)
class ProviderConfig:
    server: Server
    token: str
    state_dir: Path
    runner_image: str
    slots: int = 1
    egress_network: str | None = None
    #: What jobs may reach through the per-attempt proxy (the default: public addresses).
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    limits: JobLimits | None = None
    docker_url: str | None = None
    claim_wait: float = CLAIM_WAIT_SECONDS

    def __post_init__(self) -> None:
        if not 1 <= self.slots <= MAX_SLOTS:
            raise ConfigurationError(f"--slots must be between 1 and {MAX_SLOTS}")
        if self.egress_network is not None and self.egress.enabled:
            raise ConfigurationError(
                "--egress-network gives jobs a real network interface, where no egress policy"
                " applies; pass --egress none with it (or drop it: the proxy is the default)"
            )

    def __repr__(self) -> str:  # never show the token
        return f"ProviderConfig(server={self.server.origin!r}, slots={self.slots})"


class ProviderService:
    """One provider process: its state, its Docker engine and its slots."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.state = ProviderState(config.state_dir)
        self.claims = ClaimClient(
            config.server, config.token, config.claim_wait, config.egress.describe()
        )
        self.egress = config.egress
        self.provider_id = ""
        self._lock_fd: int | None = None
        self._replays: queue.SimpleQueue[ClaimRecord] = queue.SimpleQueue()
        #: No more claims (shutdown or a failure).
        self._no_claims = threading.Event()
        #: Running jobs are to be interrupted (shutdown).
        self._shutting_down = threading.Event()
        self._failure: str = ""
        self._failure_lock = threading.Lock()
        self.running: dict[int, int] = {}

    # -- start --------------------------------------------------------------------------------

    def _driver(self) -> DockerDriver:
        return DockerDriver(
            self.provider_id,
            runner_image=self.config.runner_image,
            base_url=self.config.docker_url,
            egress_network=self.config.egress_network,
            limits=self.config.limits,
        )

    def prepare(self) -> None:
        """Everything before the first claim; raises (and claims nothing) when unsafe."""
        self.state.prepare()
        self._lock_fd = self.state.lock()
        self.provider_id = self.state.provider_id()
        if self.egress.enabled:
            self.egress = self.egress.with_own_addresses(own_addresses(self.config.server))
        with self._driver() as driver:
            driver.ping()
            if not driver.image_exists():
                raise ConfigurationError(
                    f"runner image {self.config.runner_image!r} is not present in the Docker"
                    " engine; build it with deploy/build-runner-image (it is never pulled)"
                )
            uncertain = []
            for record in self.state.records():
                if record.attempt_id:
                    uncertain.append(record)
                else:
                    self._replays.put(record)
            for record in uncertain:
                log.warning(
                    "attempt %s was assigned before the provider stopped; its container's fate"
                    " is unknown, so it is not started again (the server ends it as lost when"
                    " its lease runs out)",
                    record.attempt_id,
                )
            leftovers = driver.remove_leftovers()
            if leftovers:
                log.warning(
                    "removed leftovers of this provider: containers %s, volumes %s",
                    ", ".join(leftovers.containers) or "none",
                    ", ".join(leftovers.volumes) or "none",
                )
        for directory in self.state.sockets_dir.iterdir():
            remove_socket_dir(directory)
        for record in uncertain:
            self.state.forget(record)
        log.info(
            "provider %s ready: server %s, image %s, %d slot(s), network %s, egress %s",
            self.provider_id,
            self.config.server.origin,
            self.config.runner_image,
            self.config.slots,
            self.config.egress_network or NO_NETWORK,
            self.egress.describe(),
        )

    # -- running ------------------------------------------------------------------------------

    def run(self) -> None:
        """Claim and run until :meth:`stop`; raises ProviderFailed after a failure."""
        threads = [
            threading.Thread(target=self._slot, args=(number,), name=f"slot-{number}")
            for number in range(1, self.config.slots + 1)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.close()
        if self._failure:
            raise ProviderFailed(self._failure)

    def close(self) -> None:
        """Let go of the state directory (``run`` does this when it ends)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def stop(self) -> None:
        """Stop claiming and interrupt running jobs (a signal handler may call this)."""
        self._shutting_down.set()
        self._no_claims.set()
        self.claims.stop()

    def _fail(self, message: str) -> None:
        with self._failure_lock:
            if not self._failure:
                self._failure = message
        log.error("%s", message)
        self._no_claims.set()
        self.claims.stop()

    def _next_record(self) -> ClaimRecord:
        try:
            record = self._replays.get_nowait()
        except queue.Empty:
            record = ClaimRecord.fresh()
            self.state.save(record)
            return record
        log.info("replaying claim %s from before the restart", record.request_id)
        return record

    def _slot(self, number: int) -> None:
        driver = self._driver()
        executor = AttemptExecutor(
            driver,
            self.config.server,
            self.state.sockets_dir,
            network=self.config.egress_network or NO_NETWORK,
            egress=self.egress,
            provider_token=self.config.token,
            interrupted=self._shutting_down.is_set,
        )
        try:
            while not self._no_claims.is_set():
                self._claim_and_run(number, executor)
        except Exception as exc:
            # A bug or an unexpected engine state: never claim on with it unexplained.
            log.exception("slot %d failed", number)
            self._fail(f"slot {number} failed: {exc}; no more claims")
        finally:
            driver.close()

    def _claim_and_run(self, number: int, executor: AttemptExecutor) -> None:
        record = self._next_record()
        try:
            assignment = self.claims.claim(record)
        except Stopped:
            return  # the record stays on disk: a restart replays it
        except ProviderRefused as exc:
            self._fail(f"the server refused the provider token ({exc.message}); stopping")
            return
        except ClaimConflict as exc:
            log.warning("claim %s cannot be used again: %s", record.request_id, exc.message)
            self.state.forget(record)
            return
        except ClaimRefused as exc:
            log.error("claim refused: %s; trying again in %.0f s", exc, REFUSED_PAUSE_SECONDS)
            self.state.forget(record)
            self._no_claims.wait(REFUSED_PAUSE_SECONDS)
            return
        if assignment is None:
            self.state.forget(record)
            return
        attempt_id = assignment.attempt_id
        if assignment.state != states.LEASED:
            # A replay answered with an attempt that a runner already started: this provider
            # lost track of its container, and a job is never started twice.
            log.error(
                "attempt %s is already %s; not starting it again", attempt_id, assignment.state
            )
            self.state.forget(record)
            return
        self.state.save(record.assigned(attempt_id))
        log.info(
            "slot %d: attempt %s of job %s (run %s) claimed",
            number,
            attempt_id,
            assignment.job_key,
            assignment.run_number,
        )
        self.running[number] = attempt_id
        try:
            outcome = executor.run(assignment, record.attempt_token)
        finally:
            self.running.pop(number, None)
        log.info("attempt %s: %s", attempt_id, outcome.summary())
        if outcome.cleanup_error:
            # The record stays: a restart removes the leftovers and never reruns the attempt.
            self._fail(
                f"CLEANUP FAILED for attempt {attempt_id}: {outcome.cleanup_error}. This"
                " provider claims no more jobs; remove the leftovers (or restart the provider,"
                " which removes its own) and look at the Docker engine"
            )
            return
        self.state.forget(record)
