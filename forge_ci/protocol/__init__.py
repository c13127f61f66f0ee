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

Every public name is re-exported here, so ``from forge_ci.protocol import X`` keeps working.

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
