"""A run's definition: the immutable snapshot a run is created from.

Made once from a parsed workflow at the run's exact commit (push or dispatch), or copied from an
earlier run (rerun). The ``github.*`` references of env values and of the concurrency group are
resolved here, exactly once, through the workflow engine's resolver; a rerun copies the resolved
plan and the captured context byte for byte and never parses or resolves again.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forge_ci.errors import InvalidInput

if TYPE_CHECKING:
    from forge_ci.models import Run
    from forge_ci.workflow import Workflow


@dataclass(frozen=True)
class RunDefinition:
    """Everything a new run stores as its snapshot."""

    workflow_path: str
    workflow_name: str | None
    #: The workflow file as read from the commit (UTF-8 text, byte-identical to the blob).
    source: str
    #: The normalized plan with the context resolved into it.
    plan: dict[str, Any]
    plan_version: int
    plan_digest: str
    #: The captured ``github`` facts (RunContext) plus ``event`` (the payload), ``actor`` and,
    #: for dispatch runs, the typed ``inputs``.
    context: dict[str, Any]
    event_name: str
    ref: str
    sha: str
    concurrency_group: str | None
    cancel_in_progress: bool
    #: The resolved actions (``forge_ci.runs.actions``); ``{}`` when the workflow uses none.
    actions: dict[str, Any] = field(default_factory=dict)

    @property
    def concurrency_key(self) -> str | None:
        """SHA-256 of the group: the indexed column groups are looked up by."""
        if self.concurrency_group is None:
            return None
        return hashlib.sha256(self.concurrency_group.encode("utf-8")).hexdigest()


def define_run(
    workflow: Workflow,
    data: bytes,
    *,
    repository: str,
    sha: str,
    ref: str,
    event_name: str,
    event: dict[str, Any] | None = None,
    actor: str = "",
    inputs: Mapping[str, str | bool] | None = None,
) -> RunDefinition:
    """The definition of a new run of ``workflow`` (parsed from ``data``) at ``sha``.

    ``repository`` is ``owner/name``; ``ref`` the full ref. ``event`` is the event payload
    (:func:`forge_ci.runs.event_payload.build_event_payload`; a minimal one when None) and
    ``actor`` who caused the run (default: the payload's sender); ``inputs`` the typed
    ``inputs`` context of a dispatch (kept beside the github fields). Pull-request fields of the
    context stay empty: forge-ci creates no pull-request runs.
    """
    from forge_ci.runs.event_payload import minimal_payload
    from forge_ci.workflow import RunContext, build_plan, plan_digest, resolve_run_context

    if event is None:
        event = minimal_payload(event_name, repository, ref, actor)
    if not actor:
        sender = event.get("sender")
        actor = str(sender.get("login") or "") if isinstance(sender, dict) else ""
    context = RunContext(
        repository=repository,
        sha=sha,
        event_name=event_name,
        ref=ref,
        actor=actor,
        workflow_path=workflow.path,
        workflow_name=workflow.name or workflow.path,
        event=event,
    )
    plan = resolve_run_context(build_plan(workflow), context)
    captured = context.as_dict()
    if inputs is not None:
        captured["inputs"] = dict(inputs)
    group, cancel = concurrency_of(plan, captured)
    return RunDefinition(
        workflow_path=workflow.path,
        workflow_name=workflow.name,
        source=data.decode("utf-8"),
        plan=plan,
        plan_version=int(plan["version"]),
        plan_digest=plan_digest(plan),
        context=captured,
        event_name=event_name,
        ref=ref,
        sha=sha,
        concurrency_group=group,
        cancel_in_progress=cancel,
    )


def copy_definition(run: Run) -> RunDefinition:
    """The definition of ``run`` for a rerun: the same snapshot, nothing re-read or re-resolved
    (its actions included: a rerun runs the commits the first run pinned)."""
    return RunDefinition(
        workflow_path=run.workflow_path,
        workflow_name=run.workflow_name,
        source=run.workflow_source,
        plan=copy.deepcopy(run.plan),
        plan_version=run.plan_version,
        plan_digest=run.plan_digest,
        context=copy.deepcopy(run.context),
        event_name=run.event_name,
        ref=run.ref,
        sha=run.sha,
        concurrency_group=run.concurrency_group,
        cancel_in_progress=run.cancel_in_progress,
        actions=copy.deepcopy(run.actions or {}),
    )


#: Resolved concurrency groups longer than this are refused (they are shown in the UI).
MAX_GROUP_LENGTH = 1024


def concurrency_of(plan: dict[str, Any], context: dict[str, Any]) -> tuple[str | None, bool]:
    """The run's concurrency group as text, and whether it cancels runs in progress.

    ``resolve_run_context`` has replaced simple ``github.<field>`` references; any other
    expression left in the group (``format(...)`` over the same fields) is evaluated here
    against the captured context, once.
    """
    from forge_ci.runs.event_payload import queue_contexts
    from forge_ci.workflow.expressions import ExpressionError, evaluate, parse_expression
    from forge_ci.workflow.expressions import to_string as expression_text
    from forge_ci.workflow.plan import truthy

    concurrency = plan.get("concurrency")
    if not isinstance(concurrency, dict):
        return None, False
    group = concurrency.get("group")
    cancel_value = concurrency.get("cancel_in_progress", False)
    if isinstance(cancel_value, dict):
        source = str(cancel_value["expr"])
        try:
            value = evaluate(parse_expression(source), queue_contexts(context), expression=source)
        except ExpressionError as exc:
            raise InvalidInput(
                f"cannot evaluate concurrency.cancel-in-progress ${{{{ {source} }}}}: {exc.message}"
            ) from None
        cancel = truthy(value)
    else:
        cancel = bool(cancel_value)
    if isinstance(group, dict):
        parts: list[str] = []
        for part in group.get("template", []):
            if isinstance(part, str):
                parts.append(part)
                continue
            source = str(part["expr"])
            try:
                value = evaluate(
                    parse_expression(source), queue_contexts(context), expression=source
                )
            except ExpressionError as exc:
                raise InvalidInput(
                    f"cannot evaluate concurrency.group ${{{{ {source} }}}}: {exc.message}"
                ) from None
            parts.append(expression_text(value))
        group = "".join(parts)
    if not isinstance(group, str) or not group.strip():
        raise InvalidInput("concurrency.group is empty once resolved")
    if len(group) > MAX_GROUP_LENGTH:
        raise InvalidInput(
            f"concurrency.group is {len(group)} characters once resolved; the limit is "
            f"{MAX_GROUP_LENGTH}"
        )
    return group, cancel
