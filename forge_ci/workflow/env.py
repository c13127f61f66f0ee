"""Environment variables of workflows, jobs and steps: names, values and secret references.

The executor owns some names: ``FORGE_CI_`` and ``RUNNER_`` variables and GitHub's default
``GITHUB_*`` variables describe the run, and a handful of variables make a shell or the dynamic
loader run code before the step's own script (``BASH_ENV``, ``LD_PRELOAD``...). A workflow that
sets them could make the step do something its script does not say, so both this parser and
the runner refuse them (:mod:`forge_ci.protocol.envnames` is the one rule both use). Other
``GITHUB_`` names (``GITHUB_TOKEN``, ``GITHUB_CONTEXT``) are ordinary variables, as on GitHub.

Values must be scalars and are kept as their source spelling: ``1.0`` stays "1.0" and ``yes``
stays "yes". A null value is refused rather than turned into an empty string; write ``''``.
"""

from __future__ import annotations

import re

from forge_ci.protocol.envnames import reserved_reason
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, describe, is_null
from forge_ci.workflow.templates import ExpressionChecker, Scope, SecretRef, Template
from forge_ci.workflow.values import distinct_keys

MAX_ENV_ENTRIES = 100
MAX_ENV_NAME = 255
#: Resolved values over this size are refused at run creation (seed: 64 KiB).
MAX_ENV_VALUE_BYTES = 64 * 1024

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

EnvValue = Template | SecretRef


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be set by a workflow, or ``None`` when it can.

    Reserved prefixes and injection variables are compared without regard to case.
    """
    if len(name) > MAX_ENV_NAME:
        return f"the env name {name[:20]}... is longer than {MAX_ENV_NAME} characters"
    if not _NAME.match(name):
        return (
            f"'{name}' is not a valid env name (letters, digits and '_', not starting with a digit)"
        )
    return reserved_reason(name)


def parse_env(
    node: Node, scope: Scope, checker: ExpressionChecker, problems: Problems
) -> dict[str, EnvValue]:
    """Check an ``env`` mapping and return its values: templates or secret references."""
    if not isinstance(node, Mapping):
        problems.at(
            node, f"{scope.where} must be a mapping of names to values, not {describe(node)}"
        )
        return {}
    if len(node.items) > MAX_ENV_ENTRIES:
        key, _ = node.items[MAX_ENV_ENTRIES]
        problems.at(
            key, f"{scope.where} has {len(node.items)} entries; the limit is {MAX_ENV_ENTRIES}"
        )
    values: dict[str, EnvValue] = {}
    for key, value in distinct_keys(node, "env names", problems):
        problem = env_name_problem(key.value)
        if problem:
            problems.at(key, problem)
            continue
        if not isinstance(value, Scalar):
            problems.at(
                value,
                f"{scope.where}.{key.value} must be a string, number or boolean, "
                f"not {describe(value)}",
            )
            continue
        if is_null(value):
            problems.at(value, f"{scope.where}.{key.value} is empty; write '' for an empty value")
            continue
        template = checker.template(value, scope)
        if template is None:
            continue
        secret = checker.secret(template)
        values[key.value] = secret if secret is not None else template
    return values
