"""Runner protocol wire types: strict parsing and rendering of every runner API message.

Standard library only: the in-container runner imports this module under ``python -S``. Nothing
here knows about HTTP frameworks, databases or workflow syntax trees; the server and the runner
both validate with the same functions, so they cannot drift apart.

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

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

PROTOCOL_VERSION: Final = 1
#: Version of the ``assignment`` object sent on claim (independent of the HTTP protocol).
ASSIGNMENT_VERSION: Final = 1
API_PREFIX: Final = "/-/runner-api/v1"

MAX_BODY_BYTES: Final = 64 * 1024
#: Text of one log chunk, in UTF-8 bytes. The body limit applies too, so with JSON escaping a
#: runner should send at most 32 KiB of text per chunk.
MAX_LOG_TEXT_BYTES: Final = 64 * 1024
BODY_READ_DEADLINE_SECONDS: Final = 10.0
MAX_WAIT_SECONDS: Final = 3600.0
MAX_OUTPUTS: Final = 64
MAX_OUTPUT_NAME: Final = 100

INT64_MAX: Final = 2**63 - 1

ATTEMPT_STATES: Final = ("leased", "running", "completed")
STEP_WIRE_STATES: Final = ("running", "completed")
STEP_CONCLUSIONS: Final = ("success", "failure", "cancelled", "skipped", "timed_out")
#: What a runner may report at completion (``lost`` is decided by the server only).
REPORTED_CONCLUSIONS: Final = ("success", "failure", "cancelled", "timed_out")
ATTEMPT_CONCLUSIONS: Final = ("success", "failure", "cancelled", "timed_out", "lost")
LOG_STREAMS: Final = ("stdout", "stderr")
#: Streams of stored log records: the runner's two plus server notices.
RECORD_STREAMS: Final = ("stdout", "stderr", "system")

_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class ProtocolError(Exception):
    """A message broke the wire format. ``code`` is stable; ``status`` is the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


def _invalid(message: str) -> ProtocolError:
    return ProtocolError("invalid_request", message)


# --- Scalars -------------------------------------------------------------------------------------


def parse_decimal(value: object, name: str, *, positive: bool = False) -> int:
    """A canonical decimal string as an int (``positive``: IDs, which start at 1)."""
    if not isinstance(value, str):
        raise _invalid(f'{name} must be a decimal string such as "1", not {_kind(value)}')
    if not value.isascii() or not _DECIMAL.fullmatch(value):
        raise _invalid(
            f"{name} must be a canonical decimal string (digits only, no sign, spaces or "
            f"leading zeros), got {value[:40]!r}"
        )
    number = int(value)
    if number > INT64_MAX:
        raise _invalid(f"{name} is larger than the 64-bit limit")
    if positive and number == 0:
        raise _invalid(f"{name} must be at least 1")
    return number


def decimal(number: int) -> str:
    """An int as a canonical decimal string (the inverse of :func:`parse_decimal`)."""
    if number < 0 or number > INT64_MAX:
        raise ValueError(f"{number} is outside the wire range")
    return str(number)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _string(value: object, name: str, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string, not {_kind(value)}")
    if max_bytes is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise _invalid(f"{name} is longer than {max_bytes} bytes")
    return value


def _utf8(value: str, name: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"{name} contains a lone surrogate; send valid UTF-8 text") from None
    if "\x00" in value:
        raise _invalid(f"{name} contains a NUL character")
    return value


def _hex(value: object, name: str, pattern: re.Pattern[str], length: int) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _invalid(f"{name} must be {length} lowercase hexadecimal characters")
    return value


def parse_token(value: object, name: str = "credential") -> str:
    """A 64-character lowercase hex credential (32 random bytes)."""
    return _hex(value, name, _HEX64, 64)


def _integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{name} must be a whole JSON number, not {_kind(value)}")
    if not low <= value <= high:
        raise _invalid(f"{name} must be between {low} and {high}, got {value}")
    return value


def _boolean(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be true or false, not {_kind(value)}")
    return value


def _choice(value: object, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _invalid(f"{name} must be one of {', '.join(allowed)}; got {value!r}"[:300])
    return value


# --- Parsing JSON bodies -------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _invalid(f"field {key!r} appears twice")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise _invalid(f"{name} is not valid JSON")


def loads(body: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("the body is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except ProtocolError:
        raise
    except (ValueError, RecursionError):
        raise _invalid("the body is not valid JSON") from None


def dumps(value: Any) -> bytes:
    """Compact, deterministic JSON as sent on the wire."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


#: field name -> (required, parser)
_Fields = Mapping[str, tuple[bool, Callable[[object, str], Any]]]


def _object(obj: object, fields: _Fields, what: str, *, versioned: bool = True) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _invalid(f"{what} must be a JSON object, not {_kind(obj)}")
    if versioned:
        if "version" not in obj:
            raise _invalid(f"{what}: field 'version' is required")
        version = obj["version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise _invalid(f"{what}: version must be the number {PROTOCOL_VERSION}")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(
                "unsupported_version",
                f"{what}: protocol version {version} is not supported; this server speaks "
                f"version {PROTOCOL_VERSION}",
            )
    allowed = set(fields) | ({"version"} if versioned else set())
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise _invalid(f"{what}: unknown field {unknown[0]!r}"[:200])
    parsed: dict[str, Any] = {}
    for name, (required, parse) in fields.items():
        if name not in obj:
            if required:
                raise _invalid(f"{what}: field {name!r} is required")
            continue
        parsed[name] = parse(obj[name], name)
    return parsed


# --- Requests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimRequest:
    """``POST claims``: a provider asks for work (provider credential)."""

    #: 16 random bytes in hex, fresh for every new claim; reused only to retry a lost response.
    request_id: str
    #: The credential the attempt will use: 32 random bytes in hex, generated by the provider.
    attempt_token: str
    #: Wait at most this long for work (bounded by the server's limit); None: the server's limit.
    wait_seconds: float | None = None


@dataclass(frozen=True)
class StartRequest:
    """``POST attempts/<id>/start``: bind one runner instance; fixes the job deadline."""

    execution_id: str


@dataclass(frozen=True)
class HeartbeatRequest:
    """``POST attempts/<id>/heartbeat``: renew the lease (only after start)."""

    #: The bound execution, or ``""`` before start (status only, no renewal).
    execution_id: str


@dataclass(frozen=True)
class SourceRequest:
    """``POST attempts/<id>/source.tar``: the pinned commit as a ``tar`` (running attempts only)."""

    execution_id: str


@dataclass(frozen=True)
class StepRequest:
    """``POST attempts/<id>/steps``: a step started or ended."""

    execution_id: str
    step_id: str
    state: str
    #: ``""`` while running; a step conclusion once completed.
    conclusion: str
    #: The process exit status, or -1 when there is none (not run, skipped, killed).
    exit_code: int
    #: The runner's evaluation of the step's ``continue-on-error``: a failed step that
    #: continues on error does not fail the job.
    continue_on_error: bool


@dataclass(frozen=True)
class LogRequest:
    """``POST attempts/<id>/logs``: one chunk of output."""

    execution_id: str
    sequence: int
    #: A step id of the assignment, or ``""`` for job-level (setup) output.
    step_id: str
    stream: str
    text: str


@dataclass(frozen=True)
class CompleteRequest:
    """``POST attempts/<id>/complete``: the runner's result."""

    execution_id: str
    conclusion: str
    #: The last acknowledged log sequence ("0" when nothing was logged).
    last_log_sequence: int
    outputs: dict[str, str] = field(default_factory=dict)


def _execution_id(value: object, name: str) -> str:
    return _hex(value, name, _HEX32, 32)


def _execution_id_or_empty(value: object, name: str) -> str:
    if value == "":
        return ""
    return _execution_id(value, name)


def _step_id_or_empty(value: object, name: str) -> str:
    if value == "":
        return ""
    return parse_step_id(value, name)


def parse_step_id(value: object, name: str = "step_id") -> str:
    if not isinstance(value, str) or not _STEP_ID.fullmatch(value):
        raise _invalid(
            f"{name} must be a step id (a letter or '_', then letters, digits, '_' or '-')"
        )
    return value


def _wait(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{name} must be a JSON number of seconds, not {_kind(value)}")
    if not 0 <= value <= MAX_WAIT_SECONDS:
        raise _invalid(f"{name} must be between 0 and {MAX_WAIT_SECONDS:g}")
    return float(value)


def _log_text(value: object, name: str) -> str:
    text = _utf8(_string(value, name), name)
    if len(text.encode("utf-8")) > MAX_LOG_TEXT_BYTES:
        raise ProtocolError(
            "chunk_too_large", f"{name} is longer than {MAX_LOG_TEXT_BYTES} bytes", 413
        )
    return text


def _outputs(value: object, name: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object of strings, not {_kind(value)}")
    if len(value) > MAX_OUTPUTS:
        raise _invalid(f"{name} has more than {MAX_OUTPUTS} entries")
    result: dict[str, str] = {}
    for key, item in value.items():
        if not _OUTPUT_NAME.fullmatch(key):
            raise _invalid(f"{name}: {key[:100]!r} is not a valid output name")
        result[key] = _utf8(_string(item, f"{name}.{key}"), f"{name}.{key}")
    return result


_REQUESTS: dict[str, tuple[type[Any], _Fields]] = {
    "claims": (
        ClaimRequest,
        {
            "request_id": (True, lambda v, n: _hex(v, n, _HEX32, 32)),
            "attempt_token": (True, parse_token),
            "wait_seconds": (False, _wait),
        },
    ),
    "start": (StartRequest, {"execution_id": (True, _execution_id)}),
    "heartbeat": (HeartbeatRequest, {"execution_id": (True, _execution_id_or_empty)}),
    "source": (SourceRequest, {"execution_id": (True, _execution_id)}),
    "steps": (
        StepRequest,
        {
            "execution_id": (True, _execution_id),
            "step_id": (True, parse_step_id),
            "state": (True, lambda v, n: _choice(v, n, STEP_WIRE_STATES)),
            "conclusion": (True, lambda v, n: _choice(v, n, ("", *STEP_CONCLUSIONS))),
            "exit_code": (True, lambda v, n: _integer(v, n, -1, 255)),
            "continue_on_error": (True, _boolean),
        },
    ),
    "logs": (
        LogRequest,
        {
            "execution_id": (True, _execution_id),
            "sequence": (True, lambda v, n: parse_decimal(v, n, positive=True)),
            "step_id": (True, _step_id_or_empty),
            "stream": (True, lambda v, n: _choice(v, n, LOG_STREAMS)),
            "text": (True, _log_text),
        },
    ),
    "complete": (
        CompleteRequest,
        {
            "execution_id": (True, _execution_id_or_empty),
            "conclusion": (True, lambda v, n: _choice(v, n, REPORTED_CONCLUSIONS)),
            "last_log_sequence": (True, parse_decimal),
            "outputs": (False, _outputs),
        },
    ),
}

ENDPOINTS: Final = tuple(_REQUESTS)


def parse_request(endpoint: str, body: bytes) -> Any:
    """Parse the body of a request to ``endpoint`` into its dataclass, or raise ProtocolError."""
    cls, fields_ = _REQUESTS[endpoint]
    parsed = _object(loads(body), fields_, endpoint)
    request = cls(**parsed)
    if isinstance(request, StepRequest):
        if (request.state == "completed") != (request.conclusion != ""):
            raise _invalid("steps: conclusion is required exactly when state is completed")
    return request


def request_body(request: Any) -> dict[str, Any]:
    """The JSON object for a request dataclass (used by runners and tests)."""
    body: dict[str, Any] = {"version": PROTOCOL_VERSION}
    for name, value in request.__dict__.items():
        if value is None:
            continue
        body[name] = decimal(value) if name in ("sequence", "last_log_sequence") else value
    return body


# --- Responses -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptStatus:
    """What every attempt endpoint answers: the server's view of the attempt right now."""

    attempt_id: int
    state: str
    #: The bound runner instance, ``""`` before start.
    execution_id: str
    acknowledged_log_sequence: int
    #: When the lease ends unless renewed (epoch ms); ``0`` once completed.
    lease_deadline_ms: int
    #: The fixed job deadline (epoch ms), ``0`` before start.
    job_deadline_ms: int
    server_time_ms: int
    #: Stop now: the run was cancelled, access was removed, a limit was reached...
    cancel_requested: bool
    #: Why cancellation was requested (``""`` when it was not).
    cancel_reason: str
    #: ``""`` until completed.
    conclusion: str

    def to_json(self) -> dict[str, Any]:
        return {
            "version": PROTOCOL_VERSION,
            "attempt_id": decimal(self.attempt_id),
            "state": self.state,
            "execution_id": self.execution_id,
            "acknowledged_log_sequence": decimal(self.acknowledged_log_sequence),
            "lease_deadline_ms": decimal(self.lease_deadline_ms),
            "job_deadline_ms": decimal(self.job_deadline_ms),
            "server_time_ms": decimal(self.server_time_ms),
            "cancel_requested": self.cancel_requested,
            "cancel_reason": self.cancel_reason,
            "conclusion": self.conclusion,
        }

    @classmethod
    def from_json(cls, obj: object) -> AttemptStatus:
        parsed = _object(
            obj,
            {
                "attempt_id": (True, lambda v, n: parse_decimal(v, n, positive=True)),
                "state": (True, lambda v, n: _choice(v, n, ATTEMPT_STATES)),
                "execution_id": (True, _execution_id_or_empty),
                "acknowledged_log_sequence": (True, parse_decimal),
                "lease_deadline_ms": (True, parse_decimal),
                "job_deadline_ms": (True, parse_decimal),
                "server_time_ms": (True, parse_decimal),
                "cancel_requested": (True, _boolean),
                "cancel_reason": (True, _string),
                "conclusion": (True, lambda v, n: _choice(v, n, ("", *ATTEMPT_CONCLUSIONS))),
            },
            "attempt status",
        )
        return cls(**parsed)


def error_body(code: str, message: str) -> dict[str, Any]:
    """The body of every error response."""
    return {"version": PROTOCOL_VERSION, "error": {"code": code, "message": message}}


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
            raise _invalid(f"{name}.template must be a non-empty array")
        for index, part in enumerate(parts):
            if isinstance(part, str):
                continue
            if not (
                isinstance(part, dict) and set(part) == {"expr"} and isinstance(part["expr"], str)
            ):
                raise _invalid(f'{name}.template[{index}] must be text or {{"expr": text}}')
        return {"template": list(parts)}
    raise _invalid(f"{name} must be text or a template object")


def parse_env_value(value: object, name: str) -> str | dict[str, Any]:
    if isinstance(value, dict) and set(value) == {"secret"}:
        secret = value["secret"]
        if not isinstance(secret, str) or not _ENV_NAME.fullmatch(secret):
            raise _invalid(f"{name}.secret must be a secret name")
        return {"secret": secret}
    return parse_value(value, name)


def _env(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object")
    result: dict[str, str | dict[str, Any]] = {}
    for key, item in value.items():
        if not _ENV_NAME.fullmatch(key):
            raise _invalid(f"{name}: {key[:100]!r} is not a valid environment variable name")
        result[key] = parse_env_value(item, f"{name}.{key}")
    return result


def _continue_on_error(value: object, name: str) -> bool | dict[str, str]:
    if isinstance(value, bool):
        return value
    if isinstance(value, dict) and set(value) == {"expr"} and isinstance(value["expr"], str):
        return {"expr": value["expr"]}
    raise _invalid(f'{name} must be true, false or {{"expr": text}}')


@dataclass(frozen=True)
class AssignmentStep:
    """One step of the job, from the run's immutable plan."""

    id: str
    name: str | dict[str, Any]
    #: ``"forge-ci/checkout@v1"`` for the built-in checkout, ``""`` for a ``run`` step.
    uses: str
    #: The script (``""`` for a ``uses`` step); may be a runtime template.
    run: str | dict[str, Any]
    #: ``""``: the default shell.
    shell: str
    #: ``""``: the workspace.
    working_directory: str
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
        parsed = _object(
            obj,
            {
                "id": (True, parse_step_id),
                "name": (True, parse_value),
                "uses": (True, _string),
                "run": (True, parse_value),
                "shell": (True, _string),
                "working_directory": (True, _string),
                "env": (True, _env),
                "if": (True, _string),
                "continue_on_error": (True, _continue_on_error),
                "timeout_minutes": (True, lambda v, n: _integer(v, n, 0, 10_080)),
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
    #: Expression contexts: ``github``, ``matrix``, ``strategy``, ``needs`` (``inputs`` later).
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
        parsed = _object(
            obj,
            {
                "assignment_version": (True, lambda v, n: v),
                "attempt_id": positive,
                "attempt_number": (True, lambda v, n: _integer(v, n, 1, 1_000_000)),
                "state": (True, lambda v, n: _choice(v, n, ATTEMPT_STATES)),
                "run_id": positive,
                "run_number": positive,
                "job_id": positive,
                "job_key": (True, _string),
                "job_workflow_id": (True, _string),
                "job_name": (True, _string),
                "timeout_minutes": (True, lambda v, n: _integer(v, n, 1, 10_080)),
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
        raise _invalid(f"{name} must be a non-empty array")
    steps = tuple(AssignmentStep.from_json(item, f"{name}[{i}]") for i, item in enumerate(value))
    ids = [step.id for step in steps]
    if len(set(ids)) != len(ids):
        raise _invalid(f"{name}: step ids are not unique")
    return steps


def _job_outputs(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object")
    for key in value:
        if not _OUTPUT_NAME.fullmatch(key):
            raise _invalid(f"{name}: {key[:100]!r} is not a valid output name")
    return {key: parse_value(item, f"{name}.{key}") for key, item in value.items()}


def _contexts(value: object, name: str) -> dict[str, Any]:
    parsed = _object(
        value,
        {
            "github": (True, _json_object),
            "matrix": (True, _json_object_or_null),
            "strategy": (True, _json_object_or_null),
            "needs": (True, _json_object),
        },
        name,
        versioned=False,
    )
    return parsed


def _json_object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object")
    return value


def _json_object_or_null(value: object, name: str) -> dict[str, Any] | None:
    return None if value is None else _json_object(value, name)


def _secrets(value: object, name: str) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object")
    result: dict[str, dict[str, str]] = {}
    for step_id, env in value.items():
        parse_step_id(step_id, f"{name} key")
        if not isinstance(env, dict):
            raise _invalid(f"{name}.{step_id} must be an object")
        for env_name, secret in env.items():
            if not _ENV_NAME.fullmatch(env_name) or not isinstance(secret, str):
                raise _invalid(f"{name}.{step_id} must map env names to text")
        result[step_id] = dict(env)
    return result


def _archive_path(value: object, name: str) -> str:
    text = _string(value, name)
    if text == "":
        return text
    if not text.startswith(API_PREFIX + "/") or "?" in text or "#" in text or ".." in text:
        raise _invalid(f"{name} must be a path under {API_PREFIX}")
    return text


def claim_body(assignment: Assignment | None, server_time_ms: int) -> dict[str, Any]:
    """The response to ``POST claims``: an assignment or ``null`` (poll again later)."""
    return {
        "version": PROTOCOL_VERSION,
        "assignment": None if assignment is None else assignment.to_json(),
        "server_time_ms": decimal(server_time_ms),
    }


def parse_claim_response(obj: object) -> Assignment | None:
    parsed = _object(
        obj,
        {
            "assignment": (True, lambda v, n: None if v is None else Assignment.from_json(v)),
            "server_time_ms": (True, parse_decimal),
        },
        "claim response",
    )
    assignment: Assignment | None = parsed["assignment"]
    return assignment


# --- The runner's standard input -----------------------------------------------------------------
#
# The provider starts ``python3 -S -m worker.runner`` in the job container and writes one JSON
# document to its standard input, then closes it. The credential travels only this way: never in
# argv, the environment or a file.

#: Version of the runner's standard-input envelope.
RUNNER_INPUT_VERSION: Final = 1
#: Where the provider mounts the per-attempt runner API socket in the job container.
RUNNER_API_SOCKET: Final = "/run/forge-ci/api.sock"
#: Where the provider mounts the attempt's workspace volume.
RUNNER_WORKSPACE: Final = "/workspace"
#: The envelope is at most this long (the plan is at most 1 MiB; secrets and contexts add some).
MAX_RUNNER_INPUT_BYTES: Final = 8 * 1024 * 1024
#: Bounds of ``step_minute_seconds``.
MIN_STEP_MINUTE_SECONDS: Final = 0.1
STEP_MINUTE_SECONDS: Final = 60.0


def _absolute_path(value: object, name: str) -> str:
    text = _utf8(_string(value, name, max_bytes=1024), name)
    if not text.startswith("/") or "/../" in f"{text}/" or "/./" in f"{text}/":
        raise _invalid(f"{name} must be an absolute path without . or .. components")
    return text


def _minute(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{name} must be a JSON number of seconds, not {_kind(value)}")
    if not MIN_STEP_MINUTE_SECONDS <= value <= STEP_MINUTE_SECONDS:
        raise _invalid(
            f"{name} must be between {MIN_STEP_MINUTE_SECONDS:g} and {STEP_MINUTE_SECONDS:g}"
        )
    return float(value)


@dataclass(frozen=True)
class RunnerInput:
    """What the provider writes to the runner's standard input: one JSON object, then EOF.

    ``{"version": 1, "credential": "<64 hex>", "api_socket": "/run/forge-ci/api.sock",
    "workspace": "/workspace", "assignment": {...}}``, plus optionally
    ``"step_minute_seconds"``.
    """

    #: The attempt credential (the claim's ``attempt_token``); never the provider's.
    credential: str
    #: The Unix socket that forwards this attempt's runner API endpoints.
    api_socket: str
    #: The empty directory the job works in (``$GITHUB_WORKSPACE``).
    workspace: str
    assignment: Assignment
    #: How long a minute of a *step* ``timeout-minutes`` lasts. Tests of the runner shorten it;
    #: it can only make step limits stricter (the job deadline is the server's).
    step_minute_seconds: float = STEP_MINUTE_SECONDS

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "version": RUNNER_INPUT_VERSION,
            "credential": self.credential,
            "api_socket": self.api_socket,
            "workspace": self.workspace,
            "assignment": self.assignment.to_json(),
        }
        if self.step_minute_seconds != STEP_MINUTE_SECONDS:
            body["step_minute_seconds"] = self.step_minute_seconds
        return body

    @classmethod
    def from_json(cls, obj: object) -> RunnerInput:
        parsed = _object(
            obj,
            {
                "credential": (True, parse_token),
                "api_socket": (True, _absolute_path),
                "workspace": (True, _absolute_path),
                "assignment": (True, lambda v, n: Assignment.from_json(v)),
                "step_minute_seconds": (False, _minute),
            },
            "runner input",
        )
        return cls(**parsed)


def parse_runner_input(body: bytes) -> RunnerInput:
    """The runner's standard input, strictly parsed (ProtocolError names what is wrong)."""
    if len(body) > MAX_RUNNER_INPUT_BYTES:
        raise _invalid(f"the runner input is larger than {MAX_RUNNER_INPUT_BYTES} bytes")
    if not body.strip():
        raise _invalid("the runner input is empty; write one JSON object to standard input")
    return RunnerInput.from_json(loads(body))
