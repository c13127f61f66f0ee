"""The runner API over HTTP: the Flask test client, and a real server for body caps/deadlines."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server
from werkzeug.test import TestResponse

from forge_ci import protocol
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.forge_ci.coordinator.world import World, plan_job
from tests.web.people import Browser
from web.runner_api import register_runner_api

PREFIX = protocol.API_PREFIX


@pytest.fixture
def world(database: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> World:
    created = World(database, settings)
    monkeypatch.setattr("forge_ci.runs.scheduling.utcnow", created.clock)
    return created


@pytest.fixture
def api(app: Flask, world: World) -> FlaskClient:
    register_runner_api(app, world.coordinator)
    return app.test_client()


def post(
    client: FlaskClient, path: str, body: Any, token: str | None, **headers: str
) -> TestResponse:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return client.post(PREFIX + path, data=data, headers=sent)


def claim_body(**extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "request_id": new_request_id(),
        "attempt_token": new_token(),
        "wait_seconds": 0,
        **extra,
    }


def assert_api_response(response: TestResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    assert "Set-Cookie" not in response.headers
    body: dict[str, Any] = response.get_json()
    assert body["version"] == 1
    return body


def error_code(response: TestResponse, status: int) -> str:
    body = assert_api_response(response, status)
    code: str = body["error"]["code"]
    assert body["error"]["message"]
    return code


def test_a_whole_attempt_over_http(api: FlaskClient, world: World) -> None:
    run_id = world.queue_run(plan_job("build", steps=("compile",)))
    request = claim_body()
    claimed = assert_api_response(post(api, "/claims", request, world.provider_token), 200)
    assignment = protocol.Assignment.from_json(claimed["assignment"])
    token, attempt = request["attempt_token"], f"/attempts/{assignment.attempt_id}"
    replay = assert_api_response(post(api, "/claims", request, world.provider_token), 200)
    assert replay["assignment"] == claimed["assignment"]
    execution = "e" * 32
    started = assert_api_response(
        post(api, f"{attempt}/start", {"version": 1, "execution_id": execution}, token), 200
    )
    status = protocol.AttemptStatus.from_json(started)
    assert (status.state, status.execution_id, status.conclusion) == ("running", execution, "")
    assert started["job_deadline_ms"] != "0" and isinstance(started["lease_deadline_ms"], str)
    for path, body in [
        ("heartbeat", {"execution_id": execution}),
        (
            "steps",
            {
                "execution_id": execution,
                "step_id": "compile",
                "state": "running",
                "conclusion": "",
                "exit_code": -1,
                "continue_on_error": False,
            },
        ),
        (
            "logs",
            {
                "execution_id": execution,
                "sequence": "1",
                "step_id": "compile",
                "stream": "stdout",
                "text": f"built with {token}\n",
            },
        ),
        (
            "steps",
            {
                "execution_id": execution,
                "step_id": "compile",
                "state": "completed",
                "conclusion": "success",
                "exit_code": 0,
                "continue_on_error": False,
            },
        ),
    ]:
        assert_api_response(post(api, f"{attempt}/{path}", {"version": 1, **body}, token), 200)
    done = {
        "version": 1,
        "execution_id": execution,
        "conclusion": "success",
        "last_log_sequence": "1",
    }
    final = assert_api_response(post(api, f"{attempt}/complete", done, token), 200)
    assert (final["state"], final["conclusion"], final["lease_deadline_ms"]) == (
        "completed",
        "success",
        "0",
    )
    assert assert_api_response(post(api, f"{attempt}/complete", done, token), 200) == final
    ended = post(api, f"{attempt}/heartbeat", {"version": 1, "execution_id": execution}, token)
    assert error_code(ended, 409) == "attempt_ended"
    assert ended.get_json()["attempt"]["conclusion"] == "success"
    assert world.run(run_id).conclusion == "success"
    from forge_ci.coordinator.logs import read_log_page
    from tests.forge_ci.coordinator.world import OPERATOR

    with world.session() as session:
        page = read_log_page(session, OPERATOR, "alice/app", 1, assignment.attempt_id)
    assert [r.text for r in page.records] == ["built with ***\n"] and page.complete


def test_empty_polls_answer_null(api: FlaskClient, world: World) -> None:
    body = assert_api_response(post(api, "/claims", claim_body(), world.provider_token), 200)
    assert body["assignment"] is None and body["server_time_ms"].isdigit()


@pytest.mark.parametrize(
    "headers, status, code",
    [
        ({}, 401, "unauthenticated"),
        ({"Authorization": "Basic abc"}, 401, "unauthenticated"),
        ({"Authorization": "Bearer " + "A" * 64}, 401, "unauthenticated"),
        ({"Authorization": "Bearer " + "a" * 64}, 401, "unauthenticated"),
    ],
)
def test_credentials_are_required(
    api: FlaskClient, headers: dict[str, str], status: int, code: str
) -> None:
    response = api.post(
        PREFIX + "/claims",
        data=json.dumps(claim_body()),
        headers={"Content-Type": "application/json", **headers},
    )
    assert error_code(response, status) == code
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_strict_bodies_are_refused_with_stable_codes(api: FlaskClient, world: World) -> None:
    token = world.provider_token
    cases = [
        (claim_body(extra=1), "invalid_request"),
        (claim_body(version=2), "unsupported_version"),
        ({"request_id": new_request_id(), "attempt_token": new_token()}, "invalid_request"),
        (b"{not json", "invalid_request"),
        (b'{"version": 1, "version": 1}', "invalid_request"),
    ]
    for body, code in cases:
        assert error_code(post(api, "/claims", body, token), 400) == code
    wrong_type = post(api, "/claims", claim_body(), token, **{"Content-Type": "text/plain"})
    assert error_code(wrong_type, 400) == "invalid_request"
    assert error_code(post(api, "/claims", b"x" * 70_000, token), 413) == "body_too_large"
    bad_id = post(api, "/attempts/01/start", {"version": 1, "execution_id": "e" * 32}, token)
    assert error_code(bad_id, 400) == "invalid_request"
    unknown = post(api, "/attempts/1/explode", {"version": 1}, token)
    assert error_code(unknown, 404) == "not_found"


def test_browser_cookies_never_authenticate_the_api(
    api: FlaskClient, world: World, as_person: Any
) -> None:
    admin: Browser = as_person("sam")
    admin.client.application = api.application
    # A signed-in site administrator's cookie is not a credential here.
    response = admin.client.post(
        PREFIX + "/claims",
        data=json.dumps(claim_body()),
        headers={"Content-Type": "application/json"},
    )
    assert error_code(response, 401) == "unauthenticated"
    # With a provider credential, the cookie changes nothing, CSRF does not apply, and no
    # cookie is set or refreshed.
    world.queue_run()
    response = admin.client.post(
        PREFIX + "/claims",
        data=json.dumps(claim_body()),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {world.provider_token}",
        },
    )
    assert assert_api_response(response, 200)["assignment"] is not None


def test_runner_credentials_never_open_browser_pages(
    api: FlaskClient, world: World, people: Any
) -> None:
    bearer = {"Authorization": f"Bearer {world.provider_token}"}
    page = api.get("/-/admin", headers=bearer)
    assert page.status_code == 302 and "/-/login" in page.headers["Location"]
    form = api.post("/-/logout", headers=bearer)
    assert form.status_code == 400  # no CSRF token: a bearer credential is no session


def test_unexpected_failures_are_generic(
    api: FlaskClient, world: World, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def explode(*_args: object) -> None:
        raise RuntimeError("database password is hunter2")

    monkeypatch.setattr(world.coordinator, "claim", explode)
    response = post(api, "/claims", claim_body(), world.provider_token)
    assert error_code(response, 500) == "internal"
    assert "hunter2" not in response.get_data(as_text=True)


# --- A real server on 127.0.0.1: body caps and deadlines ------------------------------------


@pytest.fixture
def server(app: Flask, world: World) -> Iterator[tuple[str, int]]:
    register_runner_api(app, world.coordinator)
    app.config["RUNNER_API_BODY_DEADLINE"] = 1.0
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", httpd.server_port
    httpd.shutdown()
    thread.join(10)
    httpd.server_close()


def read_response(conn: socket.socket) -> bytes:
    """One HTTP response (status, headers and a Content-Length body); EOF is not awaited."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    header, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return header + b"\r\n\r\n" + body


def raw_request(address: tuple[str, int], head: bytes, body_parts: list[bytes]) -> bytes:
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(head)
        for part in body_parts:
            try:
                conn.sendall(part)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered and closed before reading the rest
        return read_response(conn)


def head(address: tuple[str, int], token: str, extra: str) -> bytes:
    return (
        f"POST {PREFIX}/claims HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{extra}\r\n"
    ).encode()


def test_a_claim_over_a_real_connection(server: tuple[str, int], world: World) -> None:
    world.queue_run()
    conn = http.client.HTTPConnection(*server, timeout=10)
    conn.request(
        "POST",
        PREFIX + "/claims",
        body=json.dumps(claim_body()),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {world.provider_token}",
        },
    )
    response = conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 200 and body["assignment"]["job_key"] == "build"
    assert response.getheader("Cache-Control") == "no-store"
    conn.close()


def test_an_announced_oversized_body_is_refused_before_it_is_read(
    server: tuple[str, int], world: World
) -> None:
    reply = raw_request(server, head(server, world.provider_token, "Content-Length: 70000\r\n"), [])
    assert reply.startswith(b"HTTP/1.1 413")
    assert b'"body_too_large"' in reply


def test_an_oversized_chunked_body_is_refused(server: tuple[str, int], world: World) -> None:
    chunk = b"x" * 16384
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)] + [b"0\r\n\r\n"]
    reply = raw_request(
        server, head(server, world.provider_token, "Transfer-Encoding: chunked\r\n"), parts
    )
    assert reply.startswith(b"HTTP/1.1 413")


def test_a_trickled_body_hits_the_read_deadline(server: tuple[str, int], world: World) -> None:
    began = time.monotonic()
    with socket.create_connection(server, timeout=10) as conn:
        conn.sendall(head(server, world.provider_token, "Content-Length: 100\r\n"))
        conn.sendall(b'{"version": 1,')
        reply = read_response(conn)
    elapsed = time.monotonic() - began
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b'"body_timeout"' in reply
    assert 0.9 <= elapsed < 5
    # The server still answers others.
    test_a_claim_over_a_real_connection(server, world)


def test_action_archive_routes_need_the_attempt_credential(api: FlaskClient, world: World) -> None:
    run_id = world.queue_run(plan_job("build", steps=("compile",)))
    request = claim_body()
    claimed = assert_api_response(post(api, "/claims", request, world.provider_token), 200)
    attempt = f"/attempts/{claimed['assignment']['attempt_id']}"
    body = {"version": 1, "execution_id": "e" * 32}
    assert error_code(post(api, f"{attempt}/actions/x.tar", body, request["attempt_token"]), 404)
    assert error_code(post(api, f"{attempt}/actions/0.tar", body, None), 401)
    token = request["attempt_token"]
    assert_api_response(post(api, f"{attempt}/start", body, token), 200)
    # The job uses no action: there is nothing to serve, and the refusal says so.
    refused = post(api, f"{attempt}/actions/0.tar", body, token)
    assert error_code(refused, 422) == "source_refused"
    assert "has no action number 0" in refused.get_json()["error"]["message"]
    assert world.run(run_id).state != "completed"
