"""Turning checked templates into plan values for one job instance.

An expression that reads only ``matrix`` and ``strategy`` (or nothing) has the same value for the
whole life of a job instance, so it is evaluated while the plan is built. Everything else stays a
runtime template. A template that still holds expressions is written as a list of parts, so
that text inserted from a matrix value is never read as an expression again:

    "echo ${{ matrix.os }} ${{ steps.a.outputs.x }}"  with matrix.os = "${{ secrets.X }}"
    -> {"template": ["echo ${{ secrets.X }} ", {"expr": "steps.a.outputs.x"}]}

(the first part is text; only ``{"expr": ...}`` parts are ever evaluated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from forge_ci.workflow.expressions import ExpressionError, evaluate, to_string
from forge_ci.workflow.injection import secret_value
from forge_ci.workflow.templates import Expr, SecretRef, Template

#: A rendered value: plain text, a runtime template, or a secret reference.
PlanValue = str | dict[str, Any]
Report = Callable[[Template, str], None]


def to_text(value: Any) -> str:
    """An expression result as text, exactly as the runtime inserts it into a string."""
    return to_string(value)


def static_value(expr: Expr, contexts: Mapping[str, Any]) -> Any:
    """Evaluate an expression that reads only matrix and strategy."""
    return evaluate(expr.node, contexts)


def render(template: Template, contexts: Mapping[str, Any], report: Report) -> PlanValue:
    """A template for one instance: text, or ``{"template": [...]}`` when runtime parts remain."""
    literal = template.literal
    if literal is not None:
        return literal
    parts: list[str | dict[str, str]] = []
    for part in template.parts:
        if isinstance(part, str):
            text: str | dict[str, str] = part
        elif part.static:
            try:
                value = static_value(part, contexts)
            except ExpressionError as exc:
                report(template, f"cannot evaluate ${{{{ {part.source} }}}}: {exc.message}")
                value = None
            if len(template.parts) == 1 and isinstance(value, dict | list):
                what = "mapping" if isinstance(value, dict) else "sequence"
                report(template, f"${{{{ {part.source} }}}} is a {what}, where text is expected")
            text = to_text(value)
        else:
            text = {"expr": part.source.strip()}
        if isinstance(text, str) and parts and isinstance(parts[-1], str):
            parts[-1] = parts[-1] + text
        elif text != "":
            parts.append(text)
    if all(isinstance(part, str) for part in parts):
        return "".join(part for part in parts if isinstance(part, str))
    return {"template": parts}


def render_env(
    values: Mapping[str, Template | SecretRef], contexts: Mapping[str, Any], report: Report
) -> dict[str, PlanValue]:
    """An env mapping for one instance; secrets stay references by name."""
    rendered: dict[str, PlanValue] = {}
    for name, value in values.items():
        if isinstance(value, SecretRef):
            rendered[name] = secret_value(value.name)
        else:
            rendered[name] = render(value, contexts, report)
    return rendered


def strategy_context(
    fail_fast: bool, max_parallel: int | None, index: int, total: int
) -> dict[str, Any]:
    """The ``strategy`` context of one instance, as GitHub defines it."""
    return {
        "fail-fast": fail_fast,
        "job-index": index,
        "job-total": total,
        "max-parallel": max_parallel if max_parallel is not None else total,
    }


def as_written(value: Any) -> str:
    """A plan value as text for display: runtime parts as ``${{ source }}`` (not evaluated)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("template"), list):
        return "".join(
            part if isinstance(part, str) else "${{ " + str(part.get("expr", "")) + " }}"
            for part in value["template"]
        )
    return ""
