"""Injection-safe ``run`` scripts: untrusted values reach the shell as variables, never as code.

GitHub pastes the value of every ``${{ }}`` into the script text before the shell reads it, so a
branch named ``a";rm -rf /;"`` or a commit message holding ``$(id)`` becomes code (the
script-injection class of GitHub's hardening guide and zizmor). forge-ci keeps an expression in
the script text only when it reads nothing but trusted values (:func:`is_trusted`: fixed facts
such as ``github.sha`` or ``runner.temp``, and the static matrix); every other expression, and
every ``${{ secrets.NAME }}``, moves into a generated environment variable of the step and the
script reads it as ``${_FORGE_CI_EXPR_<n>}``::

    run: echo "${{ github.event.head_commit.message }}"
    ->  run: {"template": ["echo \"${_FORGE_CI_EXPR_1}\""]}
        env: {"_FORGE_CI_EXPR_1": {"template": [{"expr": "github.event.head_commit.message"}]}}

The shell expands the variable as data (no command substitution, no quote breaking). The one
visible difference: inside single quotes (or a quoted here-document) the shell does not expand
variables, so ``'${{ github.head_ref }}'`` prints ``${_FORGE_CI_EXPR_1}``; write it in double
quotes instead. Done when the plan is built, so the snapshot holds the protected script.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from forge_ci.workflow.expressions import (
    ExpressionError,
    parse_expression,
    referenced_contexts,
    referenced_paths,
)

GENERATED_PREFIX = "_FORGE_CI_EXPR_"
#: ``<prefix>NAME: {"secret": NAME}``: a secret an expression of the step reads (in env, run or
#: with). The runner asks for it like any secret and gives it to the step's expressions as
#: ``secrets.NAME``, never to the step's process.
SECRET_HOLDER_PREFIX = GENERATED_PREFIX + "SECRET_"
#: github fields whose values forge-ci or the runner chose: never text an outsider wrote.
TRUSTED_GITHUB = frozenset(
    {
        "action_path",
        "api_url",
        "event_name",
        "job",
        "ref_protected",
        "ref_type",
        "repository",
        "repository_id",
        "repository_owner",
        "retention_days",
        "run_attempt",
        "run_id",
        "run_number",
        "server_url",
        "sha",
        "workflow_sha",
        "workspace",
    }
)
#: Whole contexts with trusted values only (the runner's facts; matrix/strategy are static).
TRUSTED_CONTEXTS = frozenset({"runner", "matrix", "strategy"})

_SECRET = re.compile(r"\s*secrets\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*\Z", re.IGNORECASE)


def is_trusted(source: str) -> bool:
    """Whether the expression ``source`` reads only trusted values (then it may be pasted)."""
    try:
        node = parse_expression(source)
    except ExpressionError:
        return False
    contexts = referenced_contexts(node)
    if not contexts <= TRUSTED_CONTEXTS | {"github", "job"}:
        return False
    seen: set[str] = set()
    for path in referenced_paths(node):
        lowered = [str(part).lower() for part in path]
        seen.add(lowered[0])
        if lowered[0] == "github" and (len(lowered) != 2 or lowered[1] not in TRUSTED_GITHUB):
            return False
        if lowered[0] == "job" and lowered[1:] != ["status"]:
            return False
    # A context read other than through a static path (github[x]) is not trusted.
    return (contexts & {"github", "job"}) <= seen


def protect_script(run: Any) -> tuple[Any, dict[str, Any]]:
    """The script with untrusted parts replaced by variables, and the variables' env values."""
    if not isinstance(run, dict) or "template" not in run:
        return run, {}
    names: dict[str, str] = {}
    env: dict[str, Any] = {}
    parts: list[Any] = []
    for part in run["template"]:
        if isinstance(part, dict) and "expr" in part and not is_trusted(part["expr"]):
            source = part["expr"]
            name = names.get(source)
            if name is None:
                name = f"{GENERATED_PREFIX}{len(names) + 1}"
                names[source] = name
                env[name] = _env_value(source)
            part = "${" + name + "}"
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        elif part != "":
            parts.append(part)
    if all(isinstance(part, str) for part in parts):
        return "".join(parts), env
    return {"template": parts}, env


def _env_value(source: str) -> dict[str, Any]:
    secret = _SECRET.match(source)
    if secret is None:
        return {"template": [{"expr": source}]}
    return secret_value(secret.group(1).upper())


def secret_value(name: str) -> dict[str, Any]:
    """The plan value of ``${{ secrets.NAME }}``: by name; GITHUB_TOKEN is the job token."""
    if name == "GITHUB_TOKEN":
        return {"template": [{"expr": "github.token"}]}
    return {"secret": name}


#: Longer expressions are not kept: the cache lives in long-lived web and worker processes,
#: and pushers choose the text (as ``parse_expression``'s own cache).
_CACHED_TEXT = 200


def template_secrets(source: str) -> set[str]:
    """The secret names (uppercased) an expression reads as ``secrets.NAME``."""
    if len(source) > _CACHED_TEXT:
        return set(_template_secrets.__wrapped__(source))
    return set(_template_secrets(source))


@functools.lru_cache(maxsize=1024)
def _template_secrets(source: str) -> frozenset[str]:
    # Asked for every runtime template of every step of every matrix instance: the same few
    # expressions over and over, so the answers are kept (a pure function of the text).
    try:
        node = parse_expression(source)
    except ExpressionError:
        return frozenset()
    return frozenset(
        str(path[1]).upper()
        for path in referenced_paths(node)
        if len(path) == 2 and str(path[0]).lower() == "secrets"
    )


def secret_holders(*values: Mapping[str, Any]) -> dict[str, Any]:
    """The holder entries (:data:`SECRET_HOLDER_PREFIX`) for the secrets the runtime templates
    among ``values`` read; the job token (``secrets.GITHUB_TOKEN``) needs none."""
    names: set[str] = set()
    for mapping in values:
        for value in mapping.values():
            if not isinstance(value, dict) or not isinstance(value.get("template"), list):
                continue
            for part in value["template"]:
                if isinstance(part, dict) and "expr" in part:
                    names |= template_secrets(str(part["expr"]))
    names.discard("GITHUB_TOKEN")
    return {SECRET_HOLDER_PREFIX + name: {"secret": name} for name in sorted(names)}
