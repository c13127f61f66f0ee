"""One attempt of one job, from ``start`` to ``complete``.

::

    check the workspace and socket ──► start (a fresh execution_id) ──► watchdog, heartbeats,
    uploader ──► HOME/TMPDIR ──► source (unless a checkout step will fetch it) ──► the actions'
    pre steps, each step, the post steps (reverse order; after a failure, a cancel, a timeout):
    if ──► report running ──► run (script, checkout or action) ──► file commands ──► report
    completed with annotations and summary
      (stop at once when the watchdog says so: cancel, job timeout, lease lost, ended; after a
      cancel or the time limit, as on GitHub, the steps left whose condition still holds under
      cancelled(): if: always() / cancelled(), post-if's default always(), run in one clean-up
      window of POST_GRACE seconds, the others are reported skipped)
    ──► job outputs ──► kill every leftover process ──► deliver the log (3 s)
    ──► complete (3 s) ──► report

Nothing is ever run twice: a script whose result is uncertain is not retried, and an
assignment that is already ``running`` (a claim replay) is refused, never started again.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Any

from forge_ci import protocol
from forge_ci.protocol import (
    CHECKOUT,
    MAX_BODY_BYTES,
    MAX_OUTPUTS,
    AssignmentStep,
    AttemptStatus,
    CompleteRequest,
    HookStep,
    RunnerInput,
    StartRequest,
    StepRequest,
    hook_steps,
    request_body,
)
from worker.runner.actions.codecache import opted_out
from worker.runner.actions.executor import ActionFailed, ActionSteps
from worker.runner.actions.trees import ActionTrees
from worker.runner.checkout import CheckoutError
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.contexts import (
    env_context,
    runner_context,
    step_contexts,
    write_event,
)
from worker.runner.egress import EgressForwarder, proxy_environment
from worker.runner.environment import (
    ConfigurationError,
    Layout,
    check_surroundings,
    job_environment,
)
from worker.runner.evaluation import (
    EvaluationError,
    condition_holds,
    continues_on_error,
    render,
)
from worker.runner.gitcheckout import checkout_lines, rendered_inputs
from worker.runner.heartbeat import Heartbeat
from worker.runner.processes import kill_descendants, reap
from worker.runner.report import Report, StepRecord
from worker.runner.scripts import ProcessFailed, ScriptRunner
from worker.runner.stepenv import (
    StepSetupError,
    ask_for_secrets,
    render_env,
    working_directory,
)
from worker.runner.uploader import Uploader
from worker.runner.watchdog import POST_GRACE, STOP_CONCLUSIONS, Watchdog

#: Budgets after the steps ended (seed: "three-second budget after process cleanup").
FINAL_LOG_SECONDS = 3.0
FINAL_COMPLETE_SECONDS = 3.0
#: How long a finished step waits for its output to be delivered before it is reported.
STEP_LOG_SECONDS = 5.0
#: ``github.token`` when the server sends none: there is no GitHub API to call, but actions
#: whose ``token`` input is required (github-script) must get a non-empty value.
NO_GITHUB_TOKEN = "forge-ci-has-no-github-api"
#: How long ``start`` may take, at most (the claim's lease bounds it too).
START_SECONDS = 30.0
#: A step condition that may hold after a cancellation or the job's time limit.
RUNS_AFTER_STOP = re.compile(r"\b(always|cancelled)\s*\(")


class StepFailed(Exception):
    """A step could not run or its result could not be applied; the message says why."""


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
        self.layout: Layout | None = None
        self.pre, self.post = hook_steps(self.assignment.steps, self.assignment.actions)
        self.scripts: ScriptRunner
        self.trees: ActionTrees
        self.actions = ActionSteps(self)
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
        step_id: str,
        state: str,
        conclusion: str = "",
        exit_code: int = -1,
        continue_on_error: bool = False,
    ) -> bool:
        annotations: list[Any] = []
        summary = ""
        if state == "completed":
            effects = self.scripts.take_effects()
            annotations = effects.annotations()
            summary, cut = effects.summary_text()
            for level, count in sorted(effects.commands.dropped.items()):
                self.note(step_id, f"{count} more {level} annotations were not kept (10 a step)")
            if cut:
                self.note(step_id, "the step summary was cut to its first 16 KiB")
        request = StepRequest(
            self.execution_id,
            step_id,
            state,
            conclusion,
            exit_code,
            continue_on_error,
            annotations,
            summary,
        )
        return self._call("steps", request_body(request), self.watchdog.safe_until()) is not None

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
        self.scripts = ScriptRunner(self.layout, self.uploader, self.watchdog)
        self.trees = ActionTrees(
            self.client, self.execution_id, runner_dir, self.watchdog, self._interrupted
        )
        self.watchdog.start()
        self.heartbeat.start()
        self.uploader.start()
        # The actions' trees download meanwhile, beside the checkout and the first steps.
        self.trees.cold = opted_out(self.assignment.steps)
        self.trees.prefetch(self.assignment.actions.values())
        outputs: dict[str, str] = {}
        egress = EgressForwarder(self.input.egress_socket)
        try:
            self._prepare(egress.start() if self.input.egress_socket else 0)
            outputs = self._steps()
        finally:
            egress.close()
            self.trees.close()
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

    def _prepare(self, egress_port: int) -> None:
        assert self.layout is not None
        for directory in (self.layout.home, self.layout.tmp):
            os.mkdir(directory, 0o700)
        github = self.assignment.contexts["github"]
        event_path = write_event(self.layout.runner_dir, github.get("event"))
        self.scripts.job_env = job_environment(
            github, self.layout, self.assignment.job_key, event_path=event_path
        )
        # A runner started elsewhere than the image (tests on the host) names its tool cache.
        tool_cache = os.environ.get("RUNNER_TOOL_CACHE")
        if tool_cache:
            self.scripts.job_env["RUNNER_TOOL_CACHE"] = tool_cache
        if egress_port:
            self.scripts.job_env.update(proxy_environment(egress_port))
        self.runner_context = runner_context(self.scripts.job_env)

    def _contexts(self, step_id: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
        """Every context an expression of step ``step_id`` may read (``env``: its step env)."""
        assert self.layout is not None
        contexts = step_contexts(
            self.assignment.contexts,
            workspace=self.layout.workspace,
            step_id=step_id,
            runner=self.runner_context,
            failed=self.failed,
            env=env_context(self.scripts.added_env, env or {}),
            steps=self.steps_context,
        )
        contexts["github"].setdefault("token", NO_GITHUB_TOKEN)
        if self.watchdog.stopped.is_set():
            contexts["job"]["status"] = "cancelled"  # as on GitHub, in the clean-up window
        return contexts

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
        # Conditions that may hold after a stop get their clean-up window before the time limit.
        if any(RUNS_AFTER_STOP.search(step.condition) for step in steps):
            self.watchdog.reserve(POST_GRACE)
        # Every step in order: the actions' pre steps, the job's, the post steps (see _step).
        work: list[Callable[[str, float], None]] = [
            *(partial(self._hook, hook) for hook in self.pre),
            *(partial(self._step, step) for step in steps),
            *(partial(self._hook, hook) for hook in self.post),
        ]
        until = float("inf")
        for run in work:
            if self.watchdog.stopped.is_set() and until == float("inf"):
                until = self.watchdog.begin_cleanup(POST_GRACE)
            if self.watchdog.halted():
                break
            run("cancelled" if self.watchdog.stopped.is_set() else "", until)
            reap()
        if self.watchdog.stopped.is_set():
            return {}
        return self._job_outputs()

    def _check_out(self, step_id: str, inputs: dict[str, Any] | None = None) -> None:
        """Fetch the pinned commit into the workspace (with history when the checkout step has
        inputs), and say so in the log."""
        assert self.layout is not None
        layout = self.layout
        for line in checkout_lines(
            self.client,
            self.assignment.source_archive_path,
            self.execution_id,
            (layout.workspace, layout.home, layout.tmp),
            inputs or {},
            str(self.assignment.contexts["github"].get("sha", "")),
            self.watchdog,
            self._interrupted,
        ):
            self.uploader.write(step_id, "stdout", line)

    def _record(
        self,
        step_id: str,
        outcome: str,
        conclusion: str,
        exit_code: int,
        outputs: dict[str, str],
    ) -> None:
        self.steps_context[step_id] = {
            "outputs": outputs,
            "outcome": outcome,
            "conclusion": conclusion,
        }
        self.report.steps.append(StepRecord(step_id, outcome, conclusion, exit_code))

    def _step(self, step: AssignmentStep, status: str = "", until: float = float("inf")) -> None:
        """One step of the job; after a cancellation or the time limit (``status`` cancelled)
        only if its condition still holds (``always()``, ``cancelled()``), until the clean-up
        window ends at ``until``."""
        written = {name: v for name, v in step.env.items() if isinstance(v, str)}
        contexts = self._contexts(step.id, written)
        status = status or ("failure" if self.failed else "success")
        try:
            # The env context of the condition has the step's literal env values: its templates
            # and secrets are rendered once the step runs (secrets are asked for then).
            runs = condition_holds(step.condition, contexts, status, f"step {step.id}: if")
            continue_on_error = continues_on_error(
                step.continue_on_error, contexts, f"step {step.id}: continue-on-error"
            )
        except (EvaluationError, StepFailed) as exc:
            self.note(step.id, str(exc))
            self.failed = True
            if self.report_step(step.id, "completed", "failure"):
                self._record(step.id, "failure", "failure", -1, {})
            return
        if not runs:
            if self.report_step(step.id, "completed", "skipped"):
                self._record(step.id, "skipped", "skipped", -1, {})
            return

        def work() -> tuple[str, int, dict[str, str]]:
            if step.uses == CHECKOUT:
                self._checkout_step(step, contexts)
                return "success", -1, {}
            if step.uses:
                try:
                    return self.actions.run(step, contexts, step.id)
                except ActionFailed as exc:
                    raise StepFailed(str(exc)) from None
            exit_code, outputs = self._script_step(step, contexts)
            return ("success" if exit_code == 0 else "failure"), exit_code, outputs

        self._execute(step.id, step.timeout_minutes, continue_on_error, work, until)

    def _hook(self, hook: HookStep, status: str = "", until: float = float("inf")) -> None:
        """A pre or post step of a node action (skipped when its condition says so); ``status``
        is the job's status its condition sees, ``until`` when it must end (clean-up)."""
        status = status or ("failure" if self.failed else "success")
        try:
            work = self.actions.hook(hook, self._contexts(), status)
        except ActionFailed as exc:
            self.note(hook.id, str(exc))
            self.failed = True
            if self.report_step(hook.id, "completed", "failure"):
                self._record(hook.id, "failure", "failure", -1, {})
            return
        if work is None:
            if self.report_step(hook.id, "completed", "skipped"):
                self._record(hook.id, "skipped", "skipped", -1, {})
            return

        def run_hook() -> tuple[str, int, dict[str, str]]:
            try:
                code = work()
            except ActionFailed as exc:
                raise StepFailed(str(exc)) from None
            return ("success" if code == 0 else "failure"), code, {}

        self._execute(hook.id, 0, False, run_hook, until)

    def _execute(
        self,
        step_id: str,
        timeout_minutes: int,
        continue_on_error: bool,
        work: Callable[[], tuple[str, int, dict[str, str]]],
        until: float = float("inf"),
    ) -> None:
        """Report a step running, do its ``work``, report how it ended (a clean-up step:
        ``until`` is the end of the clean-up window)."""
        cleanup = until != float("inf")
        if not self.report_step(step_id, "running"):
            return
        deadline = now() + timeout_minutes * self.input.step_minute_seconds
        self.watchdog.begin_step(min(until, deadline if timeout_minutes else float("inf")))
        outputs: dict[str, str] = {}
        exit_code = -1
        try:
            outcome, exit_code, outputs = work()
        except StepFailed as exc:
            self.note(step_id, str(exc))
            outcome = "failure"
        timed_out = self.watchdog.end_step()
        stop = None if cleanup and not self.watchdog.lost() else self.watchdog.stop
        if stop is not None:
            outcome = "timed_out" if stop.kind == "timed_out" else "cancelled"
            self.note(step_id, stop.message)
        elif cleanup and timed_out:
            outcome = "timed_out"
            self.note(step_id, f"the clean-up window ({POST_GRACE:g} s after the stop) ran out")
        elif timed_out:
            outcome = "timed_out"
            self.note(
                step_id, f"the step reached its time limit (timeout-minutes: {timeout_minutes})"
            )
        elif outcome == "failure" and exit_code > 0:
            self.note(step_id, f"the step failed with exit status {exit_code}")
        forgiven = continue_on_error and outcome in ("failure", "timed_out")
        conclusion = "success" if forgiven else outcome
        if outcome in ("failure", "timed_out") and not forgiven:
            self.failed = True
        if stop is not None and STOP_CONCLUSIONS[stop.kind] is None:
            self._record(step_id, outcome, conclusion, exit_code, outputs)
            return  # the server cannot take a report any more
        # The step's output first, so that a finished step's log is complete when it shows.
        self.uploader.flush(min(now() + STEP_LOG_SECONDS, self.watchdog.safe_until()))
        if self.report_step(step_id, "completed", outcome, exit_code, continue_on_error):
            self._record(step_id, outcome, conclusion, exit_code, outputs)

    def _checkout_step(self, step: AssignmentStep, contexts: dict[str, Any]) -> None:
        try:
            if step.env:  # with.path reads env: the job's env (the plan left secrets out)
                env, _ = render_env(step, contexts, {}, lambda e: self._contexts(step.id, e))
                contexts = self._contexts(step.id, env)
            self._check_out(step.id, rendered_inputs(step.id, step.inputs, contexts))
        except (CheckoutError, EvaluationError, StepSetupError) as exc:
            raise StepFailed(str(exc)) from None

    def directory(self, relative: str) -> str:
        assert self.layout is not None
        try:
            return working_directory(self.layout.workspace, relative)
        except StepSetupError as exc:
            raise StepFailed(str(exc)) from None

    def step_env(
        self, step: AssignmentStep, contexts: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The step's rendered env and secret values (:func:`worker.runner.stepenv.render_env`);
        the secrets are asked for now, the step being reported running."""
        try:
            delivered = ask_for_secrets(
                self.client,
                self.assignment.attempt_id,
                self.execution_id,
                step,
                self.watchdog,
                self._give_up,
            )
            return render_env(step, contexts, delivered, lambda env: self._contexts(step.id, env))
        except StepSetupError as exc:
            raise StepFailed(str(exc)) from None

    def _script_step(
        self, step: AssignmentStep, contexts: dict[str, Any]
    ) -> tuple[int, dict[str, str]]:
        env, values = self.step_env(step, contexts)
        contexts = self._contexts(step.id, env)
        try:
            script = render(step.run, contexts, f"step {step.id}: run")
            directory = render(
                step.working_directory, contexts, f"step {step.id}: working-directory"
            )
        except EvaluationError as exc:
            raise StepFailed(str(exc)) from None
        cwd = self.directory(directory)
        try:
            result = self.scripts.run(step.id, (step.shell, script), env, values, cwd)
        except ProcessFailed as exc:
            raise StepFailed(str(exc)) from None
        return result.exit_code, result.outputs

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
