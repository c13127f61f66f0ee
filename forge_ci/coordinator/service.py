"""The runner API's use cases as one object a front door holds: one transaction per request.

Each attempt request: ``begin_write`` -> authenticate the attempt credential (row lock) ->
reconcile -> the operation inside a savepoint -> commit. When the operation is refused, the
savepoint is rolled back but the reconciliation is still committed (a lease that ran out stays
run out) and the refusal carries the attempt's status, so the runner learns why to stop.

Claims may wait (long poll) for at most ``settings.claim_wait_seconds`` (the request can ask
for less). At most ``max_waiting`` claims wait at once per process; beyond that a claim answers
at once, so waiting claims never occupy every worker thread.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from forge_ci.coordinator import (
    action_sources,
    attempts,
    bundles,
    claims,
    egress,
    logs,
    secrets,
    sources,
    steps,
)
from forge_ci.coordinator.contexts import with_server_url
from forge_ci.coordinator.credentials import token_hash
from forge_ci.coordinator.errors import CancelRequested, LogLimitReached, SourceRefused
from forge_ci.coordinator.wakeups import WakeupListener, queue_signature
from forge_ci.db import SessionScope, begin_write
from forge_ci.errors import ForgeCIError, PermissionDenied
from forge_ci.models import Attempt, utcnow
from forge_ci.protocol import (
    Assignment,
    AttemptStatus,
    ClaimRequest,
    CompleteRequest,
    EgressRequest,
    HeartbeatRequest,
    LogRequest,
    SecretsRequest,
    SourceRequest,
    StartRequest,
    StepRequest,
)
from forge_ci.settings import Settings

T = TypeVar("T")
#: Claims that may wait at once per process: half of the web server's default 16 threads per
#: worker, so the other half always serves heartbeats, logs and browsers.
MAX_WAITING_CLAIMS = 8
#: A waiting claim tries again at least this often even without any sign of new work (a
#: provider resumed, labels or permissions changed).
FULL_RETRY_SECONDS = 5.0


class AttemptRefused(Exception):
    """A refused attempt request, with the attempt's status after reconciliation."""

    def __init__(self, error: ForgeCIError, status: AttemptStatus) -> None:
        super().__init__(error.message)
        self.error = error
        self.status = status


@dataclass(frozen=True)
class ClaimResult:
    assignment: Assignment | None
    server_time: datetime


class Coordinator:
    """The runner protocol for one process: sessions, settings, wake-ups, secret source."""

    def __init__(
        self,
        sessions: SessionScope,
        settings: Settings,
        *,
        wakeups: WakeupListener | None = None,
        secret_source: secrets.SecretSource | None = None,
        max_waiting: int = MAX_WAITING_CLAIMS,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.wakeups = wakeups or WakeupListener(None)
        self.secret_source = secret_source or secrets.StoreSecrets(settings.sealing_key_path)
        self.clock = clock
        self.lease = timedelta(seconds=settings.lease_seconds)
        self.job_minute = timedelta(seconds=settings.job_minute_seconds)
        self._waiting = threading.BoundedSemaphore(max_waiting)
        self._draining = threading.Event()

    def drain(self) -> None:
        """Stop holding claims: waiting ones answer "no work" now, new ones do not wait.

        Called when the serving process is told to stop, so that its graceful shutdown does
        not wait out every provider's long poll (the providers simply claim again, elsewhere
        or after the restart). Safe to call from any thread, more than once.
        """
        self._draining.set()
        self.wakeups.notify()

    # -- claims --------------------------------------------------------------------------------

    def claim(
        self,
        token: str | None,
        request: ClaimRequest,
        connected: Callable[[], bool] = lambda: True,
    ) -> ClaimResult:
        """Claim work, waiting up to the allowed time for some to be queued.

        ``connected`` tells whether the provider is still there (the front door checks its
        connection): a waiting claim whose provider went away stops before it takes a job.
        """
        limit = self.settings.claim_wait_seconds
        wait = limit if request.wait_seconds is None else min(request.wait_seconds, limit)
        assignment = self._claim(token, request)
        if assignment is not None or wait <= 0 or self._draining.is_set():
            return ClaimResult(assignment, self.clock())
        if not self._waiting.acquire(blocking=False):
            return ClaimResult(None, self.clock())
        try:
            found = self._wait_and_claim(token, request, wait, connected)
            return ClaimResult(found, self.clock())
        finally:
            self._waiting.release()

    def _claim(self, token: str | None, request: ClaimRequest) -> Assignment | None:
        assignment = claims.claim(
            self.sessions,
            token,
            request,
            self.secret_source,
            self.clock,
            lock_dir=self.settings.locks_dir,
            lease=self.lease,
            engine=self._engine,
        )
        return with_server_url(assignment, self.settings.public_url)

    @functools.cached_property
    def _engine(self) -> Engine:
        return claims.bound_engine(self.sessions)

    def _signature(self) -> object:
        with self.sessions(read_only=True) as session:
            signature = queue_signature(session)
            session.rollback()
            return signature

    def _wait_and_claim(
        self, token: str | None, request: ClaimRequest, wait: float, connected: Callable[[], bool]
    ) -> Assignment | None:
        deadline = time.monotonic() + wait
        self.wakeups.start()  # the subscriber thread starts with the first waiting claim
        while True:
            mark = self.wakeups.generation()
            signature = self._signature()
            last_try = time.monotonic()
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._draining.is_set() or not connected():
                    return None
                if self.wakeups.wait(mark, min(self.wakeups.poll_interval, remaining)):
                    break
                if self._signature() != signature:
                    break
                if time.monotonic() - last_try >= FULL_RETRY_SECONDS:
                    break
            if not connected():
                return None  # nobody would hear the answer: leave the work to others
            assignment = self._claim(token, request)
            if assignment is not None:
                return assignment

    # -- attempt requests ----------------------------------------------------------------------

    def _attempt_request(
        self,
        token: str | None,
        attempt_id: int,
        operation: Callable[[Session, Attempt, datetime], T],
        *,
        job_token: bool = False,
    ) -> tuple[T, AttemptStatus]:
        """Run ``operation`` on the authenticated attempt; ``job_token``: it may also be
        authenticated by its job token (the source endpoint only)."""
        with self.sessions() as session:
            begin_write(session)
            found = (
                attempts.authenticate_job_token(session, token, attempt_id) if job_token else None
            )
            attempt = found or attempts.authenticate_attempt(session, token, attempt_id)
            now = self.clock()
            attempts.reconcile(session, attempt, now)
            try:
                with session.begin_nested():
                    result = operation(session, attempt, now)
            except ForgeCIError as error:
                session.refresh(attempt)
                status = attempts.status_of(attempt, now)
                session.commit()
                raise AttemptRefused(error, status) from None
            status = attempts.status_of(attempt, now)
            session.commit()
            return result, status

    def egress(self, token: str | None, attempt_id: int, request: EgressRequest) -> int:
        """A provider's egress records for one of its attempts (:mod:`.egress`)."""
        with self.sessions() as session:
            stored = egress.record_egress(session, token, attempt_id, request)
            session.commit()
            return stored

    def start(self, token: str | None, attempt_id: int, request: StartRequest) -> AttemptStatus:
        def operation(session: Session, attempt: Attempt, now: datetime) -> None:
            attempts.start(session, attempt, request, now, self.lease, self.job_minute)

        return self._attempt_request(token, attempt_id, operation)[1]

    def heartbeat(
        self, token: str | None, attempt_id: int, request: HeartbeatRequest
    ) -> AttemptStatus:
        def operation(session: Session, attempt: Attempt, now: datetime) -> None:
            attempts.heartbeat(session, attempt, request, now, self.lease)

        return self._attempt_request(token, attempt_id, operation)[1]

    def source(
        self, token: str | None, attempt_id: int, request: SourceRequest
    ) -> tuple[sources.SourceArchive, AttemptStatus]:
        """The pinned commit as a ``tar`` for a running attempt (see :mod:`.sources`).

        The checks run in the attempt's transaction; ``git archive`` runs after it has ended,
        so a slow archive never holds the attempt's lock. The caller closes the archive.
        """
        directory = self.settings.repositories_dir

        def operation(
            session: Session, attempt: Attempt, now: datetime
        ) -> sources.SourceTarget | str:
            by_job_token = token is not None and attempt.job_token_hash == token_hash(token)
            return sources.locate_source(
                session, directory, attempt, request, now, job_token=by_job_token
            )

        target, status = self._attempt_request(token, attempt_id, operation, job_token=True)
        return _archive(target, status, sources.build_archive)

    def action_source(
        self, token: str | None, attempt_id: int, index: int, request: SourceRequest
    ) -> tuple[sources.SourceArchive, AttemptStatus]:
        """The tree of the run's ``index``-th action as a ``tar`` (:mod:`.action_sources`)."""
        settings = self.settings

        def operation(
            session: Session, attempt: Attempt, now: datetime
        ) -> action_sources.ActionTarget | str:
            return action_sources.locate_action(session, settings, attempt, request, index, now)

        target, status = self._attempt_request(token, attempt_id, operation)
        return _archive(target, status, action_sources.build_action_archive)

    def source_bundle(
        self, token: str | None, attempt_id: int, request: SourceRequest
    ) -> tuple[sources.SourceArchive, AttemptStatus]:
        """The checkout step's commit and history as a ``git bundle`` (see :mod:`.bundles`).

        Checked like :meth:`source`, in the attempt's transaction; the bundle is made after it.
        """
        directory = self.settings.repositories_dir

        def operation(
            session: Session, attempt: Attempt, now: datetime
        ) -> bundles.BundleTarget | str:
            return bundles.locate_bundle(session, directory, attempt, request, now)

        target, status = self._attempt_request(token, attempt_id, operation)
        return _archive(target, status, bundles.build_bundle)

    def secrets(
        self, token: str, attempt_id: int, request: SecretsRequest
    ) -> tuple[dict[str, str], AttemptStatus]:
        """One running step's secret env values (see :mod:`forge_ci.coordinator.secrets`)."""

        def operation(session: Session, attempt: Attempt, now: datetime) -> dict[str, str] | str:
            delivered = secrets.deliver(session, self.secret_source, attempt, token, request, now)
            if not isinstance(delivered, str):
                # The mask stored when the server ends a stream without the credential must
                # be one that no issued value contains. Cached by the values themselves, not
                # under the attempt's key: this transaction may still fail to commit.
                values = [token, *secrets.issued_values(session, attempt, token)]
                attempt.log_mask = logs.MASKERS.get(values).mask
            return delivered

        delivered, status = self._attempt_request(token, attempt_id, operation)
        if isinstance(delivered, str):
            raise AttemptRefused(PermissionDenied(f"cancelled: {delivered}"), status)
        return delivered, status

    def step(self, token: str | None, attempt_id: int, request: StepRequest) -> AttemptStatus:
        def operation(session: Session, attempt: Attempt, now: datetime) -> None:
            attempts.require_execution(attempt, request.execution_id)
            mask = None
            if token is not None and (request.annotations or request.summary):
                mask = logs.attempt_masker(session, attempt, token).mask_text
            steps.report_step(session, attempt, request, now, mask)

        return self._attempt_request(token, attempt_id, operation)[1]

    def log(self, token: str, attempt_id: int, request: LogRequest) -> AttemptStatus:
        cap = self.settings.log_cap_bytes

        def operation(session: Session, attempt: Attempt, now: datetime) -> logs.LogAck:
            return logs.append_log(session, attempt, token, request, now, cap)

        ack, status = self._attempt_request(token, attempt_id, operation)
        if not ack.accepted:
            raise AttemptRefused(LogLimitReached(ack.message), status)
        return status

    def complete(self, token: str, attempt_id: int, request: CompleteRequest) -> AttemptStatus:
        def operation(session: Session, attempt: Attempt, now: datetime) -> None:
            masker = logs.attempt_masker(session, attempt, token) if request.outputs else None
            masked = {
                name: masker.mask_text(value) if masker is not None else value
                for name, value in request.outputs.items()
            }
            attempts.complete(session, attempt, request, now, token=token, masked_outputs=masked)

        return self._attempt_request(token, attempt_id, operation)[1]


def _archive(
    target: T | str,
    status: AttemptStatus,
    build: Callable[[T], sources.SourceArchive],
) -> tuple[sources.SourceArchive, AttemptStatus]:
    """Build the archive of a located ``target``; a refusal text means the attempt was cancelled."""
    if isinstance(target, str):
        raise AttemptRefused(CancelRequested(f"cancelled: {target}"), status)
    try:
        return build(target), status
    except SourceRefused as error:
        raise AttemptRefused(error, status) from None
