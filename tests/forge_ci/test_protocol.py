"""The runner wire format: strict parsing, canonical decimals, rendering round trips."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from forge_ci import protocol
from forge_ci.protocol import (
    Assignment,
    AttemptStatus,
    ClaimRequest,
    CompleteRequest,
    LogRequest,
    ProtocolError,
    StepRequest,
    parse_decimal,
    parse_request,
)
from tests.conftest import REPO_ROOT

TOKEN = "ab" * 32
REQUEST_ID = "cd" * 16
EXECUTION = "ef" * 16


def body(**fields: Any) -> bytes:
    return json.dumps({"version": 1, **fields}).encode()


def refused(endpoint: str, raw: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        parse_request(endpoint, raw)
    return info.value


@pytest.mark.parametrize("text", ["0", "1", "42", "9223372036854775807"])
def test_canonical_decimals_parse(text: str) -> None:
    assert parse_decimal(text, "x") == int(text)
    assert protocol.decimal(int(text)) == text


@pytest.mark.parametrize(
    "value",
    [
        "01",
        "+1",
        "-1",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "",
        "9223372036854775808",
        "1" * 4301,  # past Python's int() digit limit: still our error, not a ValueError
        "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit to str.isdigit, not to the wire
        "0x1",
        1,
        None,
        True,
    ],
)
def test_non_canonical_decimals_are_refused(value: object) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_decimal(value, "sequence")
    assert info.value.code == "invalid_request"
    assert "sequence" in info.value.message


def test_ids_are_positive() -> None:
    assert parse_decimal("0", "cursor") == 0
    with pytest.raises(ProtocolError, match="at least 1"):
        parse_decimal("0", "attempt_id", positive=True)


def test_claim_request_parses_and_rejects_unknowns() -> None:
    parsed = parse_request("claims", body(request_id=REQUEST_ID, attempt_token=TOKEN))
    assert parsed == ClaimRequest(REQUEST_ID, TOKEN, None)
    waited = parse_request(
        "claims", body(request_id=REQUEST_ID, attempt_token=TOKEN, wait_seconds=2.5)
    )
    assert waited.wait_seconds == 2.5
    assert (
        "unknown field 'extra'"
        in refused("claims", body(request_id=REQUEST_ID, attempt_token=TOKEN, extra=1)).message
    )
    assert "attempt_token" in refused("claims", body(request_id=REQUEST_ID)).message
    assert (
        "lowercase hexadecimal"
        in refused("claims", body(request_id=REQUEST_ID, attempt_token=TOKEN.upper())).message
    )
    assert (
        refused("claims", body(request_id=REQUEST_ID, attempt_token=TOKEN, wait_seconds=-1)).code
        == "invalid_request"
    )


@pytest.mark.parametrize(
    "raw, code",
    [
        (b'{"version": 2, "execution_id": "' + EXECUTION.encode() + b'"}', "unsupported_version"),
        (b'{"execution_id": "' + EXECUTION.encode() + b'"}', "invalid_request"),
        (b'{"version": true, "execution_id": "' + EXECUTION.encode() + b'"}', "invalid_request"),
        (b'{"version": "1", "execution_id": "' + EXECUTION.encode() + b'"}', "invalid_request"),
        (b"[1]", "invalid_request"),
        (b"not json", "invalid_request"),
        (b'{"version": 1, "version": 1, "execution_id": "x"}', "invalid_request"),
        (b'{"version": NaN}', "invalid_request"),
        (b"\xff\xfe", "invalid_request"),
    ],
)
def test_envelopes_are_strict(raw: bytes, code: str) -> None:
    assert refused("start", raw).code == code


def test_log_request_rules() -> None:
    parsed = parse_request(
        "logs", body(execution_id=EXECUTION, sequence="3", step_id="", stream="stdout", text="hi")
    )
    assert parsed == LogRequest(EXECUTION, 3, "", "stdout", "hi")
    numeric = body(execution_id=EXECUTION, sequence=3, step_id="", stream="stdout", text="hi")
    assert "decimal string" in refused("logs", numeric).message
    zero = body(execution_id=EXECUTION, sequence="0", step_id="", stream="stdout", text="hi")
    assert "at least 1" in refused("logs", zero).message
    stream = body(execution_id=EXECUTION, sequence="1", step_id="", stream="stdin", text="hi")
    assert "stream" in refused("logs", stream).message
    big = body(execution_id=EXECUTION, sequence="1", step_id="", stream="stdout", text="x" * 65537)
    error = refused("logs", big)
    assert (error.code, error.status) == ("chunk_too_large", 413)
    surrogate = (
        b'{"version":1,"execution_id":"' + EXECUTION.encode() + b'","sequence":"1",'
        b'"step_id":"","stream":"stdout","text":"\\ud800"}'
    )
    assert "surrogate" in refused("logs", surrogate).message


def test_step_request_needs_conclusion_exactly_when_completed() -> None:
    ok = parse_request(
        "steps",
        body(
            execution_id=EXECUTION,
            step_id="build",
            state="completed",
            conclusion="failure",
            exit_code=2,
            continue_on_error=False,
        ),
    )
    assert ok == StepRequest(EXECUTION, "build", "completed", "failure", 2, False)
    for state, conclusion in (("running", "success"), ("completed", "")):
        error = refused(
            "steps",
            body(
                execution_id=EXECUTION,
                step_id="build",
                state=state,
                conclusion=conclusion,
                exit_code=-1,
                continue_on_error=False,
            ),
        )
        assert "conclusion" in error.message
    assert (
        "exit_code"
        in refused(
            "steps",
            body(
                execution_id=EXECUTION,
                step_id="build",
                state="running",
                conclusion="",
                exit_code=256,
                continue_on_error=False,
            ),
        ).message
    )


def test_complete_request_outputs_and_lost_is_not_reportable() -> None:
    parsed = parse_request(
        "complete",
        body(
            execution_id=EXECUTION,
            conclusion="success",
            last_log_sequence="0",
            outputs={"digest": "abc"},
        ),
    )
    assert parsed == CompleteRequest(EXECUTION, "success", 0, {"digest": "abc"})
    lost = body(execution_id=EXECUTION, conclusion="lost", last_log_sequence="0")
    assert "conclusion" in refused("complete", lost).message
    bad_name = body(
        execution_id=EXECUTION, conclusion="success", last_log_sequence="0", outputs={"a b": "x"}
    )
    assert "output name" in refused("complete", bad_name).message


def test_request_body_round_trips() -> None:
    request = LogRequest(EXECUTION, 7, "build", "stderr", "oops\n")
    raw = json.dumps(protocol.request_body(request)).encode()
    assert parse_request("logs", raw) == request
    assert protocol.request_body(request)["sequence"] == "7"


def test_status_round_trip_and_strictness() -> None:
    status = AttemptStatus(
        attempt_id=5,
        state="running",
        execution_id=EXECUTION,
        acknowledged_log_sequence=3,
        lease_deadline_ms=1_700_000_060_000,
        job_deadline_ms=1_700_021_600_000,
        server_time_ms=1_700_000_000_000,
        cancel_requested=False,
        cancel_reason="",
        conclusion="",
    )
    wire = json.loads(protocol.dumps(status.to_json()))
    assert wire["lease_deadline_ms"] == "1700000060000"
    assert AttemptStatus.from_json(wire) == status
    wire["conclusion"] = "maybe"
    with pytest.raises(ProtocolError):
        AttemptStatus.from_json(wire)


def assignment_json() -> dict[str, Any]:
    return {
        "assignment_version": 2,
        "attempt_id": "9",
        "attempt_number": 1,
        "state": "leased",
        "run_id": "3",
        "run_number": "1",
        "job_id": "4",
        "job_key": "build",
        "job_workflow_id": "build",
        "job_name": "build",
        "timeout_minutes": 360,
        "steps": [
            {
                "id": "checkout",
                "name": "Checkout",
                "uses": "forge-ci/checkout@v1",
                "action": "",
                "with": {"fetch-depth": "0"},
                "run": "",
                "shell": "",
                "working_directory": "",
                "env": {},
                "if": "success()",
                "continue_on_error": False,
                "timeout_minutes": 0,
            },
            {
                "id": "step_2",
                "name": "Run make",
                "uses": "",
                "action": "",
                "with": {},
                "run": {"template": ["make ", {"expr": "steps.checkout.outputs.ref"}]},
                "shell": "bash",
                "working_directory": "src",
                "env": {"TOKEN": {"secret": "DEPLOY_TOKEN"}, "MODE": "fast"},
                "if": "success()",
                "continue_on_error": {"expr": "matrix.experimental"},
                "timeout_minutes": 5,
            },
        ],
        "outputs": {"ref": {"template": [{"expr": "steps.checkout.outputs.ref"}]}},
        "contexts": {"github": {"sha": "0" * 40}, "matrix": None, "strategy": None, "needs": {}},
        "source_archive_path": "/-/runner-api/v1/attempts/9/source.tar",
        "actions": {},
        "lease_deadline_ms": "1700000060000",
        "job_deadline_ms": "0",
        "server_time_ms": "1700000000000",
    }


def test_assignment_round_trip() -> None:
    parsed = Assignment.from_json(assignment_json())
    assert parsed.steps[1].condition == "success()"
    assert parsed.steps[1].env["TOKEN"] == {"secret": "DEPLOY_TOKEN"}
    assert json.loads(protocol.dumps(parsed.to_json())) == assignment_json()
    claim = protocol.claim_body(parsed, 1_700_000_000_000)
    assert protocol.parse_claim_response(json.loads(protocol.dumps(claim))) == parsed
    assert protocol.parse_claim_response(protocol.claim_body(None, 1)) is None


@pytest.mark.parametrize(
    "change, message",
    [
        ({"assignment_version": 1}, "assignment version 1"),
        ({"source_archive_path": "http://elsewhere/x.tar"}, "source_archive_path"),
        ({"attempt_id": "09"}, "attempt_id"),
        ({"surprise": True}, "unknown field"),
        # Values never travel in an assignment: a server that sends them is refused.
        ({"secrets": {"step_2": {"TOKEN": "s3cr3t-value"}}}, "unknown field"),
    ],
)
def test_assignment_validation_refuses(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Assignment.from_json({**assignment_json(), **change})


def test_duplicate_step_ids_are_refused() -> None:
    data = assignment_json()
    data["steps"][1]["id"] = "checkout"
    with pytest.raises(ProtocolError, match="not unique"):
        Assignment.from_json(data)


def test_protocol_imports_under_python_dash_s() -> None:
    """The in-container runner imports the module without site-packages."""
    result = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import forge_ci.protocol as p; print(p.PROTOCOL_VERSION, p.ASSIGNMENT_VERSION)",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "2"]


def test_the_wire_speaks_the_vocabulary_of_forge_ci_states() -> None:
    """protocol spells its states out (the runner cannot import states.py); they must agree."""
    from forge_ci import protocol, states

    assert set(protocol.ATTEMPT_STATES) == set(states.ATTEMPT_TRANSITIONS)
    assert set(protocol.STEP_WIRE_STATES) == set(states.STEP_TRANSITIONS) - {states.PENDING}
    assert set(protocol.STEP_CONCLUSIONS) == states.ALLOWED_CONCLUSIONS["step"]
    assert set(protocol.ATTEMPT_CONCLUSIONS) == states.ALLOWED_CONCLUSIONS["attempt"]
    # Only the server decides that an attempt was lost.
    assert set(protocol.REPORTED_CONCLUSIONS) == states.ALLOWED_CONCLUSIONS["attempt"] - {
        states.LOST
    }


def test_secrets_request_and_answer() -> None:
    body = {"version": 1, "execution_id": "a" * 32, "step_id": "step_2"}
    request = protocol.parse_request("secrets", json.dumps(body).encode())
    assert request == protocol.SecretsRequest("a" * 32, "step_2")
    for bad in ({**body, "step_id": ""}, {**body, "extra": 1}, {"version": 1, "step_id": "x"}):
        with pytest.raises(ProtocolError):
            protocol.parse_request("secrets", json.dumps(bad).encode())
    status = protocol.AttemptStatus(9, "running", "a" * 32, 0, 1, 2, 3, False, "", "")
    answer = json.loads(protocol.dumps(protocol.secrets_body("step_2", {"TOKEN": "v"}, status)))
    assert protocol.parse_secrets_response(answer) == ("step_2", {"TOKEN": "v"}, status)
    # Env names as GitHub takes them (ruby-version); never what no process environment holds.
    dashed = {**answer, "env": {"ruby-version": "v"}}
    assert protocol.parse_secrets_response(dashed)[1] == {"ruby-version": "v"}
    for name in ("A=B", "A\x00B", "A\nB", "", "a" * 256):
        with pytest.raises(ProtocolError):
            protocol.parse_secrets_response({**answer, "env": {name: "v"}})


@pytest.mark.parametrize(
    ("name", "ok"),
    [("ruby-version", True), ("1A", True), ("a" * 255, True), ("A=B", False), ("A\tB", False),
     ("", False), ("a" * 256, False)],
)  # fmt: skip
def test_step_env_names_are_what_a_process_can_hold(name: str, ok: bool) -> None:
    data = assignment_json()
    data["steps"][1]["env"] = {name: "x"}
    if ok:
        assert Assignment.from_json(data).steps[1].env == {name: "x"}
    else:
        with pytest.raises(ProtocolError, match="is not a valid environment variable name"):
            Assignment.from_json(data)
