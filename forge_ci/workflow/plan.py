"""The normalized plan: what a run executes, as deterministic JSON.

The plan is what run creation stores (next to the YAML and the resolved context) and what reruns
copy; its digest identifies it. Defaults and precedence are already applied, so nothing
downstream needs the YAML again:

    {"version": 1, "name": ..., "on": {...}, "concurrency": null | {...},
     "jobs": [                                   one entry per job instance, in file order
       {"key": "build (linux, 3.11)", "id": "build", "name": ..., "needs": ["lint"],
        "if": "success()", "runs_on": [...], "timeout_minutes": 360,
        "permissions": {"contents": "read"}, "matrix": {...} | null, "strategy": {...} | null,
        "outputs": {...},
        "steps": [{"id": "step_1", "generated_id": true, "name": ..., "uses": null,
                   "run": ..., "shell": null, "working_directory": null,
                   "env": {NAME: text | {"template": [...]} | {"secret": NAME}},
                   "if": "success()", "continue_on_error": false, "timeout_minutes": null}]}],
     "notices": [{"line": 4, "column": 3, "message": "release never fires on forge-ci"}]}

Keys that most files do not need are written only when set, so that a file which does not use
them keeps its plan digest: ``notices`` (what is accepted and not done), and per job
``continue_on_error`` (true, or ``{"expr": ...}`` decided when the job ends) and
``environment`` (``{"name": ..., "url": ...}``).

An action step has ``"uses"`` (the reference as written), ``"with"`` (input -> value) and no
``run``/``shell``/``working_directory``; the checkout's ``"with"`` holds its normalized inputs
(:mod:`forge_ci.workflow.checkout`, every key present); run steps have no ``"with"``.

A job instance waits for every instance of each job id in ``needs``. Env is merged per step
(workflow < job < step), and shell and working directory are resolved the same way. Secrets
appear by name only: a whole env value is ``{"secret": NAME}``; a runtime template that reads
``secrets.NAME`` (in env, run or with) keeps the expression, and the step's env gets the holder
``_FORGE_CI_EXPR_SECRET_NAME: {"secret": NAME}`` so that the value is delivered for it.
``github.*`` references are still templates here; ``resolve_run_context``
fills them in at run creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge_ci.workflow.canonical import canonical_json, digest
from forge_ci.workflow.checkout import normalize_path, path_problem
from forge_ci.workflow.defaults import (
    RunDefaults,
    is_posix_shell,
    normal_directory,
    working_directory_problem,
)
from forge_ci.workflow.diagnostics import Diagnostic, Problems
from forge_ci.workflow.env import EnvValue
from forge_ci.workflow.expressions import ExpressionError
from forge_ci.workflow.injection import protect_script, secret_holders, template_secrets
from forge_ci.workflow.jobs import DEFAULT_TIMEOUT_MINUTES, Instance, Job
from forge_ci.workflow.render import PlanValue, render, render_env, static_value
from forge_ci.workflow.steps import CHECKOUT, Step
from forge_ci.workflow.templates import Expr, Template
from forge_ci.workflow.values import MAX_TIMEOUT_MINUTES

PLAN_VERSION = 1
MAX_PLAN_BYTES = 1024 * 1024
MAX_DEFAULT_NAME = 100


def plan_digest(plan: Mapping[str, Any]) -> str:
    """SHA-256 hex of the plan's canonical JSON (RFC 8785: sorted keys, no whitespace, UTF-8)."""
    return digest(plan)


def plan_bytes(plan: Mapping[str, Any]) -> bytes:
    """The canonical JSON of a plan, as stored and measured against the 1 MiB limit."""
    return canonical_json(plan)


class PlanBuilder:
    """Renders checked workflow parts into the plan, reporting evaluation problems."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def _report(self, template: Template, message: str) -> None:
        self.problems.at(template.node, message)

    def build(
        self,
        name: str | None,
        triggers: dict[str, Any],
        concurrency: dict[str, Any] | None,
        env: dict[str, EnvValue],
        defaults: RunDefaults,
        contents: str | None,
        jobs: list[Job],
        notices: tuple[Diagnostic, ...] = (),
    ) -> bytes:
        """The plan as canonical JSON; the caller checks ``problems`` afterwards."""
        rendered_jobs: list[dict[str, Any]] = []
        for job in jobs:
            for instance in job.instances:
                rendered_jobs.append(
                    self._instance(job, instance, env, defaults, contents or "read")
                )
        plan = {
            "version": PLAN_VERSION,
            "name": name,
            "on": triggers,
            "concurrency": concurrency,
            "jobs": rendered_jobs,
        }
        if notices:
            plan["notices"] = [notice.as_dict() for notice in notices]
        encoded = plan_bytes(plan)
        if len(encoded) > MAX_PLAN_BYTES:
            self.problems.add(
                1,
                1,
                f"the normalized plan is {len(encoded)} bytes; the limit is {MAX_PLAN_BYTES} "
                "(1 MiB)",
            )
        return encoded

    def _instance(
        self,
        job: Job,
        instance: Instance,
        workflow_env: dict[str, EnvValue],
        workflow_defaults: RunDefaults,
        contents: str,
    ) -> dict[str, Any]:
        contexts = instance.contexts
        base_env = render_env(workflow_env, contexts, self._report)
        base_env.update(render_env(job.env, contexts, self._report))
        defaults = workflow_defaults.under(job.defaults)
        outputs = {name: render(t, contexts, self._report) for name, t in job.outputs.items()}
        entry: dict[str, Any] = {
            "key": instance.key,
            "id": job.id,
            "name": instance.name,
            "needs": [name for name, _ in job.needs],
            "if": job.condition,
            "runs_on": list(instance.runs_on),
            "timeout_minutes": self._timeout(job.timeout_minutes, contexts),
            "permissions": {"contents": job.contents or contents},
            "matrix": instance.matrix,
            "strategy": instance.strategy if job.strategy is not None else None,
            "outputs": outputs,
            "steps": [self._step(step, contexts, base_env, defaults) for step in job.steps],
        }
        if job.continue_on_error is not False:
            forgive = self._continue_on_error(job.continue_on_error, contexts)
            if forgive is not False:
                entry["continue_on_error"] = forgive
        if job.environment is not None:
            url = job.environment.url
            entry["environment"] = {
                "name": render(job.environment.name, contexts, self._report),
                "url": render(url, contexts, self._report) if url is not None else None,
            }
        return entry

    def _step(
        self,
        step: Step,
        contexts: Mapping[str, Any],
        base_env: dict[str, PlanValue],
        defaults: RunDefaults,
    ) -> dict[str, Any]:
        name = render(step.name, contexts, self._report) if step.name is not None else None
        if step.uses is not None:
            path = step.checkout_inputs.get("path")
            reads_env = isinstance(path, Template) and any(
                isinstance(part, Expr) and "env" in part.contexts for part in path.parts
            )
            return {
                "id": step.id,
                "generated_id": step.generated_id,
                "name": name if name is not None else "Checkout",
                "uses": CHECKOUT,
                "with": {
                    key: self._checkout_input(value, contexts)
                    for key, value in step.checkout_inputs.items()
                },
                "run": None,
                "shell": None,
                "working_directory": None,
                # The env context of a with.path that reads it: the job's env, without secrets.
                "env": _without_secrets(base_env) if reads_env else {},
                "if": step.condition,
                "continue_on_error": False,
                "timeout_minutes": step.timeout_minutes,
            }
        env = dict(base_env)
        env.update(render_env(step.env, contexts, self._report))
        if step.action is not None:
            inputs = {
                key: render(value, contexts, self._report)
                for key, value in (step.inputs or {}).items()
            }
            env.update(secret_holders(env, inputs))
            return {
                "id": step.id,
                "generated_id": step.generated_id,
                "name": name if name is not None else f"Run {step.action}",
                "uses": step.action,
                "with": inputs,
                "run": None,
                "shell": None,
                "working_directory": None,
                "env": env,
                "if": step.condition,
                "continue_on_error": self._continue_on_error(step.continue_on_error, contexts),
                "timeout_minutes": step.timeout_minutes,
            }
        assert step.run is not None
        run, generated = protect_script(render(step.run, contexts, self._report))
        env.update(generated)
        env.update(secret_holders(env))
        resolved = defaults.under(RunDefaults(step.shell, step.working_directory))
        if generated and not is_posix_shell(resolved.shell):
            self._report(
                step.run,
                f"run: shell {resolved.shell} cannot read the values forge-ci passes as "
                "variables (untrusted contexts and secrets); give them to the script through "
                "env and read them from the environment",
            )
        return {
            "id": step.id,
            "generated_id": step.generated_id,
            "name": name if name is not None else _default_name(step.run),
            "uses": None,
            "run": run,
            "shell": resolved.shell,
            "working_directory": self._directory(resolved.working_directory, contexts),
            "env": env,
            "if": step.condition,
            "continue_on_error": self._continue_on_error(step.continue_on_error, contexts),
            "timeout_minutes": step.timeout_minutes,
        }

    def _directory(
        self, value: str | Template | None, contexts: Mapping[str, Any]
    ) -> PlanValue | None:
        if value is None or isinstance(value, str):
            return value
        rendered = render(value, contexts, self._report)
        if rendered == "":
            return None  # empty once the matrix is in (GitHub: the default, the workspace)
        if isinstance(rendered, str):
            problem = working_directory_problem(rendered)
            if problem:
                self._report(value, problem)
                return rendered
            return normal_directory(rendered)
        return rendered

    def _timeout(self, value: int | Template, contexts: Mapping[str, Any]) -> int:
        """A job's timeout for one instance: its expression evaluated over the matrix."""
        if isinstance(value, int):
            return value
        whole = value.whole
        assert whole is not None  # jobs.py accepts only one whole expression
        try:
            result = static_value(whole, contexts)
        except ExpressionError as exc:
            self._report(value, f"cannot evaluate timeout-minutes: {exc.message}")
            return DEFAULT_TIMEOUT_MINUTES
        if isinstance(result, float) and result.is_integer():
            result = int(result)  # expression numbers are floats: 60.0 is 60
        text = str(result).strip() if isinstance(result, str | int) else ""
        minutes = int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else 0
        if isinstance(result, bool) or not 1 <= minutes <= MAX_TIMEOUT_MINUTES:
            self._report(
                value,
                f"timeout-minutes ${{{{ {whole.source.strip()} }}}} is {result!r} here; it must "
                f"be a whole number of minutes from 1 through {MAX_TIMEOUT_MINUTES}",
            )
            return DEFAULT_TIMEOUT_MINUTES
        return minutes

    def _checkout_input(self, value: str | Template, contexts: Mapping[str, Any]) -> PlanValue:
        """A checkout input: text, or ``with.path`` with the matrix filled in (checked when no
        runtime part is left; the runner checks the rest)."""
        if isinstance(value, str):
            return value
        rendered = render(value, contexts, self._report)
        if isinstance(rendered, str):
            problem = path_problem(rendered)
            if problem:
                self._report(value, f"with.path: {problem}")
            return normalize_path(rendered)
        return rendered

    def _continue_on_error(
        self, value: bool | Template, contexts: Mapping[str, Any]
    ) -> bool | dict[str, str]:
        if isinstance(value, bool):
            return value
        whole = value.whole
        assert whole is not None  # steps.py accepts only one whole expression
        if not whole.static:
            return {"expr": whole.source.strip()}
        try:
            result = static_value(whole, contexts)
        except ExpressionError as exc:
            self._report(value, f"cannot evaluate continue-on-error: {exc.message}")
            return False
        return truthy(result)


def truthy(value: Any) -> bool:
    """GitHub's truthiness: null, false, 0, NaN and '' are false; everything else is true."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == value and value != 0
    if isinstance(value, str):
        return value != ""
    return True


def _default_name(run: Template) -> str:
    """GitHub's default step name: "Run " and the first non-blank line of the script."""
    # Lines end at line feeds only: splitlines() would also end them at U+2028, U+0085 and
    # form feeds, which a double-quoted run may hold as escapes.
    lines = run.node.value.replace("\r\n", "\n").split("\n")
    first = next((line.strip() for line in lines if line.strip()), "")
    name = f"Run {first}"
    return name if len(name) <= MAX_DEFAULT_NAME else name[: MAX_DEFAULT_NAME - 3] + "..."


def _without_secrets(env: dict[str, PlanValue]) -> dict[str, PlanValue]:
    """``env`` without the entries that are, or read, secrets."""
    kept: dict[str, PlanValue] = {}
    for name, value in env.items():
        if isinstance(value, dict) and "secret" in value:
            continue
        parts = value.get("template", []) if isinstance(value, dict) else []
        if any(isinstance(p, dict) and template_secrets(str(p.get("expr"))) for p in parts):
            continue
        kept[name] = value
    return kept
