"""Running an action step: node actions (``pre``/``main``/``post``) and composite actions.

::

    uses step ──► the action's tree (ActionTrees) ──► inputs (with + defaults, required checked)
        node        node <dir>/<main> with INPUT_*, GITHUB_ACTION_PATH, GITHUB_ACTION, STATE_*
        composite   its steps in order, each with its own if / continue-on-error, expressions
                    over inputs and the composite's own steps; nested uses run the same way;
                    then the action's outputs are evaluated

A node action that ran its ``main`` is remembered with its environment and state: its ``post``
runs at the end of the job (:meth:`ActionSteps.hook`), in reverse order, also after a
failure, a cancellation or the job's time limit (worker.runner.watchdog: the clean-up window),
as a step of its own. Every spelling of ``runs.using`` (node12 ... node24) runs on the
image's ``node``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from forge_ci.protocol import CHECKOUT, Action, Assignment, AssignmentStep, HookStep
from forge_ci.protocol.actions import MAX_NESTING
from worker.runner.actions.inputs import InputError, build_inputs
from worker.runner.actions.trees import ActionTrees, ActionUnavailable
from worker.runner.evaluation import EvaluationError, condition_holds, continues_on_error, render
from worker.runner.scripts import ProcessFailed, ScriptRunner
from worker.runner.stepenv import StepSetupError, with_secrets
from worker.runner.watchdog import POST_GRACE, Watchdog


class ActionFailed(Exception):
    """The action could not run; the message names the action and why."""


class Host(Protocol):
    assignment: Assignment
    scripts: ScriptRunner
    trees: ActionTrees
    watchdog: Watchdog
    failed: bool

    def step_env(
        self, step: AssignmentStep, contexts: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, str]]: ...

    def directory(self, relative: str) -> str: ...


@dataclass
class Ran:
    """A node action whose main script ran: what its post script needs."""

    action: Action
    directory: str
    env: dict[str, str]
    secrets: dict[str, str]
    extra: dict[str, str]
    state: dict[str, str]


def _state_env(state: Mapping[str, str]) -> dict[str, str]:
    return {f"STATE_{name}": value for name, value in state.items()}


def _ref(reference: str) -> str:
    return reference.rpartition("@")[2] if "@" in reference else ""


class ActionSteps:
    """Runs the job's action steps (see the module docstring)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.ran: dict[tuple[str, ...], Ran] = {}
        #: State the pre scripts saved, for their main and post scripts.
        self.pre_state: dict[tuple[str, ...], dict[str, str]] = {}
        #: The step whose log the running action writes to.
        self._log = ""

    def _action(self, step: AssignmentStep) -> Action:
        action = self.host.assignment.actions.get(step.action)
        if action is None:
            raise ActionFailed(f"step {step.id}: action {step.action!r} is not in the assignment")
        return action

    def _prepare(
        self, step: AssignmentStep, contexts: dict[str, Any], where: str
    ) -> tuple[Action, str, dict[str, str], dict[str, str], dict[str, str], dict[str, str]]:
        """The action, its folder, its inputs, the step env and secrets, the action env."""
        action = self._action(step)
        try:
            directory = self.host.trees.directory(action)
        except ActionUnavailable as exc:
            raise ActionFailed(str(exc)) from None
        env, secrets = self.host.step_env(step, contexts)
        try:
            # with: values may read secrets.NAME: the values just delivered to this step.
            inputs = build_inputs(action, step.inputs, with_secrets(step, secrets, contexts), where)
        except (InputError, StepSetupError) as exc:
            raise ActionFailed(str(exc)) from None
        for warning in inputs.warnings:
            self.host.scripts.uploader.write(self._log, "stderr", f"##[warning]{warning}\n")
        extra = {
            **inputs.environment(),
            "GITHUB_ACTION": step.id,
            "GITHUB_ACTION_PATH": directory,
            "GITHUB_ACTION_REPOSITORY": action.repository,
            "GITHUB_ACTION_REF": _ref(action.reference),
        }
        return action, directory, inputs.context(), env, secrets, extra

    # -- main ------------------------------------------------------------------------------------

    def run(
        self,
        step: AssignmentStep,
        contexts: dict[str, Any],
        log_id: str,
        path: tuple[str, ...] = (),
    ) -> tuple[str, int, dict[str, str]]:
        """Run the action of ``step``: its outcome, exit status and outputs."""
        self._log = log_id
        path = (*path, step.id)
        where = f"step {'/'.join(path)} ({step.uses})"
        action, directory, inputs, env, secrets, extra = self._prepare(step, contexts, where)
        runs = action.metadata.runs
        if runs.composite:
            if len(path) > MAX_NESTING:
                raise ActionFailed(f"{where}: composite actions nest more than {MAX_NESTING} deep")
            return self._composite(action, directory, inputs, contexts, env, log_id, path)
        state = self.pre_state.get(path, {})
        extra.update(_state_env(state))
        result = self._node(directory, runs.main, env, secrets, extra, log_id, where)
        state = {**state, **result.state}
        self.ran[path] = Ran(action, directory, env, secrets, extra, state)
        if runs.post:
            # Its post step must still fit when the job reaches its time limit.
            self.host.watchdog.reserve(POST_GRACE)
        outputs = dict(result.outputs)
        outcome = "success" if result.exit_code == 0 else "failure"
        return outcome, result.exit_code, outputs

    def _node(
        self,
        directory: str,
        script: str,
        env: dict[str, str],
        secrets: dict[str, str],
        extra: dict[str, str],
        log_id: str,
        where: str,
    ) -> Any:
        target = os.path.join(directory, script)
        if not os.path.isfile(target):
            raise ActionFailed(f"{where}: the action has no file {script!r}")
        if "NODE_COMPILE_CACHE" not in env:  # the step's own env wins
            extra = {**self.host.trees.compile_cache.environment(target), **extra}
        try:
            return self.host.scripts.run(
                log_id, ["node", target], env, secrets, self.host.directory(""), extra
            )
        except ProcessFailed as exc:
            raise ActionFailed(f"{where}: {exc}") from None

    def _composite(
        self,
        action: Action,
        directory: str,
        inputs: dict[str, str],
        outer: dict[str, Any],
        outer_env: dict[str, str],
        log_id: str,
        path: tuple[str, ...],
    ) -> tuple[str, int, dict[str, str]]:
        local: dict[str, dict[str, Any]] = {}
        failed = False

        def contexts() -> dict[str, Any]:
            return {**outer, "inputs": inputs, "steps": local}

        for inner in action.metadata.runs.steps:
            if self.host.watchdog.halted():
                return "cancelled", -1, {}
            where = f"step {'/'.join((*path, inner.id))}"
            status = "failure" if (failed or self.host.failed) else "success"
            if self.host.watchdog.stopped.is_set():
                status = "cancelled"  # running in the clean-up window after a stop
            try:
                runs = condition_holds(inner.condition, contexts(), status, f"{where}: if")
                forgive = continues_on_error(
                    inner.continue_on_error, contexts(), f"{where}: continue-on-error"
                )
            except EvaluationError as exc:
                raise ActionFailed(str(exc)) from None
            if not runs:
                local[inner.id] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
                continue
            outcome, outputs = self._inner(inner, contexts(), outer_env, directory, log_id, path)
            conclusion = "success" if forgive and outcome == "failure" else outcome
            if conclusion == "failure":
                failed = True
            local[inner.id] = {"outputs": outputs, "outcome": outcome, "conclusion": conclusion}
        results: dict[str, str] = {}
        for name, value in action.metadata.outputs.items():
            try:
                results[name] = "" if value is None else render(value, contexts(), f"output {name}")
            except EvaluationError as exc:
                raise ActionFailed(f"{action.reference}: {exc}") from None
        return ("failure" if failed else "success"), (1 if failed else 0), results

    def _inner(
        self,
        inner: AssignmentStep,
        contexts: dict[str, Any],
        outer_env: dict[str, str],
        directory: str,
        log_id: str,
        path: tuple[str, ...],
    ) -> tuple[str, dict[str, str]]:
        where = f"step {'/'.join((*path, inner.id))}"
        if inner.uses == CHECKOUT:
            raise ActionFailed(f"{where}: the built-in checkout cannot run inside an action")
        if inner.is_action:
            try:
                outcome, _, outputs = self.run(inner, contexts, log_id, path)
            except ActionFailed as exc:
                self.host.scripts.note(log_id, str(exc))
                return "failure", {}
            finally:
                self._log = log_id
            return outcome, outputs
        try:
            script = render(inner.run, contexts, f"{where}: run")
            env, secrets = self.host.step_env(inner, contexts)
            directory_text = render(
                inner.working_directory, contexts, f"{where}: working-directory"
            )
            cwd = self.host.directory(directory_text)
        except EvaluationError as exc:
            self.host.scripts.note(log_id, str(exc))
            return "failure", {}
        extra = {"GITHUB_ACTION_PATH": directory, "GITHUB_ACTION": inner.id}
        try:
            result = self.host.scripts.run(
                log_id, (inner.shell, script), {**outer_env, **env}, secrets, cwd, extra
            )
        except ProcessFailed as exc:
            self.host.scripts.note(log_id, f"{where}: {exc}")
            return "failure", {}
        if result.exit_code != 0:
            self.host.scripts.note(log_id, f"{where} failed with exit status {result.exit_code}")
        return ("success" if result.exit_code == 0 else "failure"), result.outputs

    # -- pre and post ----------------------------------------------------------------------------

    def hook(
        self, hook: HookStep, contexts: dict[str, Any], job_status: str
    ) -> Callable[[], int] | None:
        """The work of a pre or post step, or None when it is skipped (main never ran, or its
        condition is false). The callable returns the exit status."""
        if hook.kind == "post":
            ran = self.ran.get(hook.path)
            if ran is None:
                return None
            runs = ran.action.metadata.runs
            condition = runs.post_if or "always()"
        else:
            step = self._top_step(hook.path[0])
            action = self._action(step)
            runs = action.metadata.runs
            condition = runs.pre_if or "always()"
        try:
            holds = condition_holds(condition, contexts, job_status, f"{hook.id}: if")
        except EvaluationError as exc:
            raise ActionFailed(str(exc)) from None
        if not holds:
            return None
        return lambda: self._run_hook(hook, contexts)

    def _top_step(self, step_id: str) -> AssignmentStep:
        for step in self.host.assignment.steps:
            if step.id == step_id:
                return step
        raise ActionFailed(f"{step_id}: no such step")

    def _run_hook(self, hook: HookStep, contexts: dict[str, Any]) -> int:
        self._log = hook.id
        where = f"{hook.id}"
        if hook.kind == "post":
            ran = self.ran[hook.path]
            extra = {**ran.extra, **_state_env(ran.state)}
            script = ran.action.metadata.runs.post
            result = self._node(ran.directory, script, ran.env, ran.secrets, extra, hook.id, where)
            return int(result.exit_code)
        step = self._top_step(hook.path[0])
        action, directory, _, env, secrets, extra = self._prepare(step, contexts, where)
        result = self._node(
            directory, action.metadata.runs.pre, env, secrets, extra, hook.id, where
        )
        self.pre_state[hook.path] = dict(result.state)
        return int(result.exit_code)
