"""One process of a step, start to end: its files, its environment, its output, its effects.

A ``run`` step is one process; a node action's ``pre``, ``main`` and ``post`` are one each; a
composite action runs one per ``run`` step inside it. Each gets fresh file-command files, the
job's environment (with what earlier processes added through ``GITHUB_ENV``/``GITHUB_PATH``),
the step's own variables, and writes its output through a
:class:`~worker.runner.actions.sink.StepSink` into the log of the step being reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forge_ci.protocol import MAX_SUMMARY_BYTES, Annotation
from worker.runner.actions.sink import CommandEffects, StepSink
from worker.runner.environment import Layout, StepEnvironmentError, step_environment
from worker.runner.filecommands import CommandFiles, FileCommandError
from worker.runner.shells import ShellError, script_suffix, shell_argv, write_script
from worker.runner.steps import StepStartError, run_script
from worker.runner.uploader import Uploader
from worker.runner.watchdog import Watchdog


class ProcessFailed(Exception):
    """The process could not be started; the message says why."""


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int
    #: ``GITHUB_OUTPUT`` and ``::set-output``; ``GITHUB_STATE`` and ``::save-state``.
    outputs: dict[str, str]
    state: dict[str, str]


@dataclass
class StepEffects:
    """What the processes of the reported step left for its report."""

    commands: CommandEffects = field(default_factory=CommandEffects)
    summary: list[str] = field(default_factory=list)

    def annotations(self) -> list[Annotation]:
        return list(self.commands.annotations)

    def summary_text(self) -> tuple[str, bool]:
        """The summary within the wire's limit, and whether it had to be cut."""
        text = "".join(self.summary)
        data = text.encode("utf-8")
        if len(data) <= MAX_SUMMARY_BYTES:
            return text, False
        return data[: MAX_SUMMARY_BYTES - 64].decode("utf-8", "ignore"), True


class ScriptRunner:
    """Runs the job's processes; keeps what they add to the environment of later ones."""

    def __init__(self, layout: Layout, uploader: Uploader, watchdog: Watchdog) -> None:
        self.layout = layout
        self.uploader = uploader
        self.watchdog = watchdog
        self.job_env: dict[str, str] = {}
        self.added_env: dict[str, str] = {}
        self.path_entries: list[str] = []
        self.effects = StepEffects()
        self._number = 0

    def note(self, step_id: str, message: str) -> None:
        self.uploader.write(step_id, "stderr", f"forge-ci: {message}\n")

    def run(
        self,
        log_id: str,
        command: list[str] | tuple[str, str],
        env: dict[str, str],
        secrets: dict[str, str],
        cwd: str,
        extra_env: dict[str, str] | None = None,
    ) -> ProcessResult:
        """Run ``command`` (argv, or ``(shell, script)``) with the step's ``env``."""
        self._number += 1
        number = self._number
        files = CommandFiles(self.layout.runner_dir, number)
        files.create()
        effects = CommandEffects()
        try:
            full_env = step_environment(
                self.job_env, self.path_entries, self.added_env, env, secrets, files, log_id
            )
            full_env.update(extra_env or {})
            if isinstance(command, tuple):
                shell, script = command
                path = write_script(self.layout.runner_dir, number, script, script_suffix(shell))
                argv = shell_argv(shell, path)
            else:
                argv = command
            sink = StepSink(self.uploader, log_id, effects)
            try:
                end = run_script(argv, full_env, cwd, log_id, self.watchdog, sink)
            finally:
                sink.close()
        except (StepEnvironmentError, ShellError, StepStartError) as exc:
            files.remove()
            raise ProcessFailed(str(exc)) from None
        self._keep(effects)
        if end.signal and not self.watchdog.step_expired():
            self.note(log_id, f"the process was ended by signal {end.signal}")
        if self.watchdog.halted():
            files.remove()
            return ProcessResult(end.exit_code, {}, {})
        try:
            updates = files.read()
        except FileCommandError as exc:
            self.note(log_id, str(exc))
            return ProcessResult(end.exit_code or 1, {}, {})
        finally:
            files.remove()
        self.added_env.update(updates.env)
        self.path_entries.extend(updates.path)
        if updates.summary:
            self.effects.summary.append(updates.summary)
        return ProcessResult(
            end.exit_code,
            {**effects.outputs, **updates.outputs},
            {**effects.state, **updates.state},
        )

    def _keep(self, effects: CommandEffects) -> None:
        for item in effects.annotations:
            self.effects.commands.annotate(item)
        for level, count in effects.dropped.items():
            dropped = self.effects.commands.dropped
            dropped[level] = dropped.get(level, 0) + count
        self.effects.commands.notices |= effects.notices

    def take_effects(self) -> StepEffects:
        """The effects of the step that just ended (the next step starts with none)."""
        effects, self.effects = self.effects, StepEffects()
        return effects
