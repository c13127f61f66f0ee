"""The event payload of dispatch and schedule runs, stored in the run's snapshot.

The shape follows the contexts seam (/work/notes/CONTEXTS-SEAM.md, issue #16): the payload is
``context["event"]`` (``github.event``), and the ``inputs`` context is ``context["inputs"]``,
typed (booleans stay booleans) where ``github.event.inputs`` has text only, as on GitHub. When
``forge_ci.runs.event_payload`` (the contexts change) lands, :func:`with_event` is fed by its
``build_event_payload`` instead of the two small builders here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from forge_ci.runs.definition import RunDefinition
from forge_ci.workflow.dispatch_inputs import InputValue, event_inputs


def dispatch_event(
    ref: str, workflow_path: str, values: Mapping[str, InputValue]
) -> dict[str, Any]:
    """``github.event`` of a ``workflow_dispatch`` run: its inputs (as text), ref and workflow."""
    return {"inputs": event_inputs(values), "ref": ref, "workflow": workflow_path}


def schedule_event(cron: str) -> dict[str, Any]:
    """``github.event`` of a ``schedule`` run: the cron expression as written in the file."""
    return {"schedule": cron}


def with_event(
    definition: RunDefinition,
    event: dict[str, Any],
    inputs: Mapping[str, InputValue] | None = None,
) -> RunDefinition:
    """``definition`` whose snapshot context also carries the payload and the typed inputs."""
    context: dict[str, Any] = dict(definition.context)
    context["event"] = event
    context["inputs"] = dict(inputs or {})
    return dataclasses.replace(definition, context=context)
