"""Running one assignment: its socket, relay, workspace and container, and their removal.

::

    socket dir + relay (+ egress proxy) ──► workspace volume
      ──► container forge-ci-job-<provider>-<attempt>
      (stdin: credential and assignment, then EOF) ──► follow stdout/stderr into the log
      ──► wait (job limit + margin; SIGTERM when the provider stops, SIGKILL after a grace)
      ──► remove the container ──► close the relay and the proxy (its last records go to the
      server's audit) ──► remove the socket dir ──► the volume

Removal runs after every outcome, including a failed start. Whatever the container did, the
provider never runs the assignment again: the runner reports to the server itself, and an
attempt whose runner fell silent is ended as ``lost`` by the server's lease. The runner's stdout
is its JSON report (``worker.runner.report``); it and the runner's stderr go to the provider's
log, one line each, prefixed with the attempt.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from forge_ci import protocol, states
from forge_ci.egress import EgressPolicy
from forge_ci.errors import ForgeCIError, Unavailable
from forge_ci.protocol import (
    API_PREFIX,
    MAX_BODY_BYTES,
    RUNNER_API_SOCKET,
    RUNNER_EGRESS_SOCKET,
    RUNNER_WORKSPACE,
    Assignment,
    CompleteRequest,
    RunnerInput,
    request_body,
)
from worker.provider.containers import DockerDriver
from worker.provider.egress import EgressProxy
from worker.provider.egress_audit import EgressAudit
from worker.provider.jobspec import NO_NETWORK, JobContainer, JobContainerSpec
from worker.provider.relay import Relay
from worker.provider.socket_dirs import (
    api_socket_path,
    egress_socket_path,
    make_socket_dir,
    remove_socket_dir,
)
from worker.provider.upstream import Server

log = logging.getLogger(__name__)

#: Beyond the job's own limit, how long the runner may take to wind down and report before the
#: provider ends the container itself (the server's deadline has ended the attempt by then).
WAIT_MARGIN_SECONDS = 120.0
#: After SIGTERM (the provider is stopping), how long the runner has to report.
INTERRUPT_GRACE_SECONDS = 8.0
#: How long the output readers may lag behind the container's exit.
OUTPUT_DRAIN_SECONDS = 5.0
#: How long the engine may fail to answer about a running job before the provider gives up on it.
ENGINE_PATIENCE_SECONDS = 60.0
_POLL_SECONDS = 0.5
_MAX_LINE = 4000


@dataclass
class Outcome:
    """What became of one assignment on this provider."""

    attempt_id: int
    #: The container's exit status (runner: 0 confirmed success, 1 confirmed other, 2 unknown);
    #: None when no container ran to the end (a failed start, a kill).
    exit_status: int | None = None
    #: The runner's report (its last stdout line), when it wrote one.
    report: dict[str, Any] | None = None
    #: Why the container could not be started or followed, if so.
    error: str = ""
    #: Why cleanup failed; the provider claims nothing more when this is set.
    cleanup_error: str = ""
    stopped_by: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        if self.error:
            return f"not run to the end: {self.error}"
        report = self.report or {}
        result = report.get("result", "no report")
        conclusion = report.get("conclusion") or "unconfirmed"
        text = f"runner exit status {self.exit_status}, result {result}, server: {conclusion}"
        if report.get("reason"):
            text += f" ({report['reason']})"
        if self.stopped_by:
            text += f"; {self.stopped_by}"
        return text


class AttemptExecutor:
    """Runs assignments in job containers through one driver (one per slot)."""

    def __init__(
        self,
        driver: DockerDriver,
        server: Server,
        sockets_dir: Path,
        *,
        network: str = NO_NETWORK,
        egress: EgressPolicy | None = None,
        provider_token: str = "",
        interrupted: Callable[[], bool] = lambda: False,
        wait_margin: float = WAIT_MARGIN_SECONDS,
    ) -> None:
        self.driver = driver
        self.server = server
        self.sockets_dir = sockets_dir
        self.network = network
        #: None or mode ``none``: no proxy (the job has no way out).
        self.egress = egress if egress is not None and egress.enabled else None
        self._provider_token = provider_token
        self.interrupted = interrupted
        self.wait_margin = wait_margin

    def run(self, assignment: Assignment, credential: str) -> Outcome:
        """Run ``assignment`` once, then remove everything it had; never raises for the job."""
        attempt_id = assignment.attempt_id
        outcome = Outcome(attempt_id)
        began = time.monotonic()
        socket_dir: Path | None = None
        relay: Relay | None = None
        proxy: EgressProxy | None = None
        audit = EgressAudit(self.server, self._provider_token, attempt_id, credential)
        workspace: str | None = None
        handle: JobContainer | None = None
        try:
            socket_dir = make_socket_dir(self.sockets_dir, str(attempt_id))
            relay = Relay(api_socket_path(socket_dir), self.server, attempt_id).start()
            if self.egress is not None:
                proxy = EgressProxy(egress_socket_path(socket_dir), attempt_id, self.egress)
                proxy.start()
            workspace = self.driver.create_workspace(str(attempt_id))
            stdin = protocol.dumps(
                RunnerInput(
                    credential=credential,
                    api_socket=RUNNER_API_SOCKET,
                    workspace=RUNNER_WORKSPACE,
                    assignment=assignment,
                    egress_socket=RUNNER_EGRESS_SOCKET if proxy is not None else "",
                ).to_json()
            )
            spec = JobContainerSpec(
                attempt_id=str(attempt_id),
                workspace=workspace,
                socket_dir=socket_dir,
                stdin=stdin,
                network=self.network,
            )
            handle = self.driver.start_job(spec)
            outcome.timings["started"] = time.monotonic() - began
            log.info(
                "attempt %s: started container %s in %.3f s",
                attempt_id,
                handle.name,
                outcome.timings["started"],
            )
            self._follow(assignment, handle, outcome, lambda: _audit(proxy, audit))
        except (ForgeCIError, OSError, TimeoutError) as exc:
            outcome.error = str(exc) or type(exc).__name__
            log.error("attempt %s: %s", attempt_id, outcome.error)
        finally:
            if proxy is not None:
                proxy.close()
                audit.add(proxy.take_records())
                for _ in range(3):
                    if audit.flush():
                        break
                    time.sleep(1.0)
            outcome.cleanup_error = self._clean_up(attempt_id, handle, relay, socket_dir, workspace)
            outcome.timings["total"] = time.monotonic() - began
        if handle is None and outcome.error:
            # No runner ever got the assignment: say so now instead of leaving the job to the
            # start window (the server refuses this if a runner did start after all).
            report_failed_start(self.server, attempt_id, credential)
        return outcome

    # -- following the container ----------------------------------------------------------------

    def _follow(
        self,
        assignment: Assignment,
        handle: JobContainer,
        outcome: Outcome,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        readers = [
            threading.Thread(
                target=self._read_output,
                args=(handle, stream, outcome),
                name=f"output-{handle.attempt_id}-{stream}",
                daemon=True,
            )
            for stream in ("stdout", "stderr")
        ]
        for reader in readers:
            reader.start()
        limit = time.monotonic() + assignment.timeout_minutes * 60 + self.wait_margin
        interrupted_at: float | None = None
        engine_trouble_since: float | None = None
        while True:
            try:
                outcome.exit_status = self.driver.wait(handle, _POLL_SECONDS)
                break
            except TimeoutError:
                engine_trouble_since = None
            except Unavailable as exc:
                # A hiccup of the engine must not end a job that runs fine; a long outage does.
                now = time.monotonic()
                engine_trouble_since = engine_trouble_since or now
                if now - engine_trouble_since > ENGINE_PATIENCE_SECONDS:
                    raise
                log.warning("attempt %s: %s; asking again", handle.attempt_id, exc)
                time.sleep(1.0)
            tick()
            now = time.monotonic()
            if interrupted_at is None and self.interrupted():
                interrupted_at = now
                outcome.stopped_by = "interrupted: the provider is stopping"
                log.info(
                    "attempt %s: the provider is stopping; interrupting the runner",
                    handle.attempt_id,
                )
                self.driver.interrupt(handle)
            late = now > limit or (
                interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_SECONDS
            )
            if late:
                outcome.stopped_by = outcome.stopped_by or "killed: past the job's time limit"
                log.warning("attempt %s: %s", handle.attempt_id, outcome.stopped_by)
                self.driver.kill(handle)
                outcome.exit_status = self.driver.wait(handle, 30.0)
                break
        for reader in readers:
            reader.join(OUTPUT_DRAIN_SECONDS)

    def _read_output(
        self, handle: JobContainer, stream: Literal["stdout", "stderr"], outcome: Outcome
    ) -> None:
        pending = b""
        last = b""
        try:
            for chunk in self.driver.stream_output(handle, stream):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._log_line(handle, stream, line)
                    if line.strip():
                        last = line
                if len(pending) > _MAX_LINE:
                    self._log_line(handle, stream, pending)
                    pending = b""
        except ForgeCIError as exc:
            log.warning(
                "attempt %s: could not read the runner's %s: %s", handle.attempt_id, stream, exc
            )
        if pending.strip():
            self._log_line(handle, stream, pending)
            last = pending
        if stream == "stdout" and last:
            try:
                report = json.loads(last)
            except ValueError:
                return
            if isinstance(report, dict):
                outcome.report = report

    @staticmethod
    def _log_line(handle: JobContainer, stream: str, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")[:_MAX_LINE]
        log.info("attempt %s runner %s: %s", handle.attempt_id, stream, text)

    # -- removal --------------------------------------------------------------------------------

    def _clean_up(
        self,
        attempt_id: int,
        handle: JobContainer | None,
        relay: Relay | None,
        socket_dir: Path | None,
        workspace: str | None,
    ) -> str:
        """Container, relay, socket directory, volume: in this order. Returns what failed."""
        failures: list[str] = []
        container_gone = True
        if handle is not None:
            try:
                self.driver.remove_job(handle)
            except ForgeCIError as exc:
                container_gone = False
                failures.append(str(exc))
        if relay is not None:
            relay.close()
        if socket_dir is not None:
            try:
                remove_socket_dir(socket_dir)
            except (ForgeCIError, OSError) as exc:
                failures.append(f"removing socket directory {socket_dir}: {exc}")
        if workspace is not None:
            if container_gone:
                try:
                    self.driver.remove_workspace(workspace)
                except ForgeCIError as exc:
                    failures.append(str(exc))
            else:
                # A volume in use cannot go before its container.
                failures.append(f"workspace volume {workspace} kept: its container is still there")
        if failures:
            return "; ".join(failures)
        log.info("attempt %s: container and workspace removed", attempt_id)
        return ""


def _audit(proxy: EgressProxy | None, audit: EgressAudit) -> None:
    """While the job runs: the proxy's new records to the server (a denial shows at once)."""
    if proxy is not None:
        audit.add(proxy.take_records())
        if audit.pending:
            audit.flush(timeout=5.0)


def report_failed_start(server: Server, attempt_id: int, credential: str) -> bool:
    """Complete a never-started attempt as ``failure`` (``execution_id`` ""); True if recorded.

    Uses the attempt credential, like a runner would; a few tries, then the lease decides.
    """
    body = protocol.dumps(
        request_body(
            CompleteRequest(execution_id="", conclusion=states.FAILURE, last_log_sequence=0)
        )
    )
    path = f"{API_PREFIX}/attempts/{attempt_id}/complete"
    for pause in (0.5, 2.0, 0.0):
        connection = server.connect(10.0)
        try:
            connection.request(
                "POST",
                path,
                body=body,
                headers={
                    "Authorization": f"Bearer {credential}",
                    "Content-Type": "application/json",
                },
            )
            response = connection.getresponse()
            response.read(MAX_BODY_BYTES)
            if response.status == 200:
                log.info("attempt %s: reported as failed (its runner never started)", attempt_id)
                return True
            if response.status < 500:
                log.warning(
                    "attempt %s: the server did not take the failed start (HTTP %s)",
                    attempt_id,
                    response.status,
                )
                return False
        except (OSError, http.client.HTTPException) as exc:
            log.warning("attempt %s: could not report the failed start: %s", attempt_id, exc)
        finally:
            connection.close()
        time.sleep(pause)
    return False
