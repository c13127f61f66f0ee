"""The assignment: everything the runner needs for one attempt, sent on claim (and replay).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from forge_ci.protocol.actions import Action, archive_path, check_action_keys, parse_actions
from forge_ci.protocol.api import ATTEMPT_STATES
from forge_ci.protocol.fields import (
    OUTPUT_NAME_RE,
    PROTOCOL_VERSION,
    ProtocolError,
    choice,
    decimal,
    integer,
    invalid,
    parse_decimal,
    parse_object,
    string,
)
from forge_ci.protocol.steps import CHECKOUT as CHECKOUT
from forge_ci.protocol.steps import AssignmentStep as AssignmentStep
from forge_ci.protocol.steps import parse_env_value as parse_env_value
from forge_ci.protocol.steps import parse_steps
from forge_ci.protocol.steps import parse_value as parse_value

#: Version of the ``assignment`` object sent on claim (independent of the HTTP protocol).
#: 2: action steps (``action``, ``with``) and the ``actions`` map.
ASSIGNMENT_VERSION: Final = 2


@dataclass(frozen=True)
class Assignment:
    """Everything the in-container runner needs to execute one attempt of one job.

    Built from the run's immutable snapshot on every claim and replay; never stored.
    """

    attempt_id: int
    attempt_number: int
    #: ``leased`` on a fresh claim; a replay reports the current state (``running`` means
    #: another process already started: reconcile, never start a second one).
    state: str
    run_id: int
    run_number: int
    job_id: int
    #: The job instance key (``build (linux, 3.11)``), its workflow job id and display name.
    job_key: str
    job_workflow_id: str
    job_name: str
    timeout_minutes: int
    steps: tuple[AssignmentStep, ...]
    #: The job's ``outputs`` templates, evaluated by the runner at the end.
    outputs: dict[str, str | dict[str, Any]]
    #: Expression contexts: ``github`` (with ``event``, the payload, and ``token``),
    #: ``matrix``, ``strategy``, ``needs``, ``inputs`` and ``vars``; the runner adds ``runner``,
    #: ``env``, ``job`` and ``steps``.
    contexts: dict[str, Any]
    #: Path (under the server origin) of the ``tar`` snapshot of the pinned commit; ``""`` when
    #: the job may not read the source (``permissions: {contents: none}``).
    source_archive_path: str
    lease_deadline_ms: int
    job_deadline_ms: int
    server_time_ms: int
    #: Every action the job may run (nested ones too), by ``"<commit>:<path>"``.
    actions: dict[str, Action] = field(default_factory=dict)
    assignment_version: int = ASSIGNMENT_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "assignment_version": self.assignment_version,
            "attempt_id": decimal(self.attempt_id),
            "attempt_number": self.attempt_number,
            "state": self.state,
            "run_id": decimal(self.run_id),
            "run_number": decimal(self.run_number),
            "job_id": decimal(self.job_id),
            "job_key": self.job_key,
            "job_workflow_id": self.job_workflow_id,
            "job_name": self.job_name,
            "timeout_minutes": self.timeout_minutes,
            "steps": [step.to_json() for step in self.steps],
            "outputs": self.outputs,
            "contexts": self.contexts,
            "source_archive_path": self.source_archive_path,
            "actions": {key: action.to_json() for key, action in self.actions.items()},
            "lease_deadline_ms": decimal(self.lease_deadline_ms),
            "job_deadline_ms": decimal(self.job_deadline_ms),
            "server_time_ms": decimal(self.server_time_ms),
        }

    @classmethod
    def from_json(cls, obj: object) -> Assignment:
        """Validate an assignment (the runner calls this before doing anything)."""
        if isinstance(obj, dict) and obj.get("assignment_version") != ASSIGNMENT_VERSION:
            raise ProtocolError(
                "unsupported_assignment",
                f"assignment version {obj.get('assignment_version')!r} is not supported; "
                f"this runner understands version {ASSIGNMENT_VERSION}",
            )
        positive = (True, lambda v, n: parse_decimal(v, n, positive=True))
        parsed = parse_object(
            obj,
            {
                "assignment_version": (True, lambda v, n: v),
                "attempt_id": positive,
                "attempt_number": (True, lambda v, n: integer(v, n, 1, 1_000_000)),
                "state": (True, lambda v, n: choice(v, n, ATTEMPT_STATES)),
                "run_id": positive,
                "run_number": positive,
                "job_id": positive,
                "job_key": (True, string),
                "job_workflow_id": (True, string),
                "job_name": (True, string),
                "timeout_minutes": (True, lambda v, n: integer(v, n, 1, 10_080)),
                "steps": (True, parse_steps),
                "outputs": (True, _job_outputs),
                "contexts": (True, _contexts),
                "source_archive_path": (True, _archive_path),
                "actions": (True, parse_actions),
                "lease_deadline_ms": (True, parse_decimal),
                "job_deadline_ms": (True, parse_decimal),
                "server_time_ms": (True, parse_decimal),
            },
            "assignment",
            versioned=False,
        )
        check_action_keys(parsed["steps"], parsed["actions"], "steps")
        return cls(**parsed)


def _job_outputs(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object")
    for key in value:
        if not OUTPUT_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid output name")
    return {key: parse_value(item, f"{name}.{key}") for key, item in value.items()}


def _contexts(value: object, name: str) -> dict[str, Any]:
    parsed = parse_object(
        value,
        {
            "github": (True, _json_object),
            "matrix": (True, _json_object_or_null),
            "strategy": (True, _json_object_or_null),
            "needs": (True, _json_object),
            "inputs": (False, _json_object),
            "vars": (False, _json_object),
        },
        name,
        versioned=False,
    )
    return parsed


def _json_object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object")
    return value


def _json_object_or_null(value: object, name: str) -> dict[str, Any] | None:
    return None if value is None else _json_object(value, name)


def _archive_path(value: object, name: str) -> str:
    if value == "":
        return ""
    return archive_path(value, name)


def claim_body(assignment: Assignment | None, server_time_ms: int) -> dict[str, Any]:
    """The response to ``POST claims``: an assignment or ``null`` (poll again later)."""
    return {
        "version": PROTOCOL_VERSION,
        "assignment": None if assignment is None else assignment.to_json(),
        "server_time_ms": decimal(server_time_ms),
    }


def parse_claim_response(obj: object) -> Assignment | None:
    parsed = parse_object(
        obj,
        {
            "assignment": (True, lambda v, n: None if v is None else Assignment.from_json(v)),
            "server_time_ms": (True, parse_decimal),
        },
        "claim response",
    )
    assignment: Assignment | None = parsed["assignment"]
    return assignment
