"""One attempt of one job, from ``start`` to ``complete``.

::

    check the workspace and socket ──► start (a fresh execution_id) ──► watchdog, heartbeats,
    uploader ──► HOME/TMPDIR ──► source (unless a checkout step will fetch it) ──► for each
    step: if ──► report running ──► run ──► file commands ──► report completed
      (stop at once when the watchdog says so: cancel, job timeout, lease lost, ended)
    ──► job outputs ──► kill every leftover process ──► deliver the log (3 s)
    ──► complete (3 s) ──► report

Nothing is ever run twice: a script whose result is uncertain is not retried, and an
assignment that is already ``running`` (a claim replay) is refused, never started again.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
from typing import Any

from forge_ci import protocol
from forge_ci.protocol import (
    CHECKOUT,
    MAX_BODY_BYTES,
    MAX_OUTPUTS,
    AssignmentStep,
    AttemptStatus,
    CompleteRequest,
    RunnerInput,
    StartRequest,
    StepRequest,
    request_body,
)
from worker.runner.checkout import CheckoutError, check_out
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.contexts import (
    GENERATED_PREFIX,
    env_context,
    runner_context,
    step_contexts,
    write_event,
)
from worker.runner.environment import (
    Layout,
    StepEnvironmentError,
    job_environment,
    step_environment,
)
from worker.runner.evaluation import (
    EvaluationError,
    condition_holds,
    continues_on_error,
    render,
)
from worker.runner.filecommands import CommandFiles, FileCommandError
from worker.runner.heartbeat import Heartbeat
from worker.runner.processes import kill_descendants, reap
from worker.runner.report import Report, StepRecord
from worker.runner.shells import ShellError, shell_argv, write_script
from worker.runner.steps import StepStartError, run_script
from worker.runner.uploader import Uploader
from worker.runner.watchdog import STOP_CONCLUSIONS, Watchdog

#: Budgets after the steps ended (seed: "three-second budget after process cleanup").
FINAL_LOG_SECONDS = 3.0
FINAL_COMPLETE_SECONDS = 3.0
#: How long a finished step waits for its output to be delivered before it is reported.
STEP_LOG_SECONDS = 5.0
#: How long ``start`` may take, at most (the claim's lease bounds it too).
START_SECONDS = 30.0


class ConfigurationError(Exception):
    """The runner's input or surroundings are unusable; nothing was started."""


class StepFailed(Exception):
    """A step could not run or its result could not be applied; the message says why."""


def check_surroundings(runner_input: RunnerInput) -> Layout:
    """The workspace must be an empty directory and the API socket a socket."""
    try:
        mode = os.stat(runner_input.api_socket).st_mode
    except OSError as exc:
        raise ConfigurationError(
            f"the runner API socket {runner_input.api_socket} is missing: {exc.strerror}"
        ) from None
    if not stat.S_ISSOCK(mode):
        raise ConfigurationError(f"{runner_input.api_socket} is not a socket")
    workspace = runner_input.workspace
    try:
        entries = os.listdir(workspace)
    except OSError as exc:
        raise ConfigurationError(f"the workspace {workspace} is unusable: {exc.strerror}") from None
    if entries:
        raise ConfigurationError(
            f"the workspace {workspace} must be empty; it holds {len(entries)} entries"
        )
    workspace = os.path.realpath(workspace)
    return Layout(
        workspace=workspace,
        home=os.path.join(workspace, ".home"),
        tmp=os.path.join(workspace, ".tmp"),
        runner_dir="",
    )


def _contains(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


class JobRunner:
    """Runs the assignment of ``runner_input`` and returns the report."""

    def __init__(self, runner_input: RunnerInput) -> None:
        self.input = runner_input
        self.assignment = runner_input.assignment
        self.client = ApiClient(runner_input.api_socket, runner_input.credential)
        self.execution_id = secrets.token_hex(16)
        self.watchdog = Watchdog(self.assignment.timeout_minutes)
        self.uploader = Uploader(
            self.client, self.assignment.attempt_id, self.execution_id, self.watchdog
        )
        self.heartbeat = Heartbeat(
            self.client, self.assignment.attempt_id, self.execution_id, self.watchdog
        )
        self.report = Report(self.assignment.attempt_id, self.execution_id, "error")
        self.steps_context: dict[str, dict[str, Any]] = {}
        self.failed = False
        self.added_env: dict[str, str] = {}
        self.path_entries: list[str] = []
        self.layout: Layout | None = None
        self.job_env: dict[str, str] = {}
        self.runner_context: dict[str, str] = {}

    # -- reporting to the server ----------------------------------------------------------------

    def _give_up(self) -> bool:
        return self.watchdog.lost()

    def _call(self, endpoint: str, body: dict[str, Any], until: float) -> AttemptStatus | None:
        """An attempt call; None (and the job stops) when it was refused or not answered."""
        sent_at = now()
        try:
            status = self.client.call(
                self.assignment.attempt_id, endpoint, body, until=until, give_up=self._give_up
            )
        except NoAnswer as exc:
            self.watchdog.request_stop("lost", f"{endpoint}: {exc}")
            return None
        except Refused as refused:
            if refused.attempt is not None:
                self.watchdog.observe(refused.attempt, sent_at)
                self.report.server = refused.attempt
            self.watchdog.request_stop("refused", f"{endpoint} refused: {refused.message}")
            return None
        self.watchdog.observe(status, sent_at)
        self.report.server = status
        return status

    def note(self, step_id: str, message: str) -> None:
        """A message of the runner in the job's log (on the step's stderr)."""
        self.uploader.write(step_id, "stderr", f"forge-ci: {message}\n")

    def report_step(
        self,
        step: AssignmentStep,
        state: str,
        conclusion: str = "",
        exit_code: int = -1,
        continue_on_error: bool = False,
    ) -> bool:
        body = request_body(
            StepRequest(self.execution_id, step.id, state, conclusion, exit_code, continue_on_error)
        )
        return self._call("steps", body, self.watchdog.safe_until()) is not None

    # -- the job --------------------------------------------------------------------------------

    def run(self) -> Report:
        try:
            self.layout = check_surroundings(self.input)
        except ConfigurationError as exc:
            self.report.reason = str(exc)
            return self.report
        if self.assignment.state != "leased":
            self.report.reason = (
                f"the assignment is already {self.assignment.state}: another runner started "
                "it, and a job is never started twice"
            )
            return self.report
        if not self._start():
            return self.report
        runner_dir = tempfile.mkdtemp(prefix="forge-ci-runner-")
        self.layout = Layout(self.layout.workspace, self.layout.home, self.layout.tmp, runner_dir)
        self.watchdog.start()
        self.heartbeat.start()
        self.uploader.start()
        outputs: dict[str, str] = {}
        try:
            self._prepare()
            outputs = self._steps()
        finally:
            kill_descendants()
            shutil.rmtree(runner_dir, ignore_errors=True)
            self.watchdog.close()
        self._finish(outputs)
        return self.report

    def _start(self) -> bool:
        lease_left = (self.assignment.lease_deadline_ms - self.assignment.server_time_ms) / 1000
        until = now() + max(1.0, min(START_SECONDS, lease_left))
        body = request_body(StartRequest(self.execution_id))
        sent_at = now()
        try:
            status = self.client.call(self.assignment.attempt_id, "start", body, until=until)
        except NoAnswer as exc:
            self.report.reason = f"start: {exc}"
            return False
        except Refused as refused:
            self.report.server = refused.attempt
            self.report.result = "refused"
            self.report.reason = f"start refused: {refused.message}"
            return False
        self.report.server = status
        self.watchdog.observe(status, sent_at)
        stop = self.watchdog.stop
        if stop is not None and STOP_CONCLUSIONS[stop.kind] is None:
            self.report.result = stop.kind
            self.report.reason = stop.message
            return False
        # Cancelled or interrupted meanwhile: no step runs, and the runner reports that.
        return True

    def _prepare(self) -> None:
        assert self.layout is not None
        for directory in (self.layout.home, self.layout.tmp):
            os.mkdir(directory, 0o700)
        github = self.assignment.contexts["github"]
        event_path = write_event(self.layout.runner_dir, github.get("event"))
        self.job_env = job_environment(
            github, self.layout, self.assignment.job_key, event_path=event_path
        )
        self.runner_context = runner_context(self.job_env)

    def _contexts(self, step_id: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
        assert self.layout is not None
        return step_contexts(
            self.assignment.contexts,
            workspace=self.layout.workspace,
            step_id=step_id,
            runner=self.runner_context,
            failed=self.failed,
            env=env_context(self.added_env, env or {}),
            steps=self.steps_context,
        )

    def _interrupted(self) -> bool:
        return self.watchdog.step_expired()

    def _steps(self) -> dict[str, str]:
        assert self.layout is not None
        steps = self.assignment.steps
        if not any(step.uses == CHECKOUT for step in steps) and self.assignment.source_archive_path:
            try:
                self._check_out("")
            except CheckoutError as exc:
                self.note("", str(exc))
                self.failed = True
                return {}
        for number, step in enumerate(steps, start=1):
            if self.watchdog.stopped.is_set():
                break
            self._step(number, step)
            reap()
        if self.watchdog.stopped.is_set():
            return {}
        return self._job_outputs()

    def _check_out(self, step_id: str) -> None:
        """Fetch and extract the pinned commit into the workspace, and say so in the log."""
        assert self.layout is not None
        extracted = check_out(
            self.client,
            self.assignment.source_archive_path,
            self.execution_id,
            self.layout.workspace,
            self.watchdog,
            self._interrupted,
        )
        sha = str(self.assignment.contexts["github"].get("sha", ""))
        self.uploader.write(
            step_id,
            "stdout",
            f"Checked out {sha}: {extracted.files} files, {extracted.bytes} bytes\n",
        )

    def _record(
        self,
        step: AssignmentStep,
        outcome: str,
        conclusion: str,
        exit_code: int,
        outputs: dict[str, str],
    ) -> None:
        self.steps_context[step.id] = {
            "outputs": outputs,
            "outcome": outcome,
            "conclusion": conclusion,
        }
        self.report.steps.append(StepRecord(step.id, outcome, conclusion, exit_code))

    def _step(self, number: int, step: AssignmentStep) -> None:
        status = "failure" if self.failed else "success"
        try:
            env, values = self._step_env(step)
            contexts = self._contexts(step.id, env)
            runs = condition_holds(step.condition, contexts, status, f"step {step.id}: if")
            continue_on_error = continues_on_error(
                step.continue_on_error, contexts, f"step {step.id}: continue-on-error"
            )
        except (EvaluationError, StepFailed) as exc:
            self.note(step.id, str(exc))
            self.failed = True
            if self.report_step(step, "completed", "failure"):
                self._record(step, "failure", "failure", -1, {})
            return
        if not runs:
            if self.report_step(step, "completed", "skipped"):
                self._record(step, "skipped", "skipped", -1, {})
            return
        if not self.report_step(step, "running"):
            return
        deadline = now() + step.timeout_minutes * self.input.step_minute_seconds
        self.watchdog.begin_step(deadline if step.timeout_minutes else float("inf"))
        outputs: dict[str, str] = {}
        exit_code = -1
        try:
            if step.uses == CHECKOUT:
                self._checkout_step(step)
                outcome = "success"
            elif step.uses:
                raise StepFailed(f"uses: {step.uses} is not supported by this runner")
            else:
                exit_code, outputs = self._script_step(number, step, contexts, env, values)
                outcome = "success" if exit_code == 0 else "failure"
        except StepFailed as exc:
            self.note(step.id, str(exc))
            outcome = "failure"
        timed_out = self.watchdog.end_step()
        stop = self.watchdog.stop
        if stop is not None:
            outcome = "timed_out" if stop.kind == "timed_out" else "cancelled"
            self.note(step.id, stop.message)
        elif timed_out:
            outcome = "timed_out"
            self.note(
                step.id,
                f"the step reached its time limit (timeout-minutes: {step.timeout_minutes})",
            )
        elif outcome == "failure" and exit_code > 0:
            self.note(step.id, f"the step failed with exit status {exit_code}")
        forgiven = continue_on_error and outcome in ("failure", "timed_out")
        conclusion = "success" if forgiven else outcome
        if outcome in ("failure", "timed_out") and not forgiven:
            self.failed = True
        if stop is not None and STOP_CONCLUSIONS[stop.kind] is None:
            self._record(step, outcome, conclusion, exit_code, outputs)
            return  # the server cannot take a report any more
        # The step's output first, so that a finished step's log is complete when it shows.
        self.uploader.flush(min(now() + STEP_LOG_SECONDS, self.watchdog.safe_until()))
        if self.report_step(step, "completed", outcome, exit_code, continue_on_error):
            self._record(step, outcome, conclusion, exit_code, outputs)

    def _checkout_step(self, step: AssignmentStep) -> None:
        try:
            self._check_out(step.id)
        except CheckoutError as exc:
            raise StepFailed(str(exc)) from None

    def _directory(self, relative: str) -> str:
        assert self.layout is not None
        root = self.layout.workspace
        if not relative:
            return root
        if "\x00" in relative:
            raise StepFailed(f"working-directory {relative!r} contains a NUL character")
        if relative.startswith("/") and not _contains(root, os.path.normpath(relative)):
            raise StepFailed(f"working-directory {relative!r} must be inside the workspace")
        resolved = os.path.realpath(os.path.join(root, relative))
        if not _contains(root, resolved):
            raise StepFailed(f"working-directory {relative!r} leads outside the workspace")
        if not os.path.isdir(resolved):
            raise StepFailed(f"working-directory {relative!r} does not exist in the workspace")
        return resolved

    def _step_env(self, step: AssignmentStep) -> tuple[dict[str, str], dict[str, str]]:
        """The step's rendered env and its secret values (by env name).

        The workflow's env values see the ``env`` context of their literal values; the
        variables generated for the script (``_FORGE_CI_EXPR_*``) see all of the step's env.
        """
        env: dict[str, str] = {}
        values: dict[str, str] = {}
        delivered = self.assignment.secrets.get(step.id, {})
        written = {name: v for name, v in step.env.items() if isinstance(v, str)}
        contexts = self._contexts(step.id, written)
        ordered = sorted(step.env.items(), key=lambda item: item[0].startswith(GENERATED_PREFIX))
        full = False
        for name, value in ordered:
            if name.startswith(GENERATED_PREFIX) and not full:
                contexts, full = self._contexts(step.id, env), True
            if isinstance(value, dict) and "secret" in value:
                if name not in delivered:
                    raise StepFailed(
                        f"env {name}: secret {value['secret']} was not delivered to this step"
                    )
                values[name] = delivered[name]
                continue
            try:
                env[name] = render(value, contexts, f"step {step.id}: env {name}")
            except EvaluationError as exc:
                raise StepFailed(str(exc)) from None
        return env, values

    def _script_step(
        self,
        number: int,
        step: AssignmentStep,
        contexts: dict[str, Any],
        env: dict[str, str],
        values: dict[str, str],
    ) -> tuple[int, dict[str, str]]:
        """Run the script with the step's rendered ``env`` and secret ``values``."""
        assert self.layout is not None
        try:
            script = render(step.run, contexts, f"step {step.id}: run")
        except EvaluationError as exc:
            raise StepFailed(str(exc)) from None
        try:
            directory = render(
                step.working_directory, contexts, f"step {step.id}: working-directory"
            )
        except EvaluationError as exc:
            raise StepFailed(str(exc)) from None
        cwd = self._directory(directory)
        files = CommandFiles(self.layout.runner_dir, number)
        files.create()
        try:
            full_env = step_environment(
                self.job_env, self.path_entries, self.added_env, env, values, files, step.id
            )
            argv = shell_argv(step.shell, write_script(self.layout.runner_dir, number, script))
            end = run_script(argv, full_env, cwd, step.id, self.watchdog, self.uploader)
        except (StepEnvironmentError, ShellError, StepStartError) as exc:
            raise StepFailed(str(exc)) from None
        if end.signal and not self.watchdog.step_expired():
            self.note(step.id, f"the shell was ended by signal {end.signal}")
        if self.watchdog.stopped.is_set():
            return end.exit_code, {}
        try:
            updates = files.read()
        except FileCommandError as exc:
            self.note(step.id, str(exc))
            return (end.exit_code or 1), {}
        finally:
            files.remove()
        self.added_env.update(updates.env)
        self.path_entries.extend(updates.path)
        return end.exit_code, updates.outputs

    def _job_outputs(self) -> dict[str, str]:
        contexts = self._contexts()
        outputs: dict[str, str] = {}
        for name, template in self.assignment.outputs.items():
            try:
                outputs[name] = render(template, contexts, f"job output {name}")
            except EvaluationError as exc:
                self.note("", str(exc))
                self.failed = True
        if len(outputs) > MAX_OUTPUTS:
            self.note("", f"the job has {len(outputs)} outputs; at most {MAX_OUTPUTS} are sent")
            self.failed = True
            return {}
        return outputs

    # -- the end --------------------------------------------------------------------------------

    def _finish(self, outputs: dict[str, str]) -> None:
        stop = self.watchdog.stop
        if stop is not None:
            conclusion = STOP_CONCLUSIONS[stop.kind]
            self.report.result = stop.kind
            self.report.reason = stop.message
        else:
            conclusion = "failure" if self.failed else "success"
            self.report.result = conclusion
        if conclusion is not None:
            self.uploader.close(now() + FINAL_LOG_SECONDS)
        else:
            self.uploader.close(now())
        self.report.log_sequence = self.uploader.acknowledged
        self.report.dropped_log_characters = self.uploader.dropped
        if conclusion is not None:
            self._complete(conclusion, outputs)
        self.heartbeat.close()
        last = self.watchdog.last_status
        if last is not None and (self.report.server is None or not self.report.confirmed):
            self.report.server = last

    def _complete(self, conclusion: str, outputs: dict[str, str]) -> None:
        request = CompleteRequest(
            self.execution_id, conclusion, self.uploader.acknowledged, outputs
        )
        if len(protocol.dumps(request_body(request))) > MAX_BODY_BYTES - 1024:
            self.report.reason = "the job outputs are too large to send (64 KiB in all)"
            conclusion = "failure" if conclusion == "success" else conclusion
            self.report.result = conclusion
            request = CompleteRequest(self.execution_id, conclusion, request.last_log_sequence, {})
        until = now() + FINAL_COMPLETE_SECONDS
        for _ in range(2):
            sent_at = now()
            try:
                status = self.client.call(
                    self.assignment.attempt_id, "complete", request_body(request), until=until
                )
            except NoAnswer as exc:
                self.report.reason = self.report.reason or f"complete: {exc}"
                return
            except Refused as refused:
                if refused.attempt is not None:
                    self.watchdog.observe(refused.attempt, sent_at)
                    self.report.server = refused.attempt
                cited = refused.attempt.acknowledged_log_sequence if refused.attempt else 0
                if refused.code == "log_sequence_mismatch" and cited > request.last_log_sequence:
                    # A chunk arrived although its answer was lost: cite what the server has.
                    request = CompleteRequest(
                        self.execution_id, request.conclusion, cited, request.outputs
                    )
                    self.report.log_sequence = cited
                    continue
                self.report.reason = self.report.reason or f"complete refused: {refused.message}"
                return
            self.report.reported = True
            self.report.server = status
            return
