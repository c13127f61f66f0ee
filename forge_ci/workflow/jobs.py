"""Jobs: their keys, their matrix instances and what each instance runs on.

A job with a matrix becomes one *instance* per combination; each instance has a stable ``key``
made of the job id and the combination's values (``build (linux, 3.11)``), its display name, its
matrix and strategy contexts, and its normalised runner labels. Everything that depends on the
matrix and decides scheduling (labels, names) is resolved here, so that an instance that could
never run is a located error when the file is parsed, not a job stuck in the queue.
"""

from __future__ import annotations

import json
from typing import Any

from forge_ci.records import record
from forge_ci.workflow.defaults import RunDefaults, parse_run_defaults
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.env import EnvValue, parse_env
from forge_ci.workflow.expressions import ExpressionError
from forge_ci.workflow.labels import normalize_labels, other_os
from forge_ci.workflow.matrix import Strategy, parse_strategy
from forge_ci.workflow.nodes import (
    Mapping,
    Node,
    Scalar,
    Sequence,
    describe,
    is_null,
    scalar_type,
)
from forge_ci.workflow.permissions import parse_permissions
from forge_ci.workflow.render import render, static_value, strategy_context, to_text
from forge_ci.workflow.steps import Step, id_problem, parse_steps, written_step_ids
from forge_ci.workflow.templates import ANY_MATRIX_KEY, ExpressionChecker, Scope, Template
from forge_ci.workflow.values import boolean, distinct_keys, string, timeout_minutes

#: The runner protocol carries at most this many job outputs (``forge_ci.protocol.MAX_OUTPUTS``,
#: which the runner may not import from here): a plan must never promise more.
MAX_JOB_OUTPUTS = 64

DEFAULT_TIMEOUT_MINUTES = 360
JOB_KEYS = (
    "name",
    "needs",
    "runs-on",
    "env",
    "defaults",
    "timeout-minutes",
    "if",
    "outputs",
    "strategy",
    "continue-on-error",
    "permissions",
    "environment",
    "steps",
)
#: GitHub job keys outside the subset, with the reason given to the author.
UNSUPPORTED_JOB_KEYS = {
    "container": "job containers are not supported; every job runs in the provider's container",
    "services": "service containers are not supported",
    "concurrency": "job-level concurrency is not supported; use the workflow's concurrency",
    "uses": "reusable workflows (jobs.<id>.uses) are not supported",
    "with": "reusable workflows (jobs.<id>.with) are not supported",
    "secrets": "reusable workflows (jobs.<id>.secrets) are not supported",
    "cancel-timeout-minutes": "cancel-timeout-minutes is not supported",
    "snapshot": "custom image snapshots are not supported",
}
_JOB_IF = frozenset({"github", "needs", "inputs", "vars"})
_JOB_ENV = frozenset({"github", "needs", "matrix", "strategy", "inputs", "vars"})
_JOB_OUTPUTS = frozenset(
    {"github", "needs", "matrix", "strategy", "steps", "job", "runner", "env", "inputs", "vars"}
)
_STATIC = frozenset({"matrix", "strategy"})
#: A job's defaults.run (GitHub's context availability); the runner evaluates it per step.
_JOB_DEFAULTS = frozenset({"github", "needs", "matrix", "strategy", "env", "vars", "inputs"})
_ENVIRONMENT = frozenset({"github", "needs", "matrix", "strategy"})
#: Evaluated when the job ends (matrix and strategy only: already in the plan).
_JOB_CONTINUE = _ENVIRONMENT
_ENVIRONMENT_URL = _ENVIRONMENT | {"steps"}


@record(frozen=True)
class Environment:
    """A job's deployment ``environment``: kept and shown; its protection rules are not
    enforced (forge-ci has no environments to hold them)."""

    name: Template
    url: Template | None


#: A job name may also use what is known when the run is queued (resolved at run creation).
_JOB_NAME = _STATIC | frozenset({"github", "inputs", "vars"})


@record(frozen=True)
class Instance:
    """One job instance: a matrix combination (or the job itself when it has no matrix)."""

    key: str
    #: Text, or a template over github/inputs/vars that run creation resolves.
    name: str | dict[str, Any]
    matrix: dict[str, Any] | None
    strategy: dict[str, Any]
    runs_on: list[str]

    @property
    def contexts(self) -> dict[str, Any]:
        """The contexts known when the plan is built."""
        return {"matrix": self.matrix or {}, "strategy": self.strategy}


@record(frozen=True)
class Job:
    """One checked job with its instances."""

    id: str
    key_node: Scalar
    node: Mapping
    needs: tuple[tuple[str, Scalar], ...]
    env: dict[str, EnvValue]
    defaults: RunDefaults
    #: Minutes, or one expression over matrix/strategy that the plan evaluates per instance.
    timeout_minutes: int | Template
    condition: str
    outputs: dict[str, Template]
    strategy: Strategy | None
    contents: str | None
    steps: tuple[Step, ...]
    instances: tuple[Instance, ...]
    #: ``continue-on-error``: a failed instance counts as a success (as on GitHub, also for
    #: ``needs.<id>.result``); a template is one whole expression (github, needs, matrix,
    #: strategy), decided in the plan when it reads only matrix and strategy, else at the end.
    continue_on_error: bool | Template = False
    environment: Environment | None = None


def _timeout(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> int | Template | None:
    """A job's ``timeout-minutes``: a literal, or (as GitHub allows) one ``${{ }}`` over the
    matrix and strategy, which the plan evaluates per instance and checks the same way."""
    if isinstance(node, Scalar) and "${{" in node.value and scalar_type(node) == "str":
        template = checker.template(node, scope.narrowed("timeout-minutes", _STATIC))
        if template is not None and template.whole is None:
            problems.at(node, "timeout-minutes is one expression: write only ${{ ... }}")
            return None
        return template
    return timeout_minutes(node, "timeout-minutes", problems)


def parse_job(
    key: Scalar,
    node: Node,
    known: dict[str, str],
    checker: ExpressionChecker,
    problems: Problems,
) -> Job | None:
    """Check one job; ``known`` maps lowercased job ids to their spelling (for ``needs``).

    ``None`` only when the job is not a mapping. Otherwise the job's valid parts come back even
    when some were refused (reported in ``problems``), so that later checks report theirs too.
    """
    if not isinstance(node, Mapping):
        problems.at(node, f"job '{key.value}' must be a mapping, not {describe(node)}")
        return None
    for item_key, _ in node.items:
        name = item_key.value
        if name in UNSUPPORTED_JOB_KEYS:
            problems.at(item_key, UNSUPPORTED_JOB_KEYS[name])
        elif name not in JOB_KEYS:
            problems.at(item_key, f"'{name}' is not a job key{problems.hint(name, JOB_KEYS)}")
    for required in ("runs-on", "steps"):
        if required not in node and "uses" not in node:
            problems.at(node, f"job '{key.value}' needs {required}")
    needs = _needs(node.get("needs"), key.value, known, problems)
    strategy = parse_strategy(node["strategy"], problems) if "strategy" in node else None
    matrix_keys = None
    if strategy is not None and strategy.has_matrix:
        matrix_keys = frozenset(name.lower() for name in strategy.keys)
    elif "strategy" in node and strategy is None:
        # The strategy itself is wrong (and reported): do not also report every matrix use.
        matrix_keys = ANY_MATRIX_KEY
    scope = Scope(
        where=f"job '{key.value}'",
        contexts=frozenset(),
        matrix_keys=matrix_keys,
        needs=frozenset(name.lower() for name, _ in needs),
    )
    env: dict[str, EnvValue] = {}
    if "env" in node:
        env_scope = scope.narrowed("job env", _JOB_ENV, whole_secret=True, any_secret=True)
        env = parse_env(node["env"], env_scope, checker, problems)
    defaults = RunDefaults()
    if "defaults" in node:
        defaults_scope = scope.narrowed("defaults.run.working-directory", _JOB_DEFAULTS)
        defaults = parse_run_defaults(
            node["defaults"], "defaults", checker, problems, defaults_scope
        )
    timeout: int | Template = DEFAULT_TIMEOUT_MINUTES
    if "timeout-minutes" in node:
        timeout = _timeout(node["timeout-minutes"], scope, checker, problems) or timeout
    condition = "success()"
    if "if" in node:
        scalar = string(node["if"], "a job's if", problems)
        found = (
            checker.condition(scalar, scope.narrowed("a job's if", _JOB_IF, conditions=True))
            if scalar is not None
            else None
        )
        condition = found or condition
    continue_on_error: bool | Template = False
    if "continue-on-error" in node:
        coe_scope = scope.narrowed("a job's continue-on-error", _JOB_CONTINUE)
        continue_on_error = _continue_on_error(
            node["continue-on-error"], coe_scope, checker, problems
        )
    environment = None
    if "environment" in node:
        step_ids = written_step_ids(node["steps"]) if "steps" in node else frozenset()
        environment = _environment(node["environment"], scope, step_ids, checker, problems)
    contents = (
        parse_permissions(node["permissions"], problems, "job") if "permissions" in node else None
    )
    steps = parse_steps(node["steps"], scope, checker, problems) if "steps" in node else []
    outputs: dict[str, Template] = {}
    if "outputs" in node:
        # Ids as written, so that a step refused for another reason is not reported again here.
        step_ids = written_step_ids(node["steps"]) if "steps" in node else frozenset()
        outputs = _outputs(
            node["outputs"],
            scope.narrowed("job outputs", _JOB_OUTPUTS, steps=step_ids),
            checker,
            problems,
        )
    name_template: Template | None = None
    if "name" in node:
        scalar = string(node["name"], "a job name", problems)
        if scalar is not None:
            name_template = checker.template(scalar, scope.narrowed("a job name", _JOB_NAME))
    runs_on = _runs_on(node.get("runs-on"), scope, checker, problems)
    # Instances (and their labels) are checked even when other keys of the job are wrong: every
    # independent problem is reported in one pass. Only a broken strategy stops them, since
    # without combinations every matrix reference would be a second report of the same problem.
    instances: list[Instance] = []
    if strategy is not None or "strategy" not in node:
        instances = _instances(key, node, strategy, name_template, runs_on, problems)
    elif runs_on is not None and all(t.literal is not None for t in runs_on[1]):
        _labels(runs_on, {}, problems)
    # A job with problems is still returned, made of its valid parts, so that the graph and the
    # plan checks see it too; parse_workflow never lets such a job out.
    return Job(
        key.value,
        key,
        node,
        needs,
        env,
        defaults,
        timeout,
        condition,
        outputs,
        strategy,
        contents,
        tuple(steps),
        tuple(instances),
        continue_on_error,
        environment,
    )


def _continue_on_error(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> bool | Template:
    """true, false or one whole expression (decided per instance, or when the job ends)."""
    if isinstance(node, Scalar) and "${{" in node.value:
        template = checker.template(node, scope)
        if template is None:
            return False
        if template.whole is None:
            problems.at(node, "continue-on-error must be true, false or one ${{ }} expression")
            return False
        return template
    return bool(boolean(node, "continue-on-error", problems))


def _environment(
    node: Node,
    scope: Scope,
    step_ids: frozenset[str],
    checker: ExpressionChecker,
    problems: Problems,
) -> Environment | None:
    """``environment: NAME`` or ``{name, url, deployment}``; a notice says it is not enforced
    (``deployment`` is checked and has nothing to switch off: forge-ci makes no deployments)."""
    name_node: Node | None = node
    url_node: Node | None = None
    if isinstance(node, Mapping):
        name_node = node.get("name")
        url_node = node.get("url")
        for key, value in node.items:
            if key.value == "deployment":
                boolean(value, "environment.deployment", problems)
            elif key.value not in ("name", "url"):
                hint = problems.hint(key.value, ("name", "url", "deployment"))
                problems.at(key, f"'{key.value}' is not an environment key{hint}")
        if name_node is None:
            problems.at(node, "environment needs a name")
            return None
    assert name_node is not None
    name_scalar = string(name_node, "environment.name", problems)
    name = (
        checker.template(name_scalar, scope.narrowed("environment.name", _ENVIRONMENT))
        if name_scalar is not None
        else None
    )
    url: Template | None = None
    if url_node is not None:
        url_scalar = string(url_node, "environment.url", problems)
        if url_scalar is not None:
            url_scope = scope.narrowed("environment.url", _ENVIRONMENT_URL, steps=step_ids)
            url = checker.template(url_scalar, url_scope)
    if name is None or name_scalar is None:
        return None
    if not name_scalar.value.strip():
        return None  # GitHub reads an empty environment as none
    problems.notice(
        name_scalar,
        f"environment '{name_scalar.value}' is kept and shown; its protection rules are not "
        "enforced on forge-ci",
    )
    return Environment(name, url)


def _needs(
    node: Node | None, job_id: str, known: dict[str, str], problems: Problems
) -> tuple[tuple[str, Scalar], ...]:
    if node is None:
        return ()
    items = node.items if isinstance(node, Sequence) else [node]
    found: list[tuple[str, Scalar]] = []
    for item in items:
        if not isinstance(item, Scalar) or is_null(item):
            problems.at(item, f"needs lists job ids, not {describe(item)}")
            continue
        target = known.get(item.value.lower())
        if target is None:
            hint = problems.hint(item.value, list(known.values()))
            problems.at(item, f"job '{job_id}' needs unknown job '{item.value}'{hint}")
        elif any(name == target for name, _ in found):
            problems.at(item, f"job '{target}' is listed twice in needs")
        else:
            found.append((target, item))
    return tuple(found)


def _outputs(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> dict[str, Template]:
    if not isinstance(node, Mapping):
        problems.at(node, f"outputs must be a mapping, not {describe(node)}")
        return {}
    if len(node.items) > MAX_JOB_OUTPUTS:
        problems.at(node.items[MAX_JOB_OUTPUTS][0], f"a job has at most {MAX_JOB_OUTPUTS} outputs")
    outputs: dict[str, Template] = {}
    for key, value in distinct_keys(node, "output names", problems):
        problem = id_problem(key.value)
        if problem:
            problems.at(key, problem.replace("the id", "the output name"))
            continue
        scalar = string(value, f"outputs.{key.value}", problems)
        template = checker.template(scalar, scope) if scalar is not None else None
        if template is not None:
            outputs[key.value] = template
    return outputs


def _runs_on(
    node: Node | None, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> tuple[Node, list[Template], bool] | None:
    if node is None:
        return None
    runs_scope = scope.narrowed("runs-on", _STATIC)
    if isinstance(node, Mapping):
        problems.at(
            node,
            "runner groups (runs-on: {group, labels}) are not supported; list the labels instead",
        )
        return None
    items = node.items if isinstance(node, Sequence) else [node]
    templates: list[Template] = []
    for item in items:
        scalar = string(item, "a runs-on label", problems)
        template = checker.template(scalar, runs_scope) if scalar is not None else None
        if template is not None:
            templates.append(template)
    if not items:
        problems.at(node, "runs-on needs at least one label")
    # Complete: every entry is a checked template, so the list as a whole can be judged too.
    return node, templates, len(templates) == len(items)


def _instances(
    key: Scalar,
    node: Mapping,
    strategy: Strategy | None,
    name: Template | None,
    runs_on: tuple[Node, list[Template], bool] | None,
    problems: Problems,
) -> list[Instance]:
    combos: list[dict[str, Any] | None] = list(strategy.combinations) if strategy else []
    if not combos:
        combos = [None]
    fail_fast = strategy.fail_fast if strategy else True
    max_parallel = strategy.max_parallel if strategy else None
    uses_matrix = name is not None and any(
        not isinstance(part, str) and "matrix" in part.contexts for part in name.parts
    )
    instances: list[Instance] = []
    used: set[str] = set()
    for index, combo in enumerate(combos):
        context = strategy_context(fail_fast, max_parallel, index, len(combos))
        contexts = {"matrix": combo or {}, "strategy": context}
        suffix = f" ({', '.join(_display(v) for v in combo.values())})" if combo else ""
        instance_key = key.value + suffix
        # Different values can print alike ('1' and 1); a counter keeps keys unique and stable.
        counter = 2
        while instance_key in used:
            instance_key = f"{key.value}{suffix} #{counter}"
            counter += 1
        used.add(instance_key)
        display: str | dict[str, Any] = key.value
        if name is not None:
            display = render(name, contexts, lambda t, m: problems.at(t.node, m))
        if not uses_matrix and suffix:
            if isinstance(display, str):
                display += suffix
            else:
                display = {"template": [*display["template"], suffix]}
        labels: list[str] = []
        if runs_on is not None:
            labels = _labels(runs_on, contexts, problems)
        instances.append(Instance(instance_key, display, combo, context, labels))
    return instances


def _labels(
    runs_on: tuple[Node, list[Template], bool], contexts: dict[str, Any], problems: Problems
) -> list[str]:
    """The normalised labels of one instance; every bad label is reported where it is written."""
    node, templates, complete = runs_on
    written: list[tuple[str, Node]] = []
    # Only a whole runs-on expression may give a list of labels; an entry of a list is one label.
    lists = not isinstance(node, Sequence)
    for template in templates:
        values = _label_values(template, contexts, lists, problems)
        if values is None:
            return []
        written.extend((value, template.node) for value in values)
    labels, refusals = normalize_labels([label for label, _ in written])
    for index, message in refusals:
        if index is not None:
            problems.at(written[index][1], message)
        elif complete:
            problems.at(node, message)
    for label, where in written:
        if labels and other_os(label):
            problems.notice(
                where,
                f"runs-on: {label}: no forge-ci provider runs Windows or macOS; the job is "
                "planned and waits for a provider with its labels, while Linux jobs run",
            )
    return labels


def _label_values(
    template: Template, contexts: dict[str, Any], lists: bool, problems: Problems
) -> list[str] | None:
    """The labels one ``runs-on`` entry gives (when ``lists``, an expression may give a list)."""
    whole = template.whole if lists else None
    parts = [whole] if whole is not None else template.parts
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        try:
            value = static_value(part, contexts)
        except ExpressionError as exc:
            problems.at(template.node, f"cannot evaluate runs-on: {exc.message}")
            return None
        items = value if whole is not None and isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict | list):
                # to_text would give the label 'object' or 'array', which no provider carries.
                what = "mapping" if isinstance(item, dict) else "sequence"
                problems.at(
                    template.node,
                    f"runs-on: ${{{{ {part.source.strip()} }}}} gives a {what}; "
                    "a runner label is text",
                )
                return None
        if whole is not None:
            return [to_text(item) for item in items]
        texts.append(to_text(value))
    return ["".join(texts)]


def _display(value: Any) -> str:
    """A matrix value in an instance key: text as is, objects and arrays as compact JSON."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return to_text(value)
