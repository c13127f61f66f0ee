"""``parse_workflow``: one workflow file in, a checked :class:`Workflow` (or every problem) out.

The stages, each reporting into the same :class:`Problems`:

    text --decode--> str --load--> located YAML tree --check keys--> triggers, env, defaults,
    concurrency, permissions, jobs (matrix instances, steps, expressions) --graph--> DAG
    --limits--> expanded jobs and steps --plan--> normalized plan (size limit)

A workflow that comes back from ``parse_workflow`` always has a plan: the plan is built as the last
check, so ``build_plan`` cannot fail later.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from forge_ci.records import field, record
from forge_ci.workflow.defaults import RunDefaults, parse_run_defaults
from forge_ci.workflow.diagnostics import Diagnostic, Problems
from forge_ci.workflow.env import EnvValue, parse_env
from forge_ci.workflow.graph import check_cycles
from forge_ci.workflow.jobs import Job, parse_job
from forge_ci.workflow.loader import decode, load
from forge_ci.workflow.nodes import Mapping, Node, Scalar, describe
from forge_ci.workflow.permissions import parse_permissions
from forge_ci.workflow.plan import PlanBuilder
from forge_ci.workflow.render import render
from forge_ci.workflow.steps import id_problem
from forge_ci.workflow.templates import ExpressionChecker, Scope, Template
from forge_ci.workflow.triggers import Triggers, parse_triggers
from forge_ci.workflow.values import boolean, string

MAX_JOBS = 16
MAX_EXPANDED_JOBS = 256
MAX_EXPANDED_STEPS = 4096
TOP_KEYS = ("name", "run-name", "on", "env", "defaults", "jobs", "concurrency", "permissions")
UNSUPPORTED_TOP_KEYS: dict[str, str] = {}
_WORKFLOW_ENV = frozenset({"github", "inputs", "vars"})


@record(frozen=True)
class Concurrency:
    """Workflow ``concurrency``: runs with the same group wait (or cancel earlier ones)."""

    group: Template
    #: A literal, or one ``${{ }}`` over github/inputs/vars, evaluated at run creation.
    cancel_in_progress: bool | Template


@record(frozen=True)
class Workflow:
    """A checked workflow file: its source, its triggers, its parsed parts and its plan."""

    path: str
    source: str
    name: str | None
    triggers: Triggers
    concurrency: Concurrency | None
    env: dict[str, EnvValue]
    defaults: RunDefaults
    contents: str | None
    jobs: tuple[Job, ...]
    document: Mapping = field(repr=False)
    #: The normalized plan as canonical JSON (``build_plan`` decodes it).
    plan_json: bytes = field(repr=False, compare=False)
    #: What the file asks for that forge-ci accepts and does not do (also in the plan).
    notices: tuple[Diagnostic, ...] = ()


def build_plan(workflow: Workflow) -> dict[str, Any]:
    """The normalized plan of a parsed workflow (a fresh copy the caller may keep).

    The plan was built and measured while parsing (:class:`forge_ci.workflow.plan.PlanBuilder`)
    and is kept as its canonical JSON, so this is a JSON decode, which is also the cheapest deep
    copy. It lives here, beside ``Workflow``, so that the plan module needs nothing of the parser.
    """
    plan: dict[str, Any] = json.loads(workflow.plan_json)
    return plan


def workflow_plan_digest(workflow: Workflow) -> str:
    """``plan_digest(build_plan(workflow))`` without decoding the plan first.

    The plan is kept as its canonical JSON, and canonical JSON decodes and re-encodes to the same
    bytes (a property test holds it to that), so its SHA-256 is the digest.
    """
    return hashlib.sha256(workflow.plan_json).hexdigest()


def parse_workflow(text: str | bytes, path: str = "<workflow>") -> Workflow:
    """Check a workflow file and return it; raises ``WorkflowInvalid`` with every problem.

    Called by push-event processing (one call per workflow file at the pushed commit), by run
    creation and by ``forge-ci workflow validate``. Pure: it reads only ``text``.
    """
    problems = Problems()
    source = decode(text, problems)
    root = load(source, problems) if source is not None else None
    if source is None or root is None:
        problems.raise_if_any(path)
        raise AssertionError("unreachable: loading failed without a problem")
    if not isinstance(root, Mapping):
        problems.at(root, f"a workflow must be a mapping with on and jobs, not {describe(root)}")
        problems.raise_if_any(path)
    assert isinstance(root, Mapping)
    checker = ExpressionChecker(source, problems)
    for key, _ in root.items:
        if key.value in UNSUPPORTED_TOP_KEYS:
            problems.at(key, UNSUPPORTED_TOP_KEYS[key.value])
        elif key.value not in TOP_KEYS:
            problems.at(
                key, f"'{key.value}' is not a workflow key{problems.hint(key.value, TOP_KEYS)}"
            )
    for required in ("on", "jobs"):
        if required not in root:
            problems.at(root, f"the workflow needs '{required}'")
    name = _name(root.get("name"), checker, problems)
    if "run-name" in root:
        run_name = string(root["run-name"], "run-name", problems)
        if run_name is not None:
            problems.notice(run_name, "run-name is not used; runs are named after the workflow")
    triggers = parse_triggers(root["on"], problems) if "on" in root else Triggers()
    env: dict[str, EnvValue] = {}
    if "env" in root:
        scope = Scope("workflow env", _WORKFLOW_ENV, whole_secret=True, any_secret=True)
        env = parse_env(root["env"], scope, checker, problems)
    defaults = RunDefaults()
    if "defaults" in root:
        defaults = parse_run_defaults(root["defaults"], "defaults", checker, problems)
    concurrency = (
        _concurrency(root["concurrency"], checker, problems) if "concurrency" in root else None
    )
    contents = parse_permissions(root["permissions"], problems) if "permissions" in root else None
    jobs = _jobs(root["jobs"], checker, problems) if "jobs" in root else []
    for job in jobs:
        _check_source_access(job, contents, problems)
    # The plan is built even when problems were found: its checks (values of matrix expressions,
    # the plan's size) are independent of them, and every problem is reported in one pass.
    builder = PlanBuilder(problems)
    rendered_concurrency = None
    if concurrency is not None:
        group = render(concurrency.group, {}, lambda t, m: problems.at(t.node, m))
        cancel = concurrency.cancel_in_progress
        whole = cancel.whole if isinstance(cancel, Template) else None
        rendered_concurrency = {
            "group": group,
            "cancel_in_progress": {"expr": whole.source.strip()} if whole else cancel is True,
        }
    plan = builder.build(
        name,
        triggers.as_plan(),
        rendered_concurrency,
        env,
        defaults,
        contents,
        jobs,
        problems.notices(),
    )
    problems.raise_if_any(path)
    return Workflow(
        path,
        source.text,
        name,
        triggers,
        concurrency,
        env,
        defaults,
        contents,
        tuple(jobs),
        root,
        plan,
        problems.notices(),
    )


def _name(node: Node | None, checker: ExpressionChecker, problems: Problems) -> str | None:
    if node is None:
        return None
    scalar = string(node, "the workflow name", problems)
    return checker.literal(scalar, "the workflow name") if scalar is not None else None


def _concurrency(node: Node, checker: ExpressionChecker, problems: Problems) -> Concurrency | None:
    scope = Scope("concurrency.group", frozenset({"github", "inputs", "vars"}))
    group_node: Node | None = node
    cancel: bool | Template = False
    if isinstance(node, Mapping):
        group_node = node.get("group")
        for key, value in node.items:
            if key.value == "cancel-in-progress":
                cancel = _cancel_in_progress(value, scope, checker, problems)
            elif key.value != "group":
                choices = ("group", "cancel-in-progress")
                problems.at(
                    key,
                    f"'{key.value}' is not a concurrency key{problems.hint(key.value, choices)}",
                )
    if group_node is None:
        problems.at(node, "concurrency needs a group")
        return None
    scalar = string(group_node, "concurrency.group", problems)
    template = checker.template(scalar, scope) if scalar is not None else None
    if template is None or scalar is None:
        return None
    if not scalar.value.strip():
        problems.at(scalar, "concurrency.group must not be empty")
        return None
    return Concurrency(template, cancel)


def _cancel_in_progress(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> bool | Template:
    """``cancel-in-progress``: true, false or one ``${{ }}`` (evaluated at run creation)."""
    if isinstance(node, Scalar) and "${{" in node.value:
        template = checker.template(node, scope.narrowed("cancel-in-progress", scope.contexts))
        if template is not None and template.whole is None:
            problems.at(node, "cancel-in-progress must be true, false or one ${{ }} expression")
            return False
        return template if template is not None else False
    return bool(boolean(node, "cancel-in-progress", problems))


def _jobs(node: Node, checker: ExpressionChecker, problems: Problems) -> list[Job]:
    if not isinstance(node, Mapping):
        problems.at(node, f"jobs must be a mapping of job ids to jobs, not {describe(node)}")
        return []
    if not node.items:
        problems.at(node, "jobs must define at least one job")
        return []
    if len(node.items) > MAX_JOBS:
        problems.at(node.items[MAX_JOBS][0], f"a workflow has at most {MAX_JOBS} jobs")
    known: dict[str, str] = {}
    first: dict[str, Scalar] = {}
    for key, _ in node.items:
        problem = id_problem(key.value)
        lowered = key.value.lower()
        if problem:
            problems.at(key, problem.replace("the id", "the job id"))
        elif lowered in first:
            problems.at(
                key,
                f"the job id '{key.value}' is already used (line "
                f"{first[lowered].line}); job ids are compared without regard to case",
            )
        else:
            first[lowered] = key
            known[lowered] = key.value
    jobs: list[Job] = []
    for key, value in node.items[:MAX_JOBS]:
        job = parse_job(key, value, known, checker, problems)
        # A job whose id is refused is still checked (its problems are independent), but it
        # takes no part in the graph.
        if job is not None and first.get(key.value.lower()) is key:
            jobs.append(job)
    needs = {job.id: list(job.needs) for job in jobs}
    if jobs and len(jobs) == len(known) and all(job.needs for job in jobs):
        problems.at(jobs[0].key_node, "every job needs another job, so no job can start")
    check_cycles([job.id for job in jobs], needs, problems)
    instances = sum(len(job.instances) for job in jobs)
    if instances > MAX_EXPANDED_JOBS:
        problems.at(
            node, f"the jobs expand to {instances} job instances; the limit is {MAX_EXPANDED_JOBS}"
        )
    steps = sum(len(job.instances) * len(job.steps) for job in jobs)
    if steps > MAX_EXPANDED_STEPS:
        problems.at(node, f"the jobs expand to {steps} steps; the limit is {MAX_EXPANDED_STEPS}")
    return jobs


def _check_source_access(job: Job, workflow_contents: str | None, problems: Problems) -> None:
    contents = job.contents or workflow_contents or "read"
    if contents != "none":
        return
    for step in job.steps:
        if step.uses is not None:
            where = step.node.get("uses") or step.node
            problems.at(
                where,
                f"job '{job.id}' has permissions contents: none, so it cannot check out the source",
            )
        elif step.action is not None and step.action.startswith("."):
            where = step.node.get("uses") or step.node
            problems.at(
                where,
                f"job '{job.id}' has permissions contents: none, so it cannot use the local "
                f"action {step.action} (it is read from the source)",
            )
