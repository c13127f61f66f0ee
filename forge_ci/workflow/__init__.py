"""The workflow engine: loading, validating and planning workflow files.

Pure code: no database, no I/O beyond reading the text it is given. The public API:

    parse_workflow(text, path) -> Workflow          raises WorkflowInvalid(.diagnostics)
    build_plan(workflow) -> dict                     the normalized plan (version 1)
    plan_digest(plan) -> str                         SHA-256 of its canonical JSON
    resolve_run_context(plan, RunContext) -> dict    github.* filled in at run creation
    match_push(workflow, ref, changed_paths) -> Match
    match_pull_request(workflow, action, base_ref, changed_paths) -> Match

Names are loaded on first use, so importing ``forge_ci.workflow.expressions`` (which the
standard-library-only runner may need) does not import YAML or the rest of this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge_ci.workflow.context import RunContext, RunContextInvalid, resolve_run_context
    from forge_ci.workflow.diagnostics import Diagnostic, WorkflowInvalid
    from forge_ci.workflow.parser import Workflow, build_plan, parse_workflow
    from forge_ci.workflow.plan import plan_digest
    from forge_ci.workflow.triggers import Match, match_pull_request, match_push

_EXPORTS = {
    "Diagnostic": "forge_ci.workflow.diagnostics",
    "WorkflowInvalid": "forge_ci.workflow.diagnostics",
    "Workflow": "forge_ci.workflow.parser",
    "parse_workflow": "forge_ci.workflow.parser",
    "build_plan": "forge_ci.workflow.parser",
    "plan_digest": "forge_ci.workflow.plan",
    "RunContext": "forge_ci.workflow.context",
    "RunContextInvalid": "forge_ci.workflow.context",
    "resolve_run_context": "forge_ci.workflow.context",
    "Match": "forge_ci.workflow.triggers",
    "match_push": "forge_ci.workflow.triggers",
    "match_pull_request": "forge_ci.workflow.triggers",
}

__all__ = [
    "Diagnostic",
    "Match",
    "RunContext",
    "RunContextInvalid",
    "Workflow",
    "WorkflowInvalid",
    "build_plan",
    "match_pull_request",
    "match_push",
    "parse_workflow",
    "plan_digest",
    "resolve_run_context",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'forge_ci.workflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
