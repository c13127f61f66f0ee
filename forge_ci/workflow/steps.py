"""Steps: ``run`` scripts, actions (``uses`` + ``with``) and the built-in checkout.

A step either runs a script (``run`` with optional ``shell``, ``working-directory``, ``env``,
``if``, ``continue-on-error``, ``timeout-minutes``), is the built-in checkout (``uses:
forge-ci/checkout@v1``, or ``actions/checkout@<ref>``, whose ``with`` inputs
:mod:`forge_ci.workflow.checkout` reads), or uses an action (``OWNER/REPO@REF``,
``OWNER/REPO/PATH@REF``, ``./PATH``; see ``actions``) with ``with`` inputs, ``env``, ``if``,
``continue-on-error`` and ``timeout-minutes``. Which commit an action reference means is decided
at run creation, and so is the check of ``with`` against the action's inputs.

Steps without an ``id`` get ``step_<n>`` (n is the 1-based position), moved aside with a suffix
when an explicit id already took that name, so generated ids never collide with written ones.
"""

from __future__ import annotations

import re

from forge_ci.protocol.fields import CHECKOUT as CHECKOUT
from forge_ci.protocol.fields import INPUT_NAME_RE
from forge_ci.records import field, record
from forge_ci.workflow.actions import ReferenceInvalid, parse_reference
from forge_ci.workflow.checkout import parse_checkout_with
from forge_ci.workflow.defaults import shell as read_shell
from forge_ci.workflow.defaults import working_directory as read_directory
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.env import EnvValue, parse_env
from forge_ci.workflow.nodes import (
    Mapping,
    Node,
    Scalar,
    Sequence,
    describe,
    is_null,
    scalar_type,
)
from forge_ci.workflow.templates import STEP_CONTEXTS, ExpressionChecker, Scope, Template
from forge_ci.workflow.values import boolean, string, timeout_minutes

MAX_STEPS = 64
STEP_KEYS = (
    "id",
    "name",
    "run",
    "uses",
    "shell",
    "working-directory",
    "env",
    "if",
    "continue-on-error",
    "timeout-minutes",
)
CHECKOUT_KEYS = ("id", "name", "uses", "if", "timeout-minutes", "with")
ACTION_KEYS = (
    "id",
    "name",
    "uses",
    "with",
    "env",
    "if",
    "continue-on-error",
    "timeout-minutes",
)
MAX_INPUTS = 256

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_STEP_CONTEXTS = STEP_CONTEXTS


@record(frozen=True)
class Step:
    """One checked step; ``uses`` is set (as written) only for the checkout."""

    index: int
    id: str
    generated_id: bool
    name: Template | None
    uses: str | None
    run: Template | None
    shell: str | None
    working_directory: str | Template | None
    env: dict[str, EnvValue]
    condition: str
    continue_on_error: bool | Template
    timeout_minutes: int | None
    node: Mapping
    #: The action reference as written (``uses`` of an action step), else None.
    action: str | None = None
    #: An action step's ``with``: input name as written -> value.
    inputs: dict[str, Template] | None = None
    #: The checkout's normalized inputs (see :mod:`forge_ci.workflow.checkout`); empty otherwise.
    checkout_inputs: dict[str, str | Template] = field(default_factory=dict)


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be a job or step id (GitHub's rule), or ``None``."""
    if not _ID.match(text) or len(text) >= 100:
        return (
            f"the id '{text}' is invalid: use letters, digits, '_' and '-', start with a letter "
            "or '_', and stay under 100 characters"
        )
    if text.startswith("__"):
        return f"the id '{text}' is invalid: ids starting with '__' are reserved"
    return None


def is_checkout(uses: str) -> bool:
    """``forge-ci/checkout@v1`` or ``actions/checkout@<ref>``: the built-in checkout."""
    name, _, ref = uses.partition("@")
    return uses == CHECKOUT or (name == "actions/checkout" and bool(ref))


def written_step_ids(node: Node) -> frozenset[str]:
    """The explicit step ids of a ``steps`` list, lowercased (job outputs may use any of them)."""
    if not isinstance(node, Sequence):
        return frozenset()
    ids = set()
    for item in node.items:
        value = item.get("id") if isinstance(item, Mapping) else None
        if isinstance(value, Scalar):
            ids.add(value.value.lower())
    return frozenset(ids)


def parse_steps(
    node: Node, job_scope: Scope, checker: ExpressionChecker, problems: Problems
) -> list[Step]:
    """Check the ``steps`` of one job; ``job_scope`` carries its matrix keys and needs."""
    if not isinstance(node, Sequence):
        problems.at(node, f"steps must be a list, not {describe(node)}")
        return []
    if not node.items:
        problems.at(node, "steps must list at least one step")
        return []
    if len(node.items) > MAX_STEPS:
        problems.at(node.items[MAX_STEPS], f"a job has at most {MAX_STEPS} steps")
    items = node.items[:MAX_STEPS]
    explicit = _explicit_ids(items, checker, problems)
    taken = {text.lower() for text in explicit.values()}
    steps: list[Step] = []
    earlier: set[str] = set()
    checkout_seen: Scalar | None = None
    for index, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            problems.at(item, f"a step must be a mapping, not {describe(item)}")
            continue
        step_id = explicit.get(index)
        generated = step_id is None
        if step_id is None:
            step_id = _generated_id(index, taken)
        step = _step(
            item, index, step_id, generated, job_scope, frozenset(earlier), checker, problems
        )
        if not generated:
            earlier.add(step_id.lower())
        if step is None:
            continue
        if step.uses is not None:
            uses_node = item.get("uses")
            if checkout_seen is not None and isinstance(uses_node, Scalar):
                problems.at(
                    uses_node,
                    f"a job has at most one checkout step (the first is at line "
                    f"{checkout_seen.line})",
                )
            elif isinstance(uses_node, Scalar):
                checkout_seen = uses_node
        steps.append(step)
    return steps


def _explicit_ids(
    items: list[Node], checker: ExpressionChecker, problems: Problems
) -> dict[int, str]:
    ids: dict[int, str] = {}
    first: dict[str, Scalar] = {}
    for index, item in enumerate(items, start=1):
        node = item.get("id") if isinstance(item, Mapping) else None
        if node is None:
            continue
        scalar = string(node, "a step id", problems)
        text = checker.literal(scalar, "a step id") if scalar is not None else None
        if scalar is None or text is None:
            continue
        problem = id_problem(text)
        if problem:
            problems.at(scalar, problem)
            continue
        previous = first.get(text.lower())
        if previous is not None:
            problems.at(
                scalar,
                f"the step id '{text}' is already used in this job (line {previous.line}); "
                "ids are compared without regard to case",
            )
            continue
        first[text.lower()] = scalar
        ids[index] = text
    return ids


def _generated_id(index: int, taken: set[str]) -> str:
    candidate = f"step_{index}"
    suffix = 2
    while candidate in taken:
        candidate = f"step_{index}_{suffix}"
        suffix += 1
    taken.add(candidate)
    return candidate


def _step(
    node: Mapping,
    index: int,
    step_id: str,
    generated: bool,
    job_scope: Scope,
    earlier: frozenset[str],
    checker: ExpressionChecker,
    problems: Problems,
) -> Step | None:
    before = len(problems)
    uses_node = node.get("uses")
    run_node = node.get("run")
    if uses_node is not None and run_node is not None:
        problems.at(node.key_node("run") or node, "a step has either run or uses, not both")
        return None
    if uses_node is None and run_node is None:
        # Reported, and the rest of the step is still checked: a misspelt 'run' is named below.
        problems.at(node, "a step needs run (a script) or uses: forge-ci/checkout@v1")
    uses: str | None = None
    action: str | None = None
    checkout_inputs: dict[str, str | Template] = {}
    if uses_node is not None:
        uses, action = _uses(uses_node, checker, problems)
        if uses is not None:
            step_scope = job_scope.narrowed("with", STEP_CONTEXTS, steps=earlier, files=True)
            checkout_inputs = parse_checkout_with(
                uses, node.get("with"), checker, problems, step_scope
            )
    for key, _ in node.items:
        written = key.value
        if written in STEP_KEYS:
            # Keys a checkout cannot have are only worth naming once uses is the checkout.
            if uses is not None and written not in CHECKOUT_KEYS:
                problems.at(key, f"the built-in checkout step cannot have '{written}'")
            elif action is not None and written not in ACTION_KEYS:
                problems.at(key, f"an action step ({action}) cannot have '{written}'")
        elif written == "with":
            if uses_node is None and run_node is not None:
                problems.at(key, "'with' is for actions; a run step takes env instead")
        else:
            hint = problems.hint(written, STEP_KEYS)
            problems.at(key, f"'{written}' is not a step key{hint}")

    def scope(where: str, contexts: frozenset[str], **flags: bool) -> Scope:
        # Every step key may use hashFiles(): the runner evaluates it over the workspace.
        return job_scope.narrowed(where, contexts, steps=earlier, files=True, **flags)

    name: Template | None = None
    # A null name or working-directory means what leaving it out means (GitHub: empty).
    if "name" in node and not is_null(node["name"]):
        scalar = string(node["name"], "a step name", problems)
        if scalar is not None:
            name = checker.template(scalar, scope("a step name", _STEP_CONTEXTS))
    timeout: int | None = None
    if "timeout-minutes" in node:
        timeout = timeout_minutes(node["timeout-minutes"], "timeout-minutes", problems)
    run: Template | None = None
    step_shell: str | None = None
    directory: str | Template | None = None
    env: dict[str, EnvValue] = {}
    condition = "success()"
    continue_on_error: bool | Template = False
    inputs: dict[str, Template] | None = None
    if action is not None:
        inputs = _inputs(
            node, action, scope("with", _STEP_CONTEXTS, any_secret=True), checker, problems
        )
    # Every step but the built-in checkout: a refused action's env and if are checked as well,
    # since their problems are independent of the refusal.
    if uses is None:
        scalar = string(run_node, "run", problems) if run_node is not None else None
        if scalar is not None:
            if not scalar.value.strip():
                problems.at(scalar, "run must not be empty")
            run = checker.template(
                scalar, scope("run", _STEP_CONTEXTS, secret_parts=True, any_secret=True)
            )
        if "shell" in node:
            step_shell = read_shell(node["shell"], checker, problems)
        if "working-directory" in node and not is_null(node["working-directory"]):
            directory = read_directory(
                node["working-directory"],
                checker,
                problems,
                scope("working-directory", _STEP_CONTEXTS),
            )
        if "env" in node:
            env_scope = scope("step env", _STEP_CONTEXTS, whole_secret=True, any_secret=True)
            env = parse_env(node["env"], env_scope, checker, problems)
        if "continue-on-error" in node:
            value = _continue_on_error(
                node["continue-on-error"],
                scope("continue-on-error", _STEP_CONTEXTS),
                checker,
                problems,
            )
            continue_on_error = value if value is not None else False
    if "if" in node:
        # The checkout's if too: a skipped checkout leaves the workspace empty, as on GitHub.
        found = _condition(
            node["if"], scope("a step's if", _STEP_CONTEXTS, conditions=True), checker, problems
        )
        condition = found or condition
    if len(problems) != before:
        return None
    return Step(
        index,
        step_id,
        generated,
        name,
        uses,
        run,
        step_shell,
        directory,
        env,
        condition,
        continue_on_error,
        timeout,
        node,
        action,
        inputs,
        checkout_inputs,
    )


def _uses(
    node: Node, checker: ExpressionChecker, problems: Problems
) -> tuple[str | None, str | None]:
    """``(checkout, None)`` for the built-in checkout, ``(None, reference)`` for an action."""
    scalar = string(node, "uses", problems)
    text = checker.literal(scalar, "uses") if scalar is not None else None
    if scalar is None or text is None:
        return None, None
    if not is_checkout(text):
        if text.startswith("forge-ci/checkout"):
            problems.at(scalar, f"'{text}' is not a checkout version; use {CHECKOUT}")
            return None, None
        if text.startswith("actions/checkout"):
            problems.at(scalar, f"'{text}' needs a ref, like actions/checkout@v4")
            return None, None
        try:
            parse_reference(text)
        except ReferenceInvalid as exc:
            problems.at(scalar, str(exc))
            return None, None
        return None, text
    return text, None


def _inputs(
    step: Mapping, action: str, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> dict[str, Template]:
    """An action step's ``with``: names as written, values as templates (any scalar is text)."""
    node = step.get("with")
    if node is None:
        return {}
    if not isinstance(node, Mapping):
        problems.at(node, f"with must be a mapping of {action}'s inputs, not {describe(node)}")
        return {}
    if len(node.items) > MAX_INPUTS:
        problems.at(node.items[MAX_INPUTS][0], f"a step has at most {MAX_INPUTS} inputs")
    inputs: dict[str, Template] = {}
    seen: dict[str, Scalar] = {}
    for key, value in node.items[:MAX_INPUTS]:
        first = seen.get(key.value.lower())
        if first is not None:
            problems.at(
                key,
                f"with.{key.value} repeats with.{first.value} (line {first.line}); input names "
                "are compared without regard to case",
            )
            continue
        seen[key.value.lower()] = key
        if not INPUT_NAME_RE.fullmatch(key.value):
            problems.at(
                key,
                f"'{key.value}' is not an input name: use letters, digits, '_', '-', '.' and "
                "spaces, starting with a letter, digit or '_' (at most 100 characters)",
            )
            continue
        if isinstance(value, Scalar) and value.plain and scalar_type(value) == "null":
            value = Scalar("", "'", value.line, value.column, value.index, value.end_index)
        scalar = string(value, f"with.{key.value}", problems)
        if scalar is None:
            continue
        template = checker.template(scalar, scope.at(f"with.{key.value}"))
        if template is not None:
            inputs[key.value] = template
    return inputs


def _condition(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> str | None:
    if isinstance(node, Scalar) and node.plain and scalar_type(node) == "null":
        problems.at(node, f"{scope.where} needs an expression")
        return None
    scalar = string(node, scope.where, problems)
    return checker.condition(scalar, scope) if scalar is not None else None


def _continue_on_error(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> bool | Template | None:
    if isinstance(node, Scalar) and "${{" in node.value:
        template = checker.template(node, scope)
        if template is not None and template.whole is None:
            problems.at(node, "continue-on-error must be true, false or one ${{ }} expression")
            return None
        return template
    return boolean(node, "continue-on-error", problems)
