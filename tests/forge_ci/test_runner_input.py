"""The runner's standard-input envelope and the source request, parsed by the shared wire types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forge_ci import protocol
from forge_ci.protocol import (
    Assignment,
    ProtocolError,
    RunnerInput,
    SourceRequest,
    parse_request,
    parse_runner_input,
)
from tests.forge_ci.test_protocol import assignment_json

TOKEN = "ab" * 32


def envelope(**change: Any) -> dict[str, Any]:
    body = {
        "version": 1,
        "credential": TOKEN,
        "api_socket": "/run/forge-ci/api.sock",
        "workspace": "/workspace",
        "assignment": assignment_json(),
        **change,
    }
    return {key: value for key, value in body.items() if value is not None}


def test_the_envelope_round_trips() -> None:
    parsed = parse_runner_input(json.dumps(envelope()).encode())
    assert parsed.credential == TOKEN
    assert (parsed.api_socket, parsed.workspace) == (
        protocol.RUNNER_API_SOCKET,
        protocol.RUNNER_WORKSPACE,
    )
    assert parsed.assignment == Assignment.from_json(assignment_json())
    assert parsed.step_minute_seconds == 60.0
    assert json.loads(protocol.dumps(parsed.to_json())) == envelope()
    shorter = RunnerInput.from_json(envelope(step_minute_seconds=0.5))
    assert shorter.to_json()["step_minute_seconds"] == 0.5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "version 2 is not supported"),
        ({"credential": None}, "field 'credential' is required"),
        ({"credential": "AB" * 32}, "credential must be 64 lowercase hexadecimal"),
        ({"api_socket": "run/api.sock"}, "api_socket must be an absolute path"),
        ({"workspace": "/workspace/../etc"}, "workspace must be an absolute path"),
        ({"workspace": "/a/./b"}, "workspace must be an absolute path"),
        ({"step_minute_seconds": 0}, "step_minute_seconds must be between 0.1 and 60"),
        ({"step_minute_seconds": 61}, "step_minute_seconds must be between 0.1 and 60"),
        ({"step_minute_seconds": True}, "step_minute_seconds must be a JSON number"),
        ({"provider_token": TOKEN}, "unknown field 'provider_token'"),
        ({"assignment": {"assignment_version": 9}}, "assignment version 9"),
    ],
)
def test_bad_envelopes_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_runner_input(json.dumps(envelope(**change)).encode())


def test_empty_oversized_and_malformed_input() -> None:
    with pytest.raises(ProtocolError, match="the runner input is empty"):
        parse_runner_input(b"  \n")
    with pytest.raises(ProtocolError, match="larger than"):
        parse_runner_input(b" " * (protocol.MAX_RUNNER_INPUT_BYTES + 1))
    with pytest.raises(ProtocolError, match="appears twice"):
        parse_runner_input(b'{"version": 1, "version": 1}')


def test_the_source_request() -> None:
    body = json.dumps({"version": 1, "execution_id": "e" * 32}).encode()
    assert parse_request("source", body) == SourceRequest("e" * 32)
    with pytest.raises(ProtocolError, match="execution_id"):
        parse_request("source", json.dumps({"version": 1, "execution_id": ""}).encode())


def test_an_assignment_without_source_has_an_empty_path() -> None:
    parsed = Assignment.from_json({**assignment_json(), "source_archive_path": ""})
    assert parsed.source_archive_path == ""
