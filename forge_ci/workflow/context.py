"""The run context and its one-time resolution into a plan.

A run captures the queue-time part of the ``github`` context when it is created (seed: "Run
Context and Environment References", and issue #16): the repository, the pinned commit and its
ref, the event and its payload, the workflow, the actor, and for pull requests the source and
target branches (:data:`QUEUE_TIME_FIELDS`). Simple references to five of them in env values
(``${{ github.sha }}``, with optional spaces, anywhere in the value) and in the workflow's
concurrency group are replaced by their values once, in :func:`resolve_run_context`; the result
is stored in the run's immutable snapshot and reruns copy it without resolving again.

Inserted values are text parts of the plan, never expressions, so a branch named
``${{ github.sha }}`` or ``$(reboot)`` stays exactly that text. Any other expression stays a
runtime template for the runner to evaluate.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from forge_ci.errors import InvalidInput
from forge_ci.records import field, record
from forge_ci.workflow.env import MAX_ENV_VALUE_BYTES
from forge_ci.workflow.plan import MAX_PLAN_BYTES, plan_bytes
from forge_ci.workflow.triggers import EVENTS

_FIELD_REF = re.compile(
    r"\s*github\s*\.\s*(repository|sha|event_name|head_ref|base_ref)\s*\Z", re.IGNORECASE
)
#: The fields of the github context fixed when the run is created (the rest come at claim time
#: from the coordinator, or from the runner: see docs/workflow-syntax.md, "Contexts").
QUEUE_TIME_FIELDS = (
    "repository",
    "repository_owner",
    "sha",
    "ref",
    "ref_name",
    "ref_type",
    "ref_protected",
    "event_name",
    "head_ref",
    "base_ref",
    "actor",
    "triggering_actor",
    "workflow",
    "workflow_ref",
    "workflow_sha",
    "event",
)
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?\Z")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


class RunContextInvalid(InvalidInput):
    """The captured context, or a plan after resolving it, breaks a limit or a rule."""

    code = "run_context_invalid"


@record(frozen=True)
class RunContext:
    """The facts captured at run creation; ``head_ref``/``base_ref`` are empty except for PRs.

    ``event`` is the event payload (``github.event``), built by the caller from what it
    recorded (``forge_ci.runs.event_payload``); the other fields give the queue-time part of the
    ``github`` context (:data:`QUEUE_TIME_FIELDS`).
    """

    repository: str
    sha: str
    event_name: str
    head_ref: str = ""
    base_ref: str = ""
    ref: str = ""
    actor: str = ""
    workflow_path: str = ""
    workflow_name: str = ""
    event: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Raise :class:`RunContextInvalid` unless every field is well formed."""
        if not self.repository or "/" not in self.repository or _CONTROL.search(self.repository):
            raise RunContextInvalid(f"repository must be owner/name, not {self.repository!r}")
        if not _SHA.match(self.sha):
            raise RunContextInvalid(f"sha must be a full lowercase commit id, not {self.sha!r}")
        if self.event_name not in EVENTS:
            raise RunContextInvalid(
                f"event_name must be one of {', '.join(EVENTS)}, not {self.event_name!r}"
            )
        for name in ("head_ref", "base_ref", "ref", "actor", "workflow_path", "workflow_name"):
            value = getattr(self, name)
            if _CONTROL.search(value):
                raise RunContextInvalid(f"{name} contains a control character")
        if not isinstance(self.event, dict):
            raise RunContextInvalid("event must be an object (the event payload)")

    def as_dict(self) -> dict[str, Any]:
        """The queue-time ``github`` context as the run snapshot and the API expose it."""
        ref_name, ref_type = ref_parts(self.ref)
        owner = self.repository.partition("/")[0]
        workflow_ref = f"{self.repository}/{self.workflow_path}@{self.ref}" if self.ref else ""
        return {
            "repository": self.repository,
            "repository_owner": owner,
            "sha": self.sha,
            "ref": self.ref,
            "ref_name": ref_name,
            "ref_type": ref_type,
            "ref_protected": False,
            "event_name": self.event_name,
            "head_ref": self.head_ref,
            "base_ref": self.base_ref,
            "actor": self.actor,
            "triggering_actor": self.actor,
            "workflow": self.workflow_name,
            "workflow_ref": workflow_ref,
            "workflow_sha": self.sha,
            "event": self.event,
        }


def ref_parts(ref: str) -> tuple[str, str]:
    """``github.ref_name`` and ``github.ref_type`` of a full ref (``""`` for other refs)."""
    for prefix, kind in (("refs/heads/", "branch"), ("refs/tags/", "tag")):
        if ref.startswith(prefix):
            return ref[len(prefix) :], kind
    return "", ""


def resolve_run_context(plan: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """A copy of ``plan`` with the captured ``github.*`` fields filled into env and concurrency.

    Called once by run creation (issue 5) after the workflow was parsed at the run's commit; the
    result goes into the run's immutable snapshot. Reruns copy the snapshot and never call this
    again. Raises :class:`RunContextInvalid` when the context is malformed, when a resolved env
    value exceeds 64 KiB, or when the resolved plan exceeds 1 MiB.
    """
    context.check()
    values = context.as_dict()
    resolved = copy.deepcopy(plan)
    concurrency = resolved.get("concurrency")
    if isinstance(concurrency, dict):
        concurrency["group"] = _resolve(concurrency["group"], values)
    for job in resolved.get("jobs", []):
        for step in job.get("steps", []):
            env = step.get("env", {})
            for name in list(env):
                env[name] = _resolve(env[name], values)
                text = env[name]
                if isinstance(text, str) and len(text.encode("utf-8")) > MAX_ENV_VALUE_BYTES:
                    raise RunContextInvalid(
                        f"env {name} of step {step.get('id')} in job {job.get('key')} is over "
                        f"{MAX_ENV_VALUE_BYTES} bytes once resolved"
                    )
    size = len(plan_bytes(resolved))
    if size > MAX_PLAN_BYTES:
        raise RunContextInvalid(f"the resolved plan is {size} bytes; the limit is 1 MiB")
    return resolved


def _resolve(value: Any, values: dict[str, Any]) -> Any:
    """Fill simple github field references of one plan value; other parts stay as they are."""
    if not isinstance(value, dict) or "template" not in value:
        return value
    parts: list[Any] = []
    for part in value["template"]:
        if isinstance(part, dict) and "expr" in part:
            match = _FIELD_REF.match(part["expr"])
            if match:
                part = values[match.group(1).lower()]
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        elif part != "":
            parts.append(part)
    if all(isinstance(part, str) for part in parts):
        return "".join(parts)
    return {"template": parts}
