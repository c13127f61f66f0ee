"""Runtime expressions: the plan's templates, step ``if`` and ``continue-on-error``.

The plan keeps a value that needs run-time data as ``{"template": [text | {"expr": source}]}``
and a step's ``continue-on-error`` as ``true``, ``false`` or ``{"expr": source}``; the runner
evaluates them with the workflow engine's expression language against the contexts of the job
(``github``, ``matrix``, ``strategy``, ``needs``) and the ``steps`` that ran before. Inserted
values are text: nothing produced by an expression is evaluated again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge_ci.workflow.expressions import (
    ExpressionError,
    JobStatus,
    TemplateExpr,
    evaluate,
    is_truthy,
    parse_condition,
    parse_expression,
    render_template,
)


class EvaluationError(Exception):
    """An expression could not be evaluated; the message says which and why."""


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
    try:
        return render_template(parts, contexts)
    except ExpressionError as exc:
        raise EvaluationError(f"{what}: {exc}") from None


def condition_holds(
    condition: str, contexts: Mapping[str, Any], job_status: str, what: str
) -> bool:
    """Whether a step's ``if`` allows it to run, given the job's status so far."""
    try:
        node = parse_condition(condition)
        value = evaluate(
            node, contexts, status=JobStatus.for_step(job_status), expression=condition
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
        return is_truthy(evaluate(parse_expression(source), contexts, expression=source))
    except ExpressionError as exc:
        raise EvaluationError(f"{what}: {exc}") from None
