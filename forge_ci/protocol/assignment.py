"""The assignment: everything the runner needs for one attempt, sent on claim (and replay).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from forge_ci.protocol.api import API_PREFIX, ATTEMPT_STATES
from forge_ci.protocol.fields import (
    ENV_NAME_RE,
    OUTPUT_NAME_RE,
    PROTOCOL_VERSION,
    ProtocolError,
    choice,
    decimal,
    integer,
    invalid,
    parse_decimal,
    parse_object,
    parse_step_id,
    string,
)

#: Version of the ``assignment`` object sent on claim (independent of the HTTP protocol).
ASSIGNMENT_VERSION: Final = 1
#: ``uses`` of the built-in checkout step (the workflow engine plans it, the runner runs it).
CHECKOUT: Final = "forge-ci/checkout@v1"


# --- The assignment ------------------------------------------------------------------------------
#
# A value in the plan is text or a runtime template {"template": [text | {"expr": source}]};
# an env value may also be a secret reference {"secret": NAME} whose value arrives in the
# assignment's "secrets" channel, keyed by step id and env name.


def parse_value(value: object, name: str) -> str | dict[str, Any]:
    """Text, or a runtime template ``{"template": [str | {"expr": str}, ...]}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"template"}:
        parts = value["template"]
        if not isinstance(parts, list) or not parts:
            raise invalid(f"{name}.template must be a non-empty array")
        for index, part in enumerate(parts):
            if isinstance(part, str):
                continue
            if not (
                isinstance(part, dict) and set(part) == {"expr"} and isinstance(part["expr"], str)
            ):
                raise invalid(f'{name}.template[{index}] must be text or {{"expr": text}}')
        return {"template": list(parts)}
    raise invalid(f"{name} must be text or a template object")


def parse_env_value(value: object, name: str) -> str | dict[str, Any]:
    if isinstance(value, dict) and set(value) == {"secret"}:
        secret = value["secret"]
        if not isinstance(secret, str) or not ENV_NAME_RE.fullmatch(secret):
            raise invalid(f"{name}.secret must be a secret name")
        return {"secret": secret}
    return parse_value(value, name)


def _env(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object")
    result: dict[str, str | dict[str, Any]] = {}
    for key, item in value.items():
        if not ENV_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid environment variable name")
        result[key] = parse_env_value(item, f"{name}.{key}")
    return result


def _continue_on_error(value: object, name: str) -> bool | dict[str, str]:
    if isinstance(value, bool):
        return value
    if isinstance(value, dict) and set(value) == {"expr"} and isinstance(value["expr"], str):
        return {"expr": value["expr"]}
    raise invalid(f'{name} must be true, false or {{"expr": text}}')


@dataclass(frozen=True)
class AssignmentStep:
    """One step of the job, from the run's immutable plan."""

    id: str
    name: str | dict[str, Any]
    #: :data:`CHECKOUT` for the built-in checkout, ``""`` for a ``run`` step.
    uses: str
    #: The script (``""`` for a ``uses`` step); may be a runtime template.
    run: str | dict[str, Any]
    #: ``""``: the default shell.
    shell: str
    #: ``""``: the workspace; may be a runtime template (the runner keeps it in the workspace).
    working_directory: str | dict[str, Any]
    env: dict[str, str | dict[str, Any]]
    #: The step's condition expression (``success()`` by default).
    condition: str
    continue_on_error: bool | dict[str, str]
    #: ``0``: no separate step limit (the job deadline still applies).
    timeout_minutes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "uses": self.uses,
            "run": self.run,
            "shell": self.shell,
            "working_directory": self.working_directory,
            "env": self.env,
            "if": self.condition,
            "continue_on_error": self.continue_on_error,
            "timeout_minutes": self.timeout_minutes,
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> AssignmentStep:
        parsed = parse_object(
            obj,
            {
                "id": (True, parse_step_id),
                "name": (True, parse_value),
                "uses": (True, string),
                "run": (True, parse_value),
                "shell": (True, string),
                "working_directory": (True, parse_value),
                "env": (True, _env),
                "if": (True, string),
                "continue_on_error": (True, _continue_on_error),
                "timeout_minutes": (True, lambda v, n: integer(v, n, 0, 10_080)),
            },
            name,
            versioned=False,
        )
        parsed["condition"] = parsed.pop("if")
        return cls(**parsed)


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
    #: Secret values by step id and env name, for env values ``{"secret": NAME}``.
    secrets: dict[str, dict[str, str]]
    #: Path (under the server origin) of the ``tar`` snapshot of the pinned commit; ``""`` when
    #: the job may not read the source (``permissions: {contents: none}``).
    source_archive_path: str
    lease_deadline_ms: int
    job_deadline_ms: int
    server_time_ms: int
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
            "secrets": self.secrets,
            "source_archive_path": self.source_archive_path,
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
                "steps": (True, _steps),
                "outputs": (True, _job_outputs),
                "contexts": (True, _contexts),
                "secrets": (True, _secrets),
                "source_archive_path": (True, _archive_path),
                "lease_deadline_ms": (True, parse_decimal),
                "job_deadline_ms": (True, parse_decimal),
                "server_time_ms": (True, parse_decimal),
            },
            "assignment",
            versioned=False,
        )
        return cls(**parsed)


def _steps(value: object, name: str) -> tuple[AssignmentStep, ...]:
    if not isinstance(value, list) or not value:
        raise invalid(f"{name} must be a non-empty array")
    steps = tuple(AssignmentStep.from_json(item, f"{name}[{i}]") for i, item in enumerate(value))
    ids = [step.id for step in steps]
    if len(set(ids)) != len(ids):
        raise invalid(f"{name}: step ids are not unique")
    return steps


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


def _secrets(value: object, name: str) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object")
    result: dict[str, dict[str, str]] = {}
    for step_id, env in value.items():
        parse_step_id(step_id, f"{name} key")
        if not isinstance(env, dict):
            raise invalid(f"{name}.{step_id} must be an object")
        for env_name, secret in env.items():
            if not ENV_NAME_RE.fullmatch(env_name) or not isinstance(secret, str):
                raise invalid(f"{name}.{step_id} must map env names to text")
        result[step_id] = dict(env)
    return result


def _archive_path(value: object, name: str) -> str:
    text = string(value, name)
    if text == "":
        return text
    if not text.startswith(API_PREFIX + "/") or "?" in text or "#" in text or ".." in text:
        raise invalid(f"{name} must be a path under {API_PREFIX}")
    return text


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
