"""Runtime expressions: the plan's templates, step ``if`` and ``continue-on-error``.

The plan keeps a value that needs run-time data as ``{"template": [text | {"expr": source}]}``
and a step's ``continue-on-error`` as ``true``, ``false`` or ``{"expr": source}``; the runner
evaluates them with the workflow engine's expression language against the contexts of the job
(``github``, ``matrix``, ``strategy``, ``needs``) and the ``steps`` that ran before. Inserted
values are text: nothing produced by an expression is evaluated again. ``hashFiles()`` hashes the
files of ``github.workspace`` (:mod:`worker.runner.hashfiles`).

An expression that reads the whole ``github`` context (``toJSON(github)``, ``github[name]``)
gets it with ``token`` as ``***``: GitHub prints that context with the token masked, and the
job token reaches a step only where the workflow names it (``github.token``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge_ci.workflow.expressions import (
    ExpressionError,
    FileHasher,
    JobStatus,
    TemplateExpr,
    evaluate,
    is_truthy,
    parse_condition,
    parse_expression,
    referenced_paths,
    render_template,
)
from worker.runner.hashfiles import HashFilesError, hash_files


class EvaluationError(Exception):
    """An expression could not be evaluated; the message says which and why."""


def workspace_files(contexts: Mapping[str, Any]) -> FileHasher | None:
    """``hashFiles`` over the workspace the contexts name (``github.workspace``), if any."""
    github = contexts.get("github")
    root = github.get("workspace") if isinstance(github, Mapping) else None
    if not isinstance(root, str) or not root:
        return None

    def hasher(patterns: list[str], follow: bool) -> str:
        try:
            return hash_files(root, patterns, follow)
        except HashFilesError as exc:
            raise ExpressionError(
                "evaluation", f"hashFiles({', '.join(map(repr, patterns))}) failed: {exc}", -1
            ) from None

    return hasher


MASKED_TOKEN = "***"


def reads_whole_github(node: Any) -> bool:
    """Whether an expression reads the ``github`` context as a whole, not one field by name."""
    return any(len(path) == 1 and path[0].lower() == "github" for path in referenced_paths(node))


def _contexts_for(nodes: list[Any], contexts: Mapping[str, Any]) -> Mapping[str, Any]:
    """``contexts``, with the job token masked when one of ``nodes`` reads the whole github."""
    github = contexts.get("github")
    if not isinstance(github, Mapping) or "token" not in github:
        return contexts
    if not any(reads_whole_github(node) for node in nodes):
        return contexts
    return {**contexts, "github": {**github, "token": MASKED_TOKEN}}


def render(value: str | Mapping[str, Any], contexts: Mapping[str, Any], what: str) -> str:
    """The text of a plan value: literal text, or a template evaluated now."""
    if isinstance(value, str):
        return value
    parts: list[str | TemplateExpr] = []
    for part in value["template"]:
        if isinstance(part, str):
            parts.append(part)
            continue
        source = part["expr"]
        try:
            parts.append(TemplateExpr(source, 0, parse_expression(source)))
        except ExpressionError as exc:
            raise EvaluationError(f"{what}: {exc}") from None
    nodes = [part.node for part in parts if isinstance(part, TemplateExpr)]
    contexts = _contexts_for(nodes, contexts)
    try:
        return render_template(parts, contexts, files=workspace_files(contexts))
    except ExpressionError as exc:
        raise EvaluationError(f"{what}: {exc}") from None


def condition_holds(
    condition: str, contexts: Mapping[str, Any], job_status: str, what: str
) -> bool:
    """Whether a step's ``if`` allows it to run, given the job's status so far."""
    try:
        node = parse_condition(condition)
        value = evaluate(
            node,
            _contexts_for([node], contexts),
            status=JobStatus.for_step(job_status),
            expression=condition,
            files=workspace_files(contexts),
        )
    except ExpressionError as exc:
        raise EvaluationError(f"{what}: {exc}") from None
    return is_truthy(value)


def continues_on_error(
    value: bool | Mapping[str, str], contexts: Mapping[str, Any], what: str
) -> bool:
    """A step's ``continue-on-error``: a literal, or one expression evaluated now."""
    if isinstance(value, bool):
        return value
    source = value["expr"]
    try:
        files = workspace_files(contexts)
        node = parse_expression(source)
        masked = _contexts_for([node], contexts)
        return is_truthy(evaluate(node, masked, expression=source, files=files))
    except ExpressionError as exc:
        raise EvaluationError(f"{what}: {exc}") from None
