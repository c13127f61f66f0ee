"""Runner protocol wire types: strict parsing and rendering of every runner message.

Standard library only: the in-container runner imports this package under ``python -S`` (the
runner image copies the whole directory; see deploy/runner.Dockerfile). Nothing here knows about
HTTP frameworks, databases or workflow syntax trees; the server and the runner both validate with
the same functions, so they cannot drift apart. One module per channel::

    fields        strict JSON and the scalars every message is made of (ProtocolError)
      ^
    api           provider/runner -> server: requests to /-/runner-api/v1, AttemptStatus
      ^
    steps         a step of the plan (a job's or a composite action's): AssignmentStep
      ^
    actions       the actions a job may run, with their metadata: Action, ActionMetadata
      ^
    assignment    server -> runner on claim: Assignment, claim_body
      ^
    runner_input  provider -> runner: the envelope on the runner's standard input

Every public name is re-exported here, so ``from forge_ci.protocol import X`` keeps working; each
is imported on first use, so a light caller (the workflow parser) loads only the modules it reads.

Encoding rules (``docs/runner-protocol.md`` is the reference for runner authors):

- Every request is a JSON object with ``"version": 1``; unknown fields, duplicate keys,
  ``NaN``/``Infinity`` and other versions are rejected.
- IDs, sequences, cursors and millisecond timestamps are *canonical decimal strings*: ASCII
  digits only, no sign, no whitespace, no leading zeros, within the signed 64-bit range; IDs are
  positive. ``version``, ``timeout_minutes``, ``exit_code`` and ``wait_seconds`` are JSON numbers.
- "Absent" is never an encoding: an empty string (``""``) or ``"0"`` has a documented meaning
  instead (``job_deadline_ms: "0"``: not started; ``conclusion: ""``: not completed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge_ci.protocol.actions import (
        ACTION_KINDS,
        COMPOSITE,
        NODE_RUNTIMES,
        Action,
        ActionInput,
        ActionMetadata,
        ActionRuns,
        HookStep,
        action_key,
        hook_steps,
    )
    from forge_ci.protocol.api import (
        API_PREFIX,
        ATTEMPT_CONCLUSIONS,
        ATTEMPT_STATES,
        BODY_READ_DEADLINE_SECONDS,
        ENDPOINTS,
        LOG_STREAMS,
        MAX_ATTEMPT_SECRET_BYTES,
        MAX_BODY_BYTES,
        MAX_EGRESS_POLICY_BYTES,
        MAX_LOG_TEXT_BYTES,
        MAX_OUTPUT_NAME,
        MAX_OUTPUTS,
        MAX_SUMMARY_BYTES,
        MAX_WAIT_SECONDS,
        RECORD_STREAMS,
        REPORTED_CONCLUSIONS,
        STEP_CONCLUSIONS,
        STEP_WIRE_STATES,
        Annotation,
        AttemptStatus,
        ClaimRequest,
        CompleteRequest,
        HeartbeatRequest,
        LogRequest,
        SecretsRequest,
        SourceRequest,
        StartRequest,
        StepRequest,
        error_body,
        parse_request,
        parse_secrets_response,
        request_body,
        secrets_body,
    )
    from forge_ci.protocol.assignment import (
        ASSIGNMENT_VERSION,
        CHECKOUT,
        Assignment,
        AssignmentStep,
        claim_body,
        parse_claim_response,
        parse_env_value,
        parse_value,
    )
    from forge_ci.protocol.egress import MAX_EGRESS_RECORDS, EgressRecord, EgressRequest
    from forge_ci.protocol.fields import (
        INT64_MAX,
        PROTOCOL_VERSION,
        ProtocolError,
        decimal,
        dumps,
        loads,
        parse_decimal,
        parse_step_id,
        parse_token,
    )
    from forge_ci.protocol.runner_input import (
        MAX_RUNNER_INPUT_BYTES,
        MIN_STEP_MINUTE_SECONDS,
        RUNNER_API_SOCKET,
        RUNNER_API_SOCKET_NAME,
        RUNNER_EGRESS_SOCKET,
        RUNNER_EGRESS_SOCKET_NAME,
        RUNNER_INPUT_VERSION,
        RUNNER_SOCKET_DIR,
        RUNNER_WORKSPACE,
        STEP_MINUTE_SECONDS,
        RunnerInput,
        parse_runner_input,
    )

#: Each re-exported name -> its module, imported on first use: the workflow parser needs one
#: constant of ``steps`` and must not pay for the whole runner API.
_EXPORTS = {
    "ACTION_KINDS": "forge_ci.protocol.actions",
    "COMPOSITE": "forge_ci.protocol.actions",
    "NODE_RUNTIMES": "forge_ci.protocol.actions",
    "Action": "forge_ci.protocol.actions",
    "ActionInput": "forge_ci.protocol.actions",
    "ActionMetadata": "forge_ci.protocol.actions",
    "ActionRuns": "forge_ci.protocol.actions",
    "HookStep": "forge_ci.protocol.actions",
    "action_key": "forge_ci.protocol.actions",
    "hook_steps": "forge_ci.protocol.actions",
    "API_PREFIX": "forge_ci.protocol.api",
    "ATTEMPT_CONCLUSIONS": "forge_ci.protocol.api",
    "ATTEMPT_STATES": "forge_ci.protocol.api",
    "BODY_READ_DEADLINE_SECONDS": "forge_ci.protocol.api",
    "ENDPOINTS": "forge_ci.protocol.api",
    "LOG_STREAMS": "forge_ci.protocol.api",
    "MAX_ATTEMPT_SECRET_BYTES": "forge_ci.protocol.api",
    "MAX_BODY_BYTES": "forge_ci.protocol.api",
    "MAX_EGRESS_POLICY_BYTES": "forge_ci.protocol.api",
    "MAX_LOG_TEXT_BYTES": "forge_ci.protocol.api",
    "MAX_OUTPUT_NAME": "forge_ci.protocol.api",
    "MAX_OUTPUTS": "forge_ci.protocol.api",
    "MAX_SUMMARY_BYTES": "forge_ci.protocol.api",
    "MAX_WAIT_SECONDS": "forge_ci.protocol.api",
    "RECORD_STREAMS": "forge_ci.protocol.api",
    "REPORTED_CONCLUSIONS": "forge_ci.protocol.api",
    "STEP_CONCLUSIONS": "forge_ci.protocol.api",
    "STEP_WIRE_STATES": "forge_ci.protocol.api",
    "Annotation": "forge_ci.protocol.api",
    "AttemptStatus": "forge_ci.protocol.api",
    "ClaimRequest": "forge_ci.protocol.api",
    "CompleteRequest": "forge_ci.protocol.api",
    "HeartbeatRequest": "forge_ci.protocol.api",
    "LogRequest": "forge_ci.protocol.api",
    "SecretsRequest": "forge_ci.protocol.api",
    "SourceRequest": "forge_ci.protocol.api",
    "StartRequest": "forge_ci.protocol.api",
    "StepRequest": "forge_ci.protocol.api",
    "error_body": "forge_ci.protocol.api",
    "parse_request": "forge_ci.protocol.api",
    "parse_secrets_response": "forge_ci.protocol.api",
    "request_body": "forge_ci.protocol.api",
    "secrets_body": "forge_ci.protocol.api",
    "ASSIGNMENT_VERSION": "forge_ci.protocol.assignment",
    "CHECKOUT": "forge_ci.protocol.assignment",
    "Assignment": "forge_ci.protocol.assignment",
    "AssignmentStep": "forge_ci.protocol.assignment",
    "claim_body": "forge_ci.protocol.assignment",
    "parse_claim_response": "forge_ci.protocol.assignment",
    "parse_env_value": "forge_ci.protocol.assignment",
    "parse_value": "forge_ci.protocol.assignment",
    "MAX_EGRESS_RECORDS": "forge_ci.protocol.egress",
    "EgressRecord": "forge_ci.protocol.egress",
    "EgressRequest": "forge_ci.protocol.egress",
    "INT64_MAX": "forge_ci.protocol.fields",
    "PROTOCOL_VERSION": "forge_ci.protocol.fields",
    "ProtocolError": "forge_ci.protocol.fields",
    "decimal": "forge_ci.protocol.fields",
    "dumps": "forge_ci.protocol.fields",
    "loads": "forge_ci.protocol.fields",
    "parse_decimal": "forge_ci.protocol.fields",
    "parse_step_id": "forge_ci.protocol.fields",
    "parse_token": "forge_ci.protocol.fields",
    "MAX_RUNNER_INPUT_BYTES": "forge_ci.protocol.runner_input",
    "MIN_STEP_MINUTE_SECONDS": "forge_ci.protocol.runner_input",
    "RUNNER_API_SOCKET": "forge_ci.protocol.runner_input",
    "RUNNER_API_SOCKET_NAME": "forge_ci.protocol.runner_input",
    "RUNNER_EGRESS_SOCKET": "forge_ci.protocol.runner_input",
    "RUNNER_EGRESS_SOCKET_NAME": "forge_ci.protocol.runner_input",
    "RUNNER_INPUT_VERSION": "forge_ci.protocol.runner_input",
    "RUNNER_SOCKET_DIR": "forge_ci.protocol.runner_input",
    "RUNNER_WORKSPACE": "forge_ci.protocol.runner_input",
    "STEP_MINUTE_SECONDS": "forge_ci.protocol.runner_input",
    "RunnerInput": "forge_ci.protocol.runner_input",
    "parse_runner_input": "forge_ci.protocol.runner_input",
}

__all__ = [
    "MAX_EGRESS_RECORDS",
    "EgressRecord",
    "EgressRequest",
    "ACTION_KINDS",
    "Action",
    "ActionInput",
    "ActionMetadata",
    "ActionRuns",
    "COMPOSITE",
    "NODE_RUNTIMES",
    "HookStep",
    "action_key",
    "hook_steps",
    "API_PREFIX",
    "ASSIGNMENT_VERSION",
    "ATTEMPT_CONCLUSIONS",
    "ATTEMPT_STATES",
    "Assignment",
    "AssignmentStep",
    "CHECKOUT",
    "Annotation",
    "AttemptStatus",
    "BODY_READ_DEADLINE_SECONDS",
    "ClaimRequest",
    "CompleteRequest",
    "ENDPOINTS",
    "HeartbeatRequest",
    "INT64_MAX",
    "LOG_STREAMS",
    "LogRequest",
    "MAX_ATTEMPT_SECRET_BYTES",
    "MAX_BODY_BYTES",
    "MAX_EGRESS_POLICY_BYTES",
    "MAX_LOG_TEXT_BYTES",
    "MAX_OUTPUTS",
    "MAX_OUTPUT_NAME",
    "MAX_RUNNER_INPUT_BYTES",
    "MAX_SUMMARY_BYTES",
    "MAX_WAIT_SECONDS",
    "MIN_STEP_MINUTE_SECONDS",
    "PROTOCOL_VERSION",
    "ProtocolError",
    "RECORD_STREAMS",
    "REPORTED_CONCLUSIONS",
    "RUNNER_API_SOCKET",
    "RUNNER_API_SOCKET_NAME",
    "RUNNER_EGRESS_SOCKET",
    "RUNNER_EGRESS_SOCKET_NAME",
    "RUNNER_INPUT_VERSION",
    "RUNNER_SOCKET_DIR",
    "RUNNER_WORKSPACE",
    "RunnerInput",
    "STEP_CONCLUSIONS",
    "STEP_MINUTE_SECONDS",
    "STEP_WIRE_STATES",
    "SecretsRequest",
    "SourceRequest",
    "StartRequest",
    "StepRequest",
    "claim_body",
    "decimal",
    "dumps",
    "error_body",
    "loads",
    "parse_claim_response",
    "parse_decimal",
    "parse_env_value",
    "parse_request",
    "parse_runner_input",
    "parse_secrets_response",
    "parse_step_id",
    "parse_token",
    "parse_value",
    "request_body",
    "secrets_body",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'forge_ci.protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
