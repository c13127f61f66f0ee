"""The egress audit (forge_ci.coordinator.egress): who may write it, what is stored and masked,
the log line per denial, replays, the job page's summary and the policy on the admin page."""

from __future__ import annotations

import dataclasses
import json

import pytest
from sqlalchemy import select

from forge_ci.coordinator.credentials import job_token, new_request_id, new_token
from forge_ci.coordinator.egress import attempt_egress
from forge_ci.coordinator.providers import show_provider
from forge_ci.errors import NotFound, Unauthenticated
from forge_ci.models import EgressConnection, LogRecord
from forge_ci.protocol import ClaimRequest, EgressRecord, EgressRequest, parse_request
from forge_ci.protocol.fields import ProtocolError
from tests.forge_ci.coordinator.world import OPERATOR, Claimed, World, plan_job

BASE = EgressRecord(
    sequence=1,
    at_ms=1_800_000_000_000,
    method="CONNECT",
    host="pypi.org",
    port=443,
    address="151.101.0.223",
    allowed=True,
    explicit=False,
    reason="pypi.org allow-listed by pypi.org",
    closed="",
    bytes_out=900,
    bytes_in=120_000,
    milliseconds=250,
)


def record(sequence: int, **changes: object) -> EgressRecord:
    return dataclasses.replace(BASE, sequence=sequence, **changes)  # type: ignore[arg-type]


DENIED = {"allowed": False, "host": "10.0.0.5", "port": 6379, "address": "10.0.0.5"}


def claimed(world: World) -> Claimed:
    world.queue_run(plan_job("build"))
    got = world.claim()
    assert got is not None
    world.start(got)
    return got


def rows(world: World, attempt_id: int) -> list[EgressConnection]:
    with world.session() as session:
        return list(
            session.scalars(
                select(EgressConnection)
                .where(EgressConnection.attempt_id == attempt_id)
                .order_by(EgressConnection.sequence)
            )
        )


def system_lines(world: World, attempt_id: int) -> list[str]:
    with world.session() as session:
        return [
            r.text
            for r in session.scalars(
                select(LogRecord)
                .where(LogRecord.attempt_id == attempt_id, LogRecord.stream == "system")
                .order_by(LogRecord.position)
            )
        ]


def test_records_are_stored_once_with_one_log_line_per_denial(world: World) -> None:
    got = claimed(world)
    batch = [
        record(1),
        record(
            2, reason="10.0.0.5 is private (RFC 1918): always denied unless allow-listed", **DENIED
        ),
        record(3, closed="byte limit of 1048576 per attempt reached"),
        record(4),
    ]
    request = EgressRequest(got.token, batch)
    assert world.coordinator.egress(world.provider_token, got.id, request) == 4
    # A replay (the answer was lost) stores nothing twice and writes no second line.
    assert world.coordinator.egress(world.provider_token, got.id, request) == 0
    more = EgressRequest(got.token, [batch[0], record(5, **DENIED, reason="denied again")])
    assert world.coordinator.egress(world.provider_token, got.id, more) == 1

    stored = rows(world, got.id)
    assert [r.sequence for r in stored] == [1, 2, 3, 4, 5]
    assert (stored[1].host, stored[1].port, stored[1].allowed) == ("10.0.0.5", 6379, False)
    assert stored[0].bytes_in == 120_000 and stored[0].address == "151.101.0.223"
    lines = [line for line in system_lines(world, got.id) if "egress" in line]
    assert lines == [
        "egress denied: CONNECT 10.0.0.5:6379: 10.0.0.5 is private (RFC 1918): always denied"
        " unless allow-listed\n",
        "egress: connection to pypi.org:443 closed: byte limit of 1048576 per attempt reached\n",
        "egress denied: CONNECT 10.0.0.5:6379: denied again\n",
    ]

    with world.session() as session:
        summary = attempt_egress(session, OPERATOR, "alice/app", 1, got.id)
    assert summary.text() == "Network: 3 connections to pypi.org:443, 2 denied to 10.0.0.5:6379"
    assert summary.connections == 3 and summary.denied == 2


def test_only_the_attempts_own_provider_writes_its_audit(world: World) -> None:
    got = claimed(world)
    other = world.add_provider("p2", scope="all")
    request = EgressRequest(got.token, [record(1)])
    with pytest.raises(NotFound, match="not one this provider claimed"):
        world.coordinator.egress(other, got.id, request)
    # The attempt credential is no provider credential: a runner cannot write its own audit.
    with pytest.raises(Unauthenticated):
        world.coordinator.egress(got.token, got.id, request)
    with pytest.raises(Unauthenticated):
        world.coordinator.egress(None, got.id, request)
    with pytest.raises(Unauthenticated, match="not the credential of attempt"):
        world.coordinator.egress(
            world.provider_token, got.id, EgressRequest(new_token(), [record(1)])
        )
    with pytest.raises(NotFound):
        world.coordinator.egress(world.provider_token, got.id + 100, request)
    assert rows(world, got.id) == []


def test_what_the_job_put_into_a_name_is_masked_before_storage(world: World) -> None:
    got = claimed(world)
    leaked = job_token(got.token)
    batch = [
        record(
            1,
            host=f"{leaked}.evil.example",
            reason=f"{leaked}.evil.example:443 is not",
            **{"allowed": False},
        )
    ]
    world.coordinator.egress(world.provider_token, got.id, EgressRequest(got.token, batch))
    (row,) = rows(world, got.id)
    assert leaked not in row.host and leaked not in row.reason
    assert row.host.endswith(".evil.example")
    assert not any(leaked in line for line in system_lines(world, got.id))


def test_bad_bodies_are_refused_by_field() -> None:
    good = EgressRequest(new_token(), [record(1)]).to_json()
    assert parse_request("egress", _dumps(good)).connections[0].host == "pypi.org"
    for change, words in (
        ({"connections": []}, "1 to 200 records"),
        ({"connections": [{**good["connections"][0], "port": 70000}]}, "port must be between"),
        ({"connections": [{**good["connections"][0], "host": "x" * 300}]}, "longer than 255"),
        ({"connections": [{**good["connections"][0], "extra": 1}]}, "unknown field 'extra'"),
        ({"attempt_token": "nope"}, "attempt_token must be 64"),
    ):
        with pytest.raises(ProtocolError, match=words):
            parse_request("egress", _dumps({**good, **change}))


def _dumps(body: object) -> bytes:
    return json.dumps(body).encode()


def test_the_policy_a_provider_reports_with_its_claims_is_shown(world: World) -> None:
    with world.session() as session:
        assert show_provider(session, OPERATOR, "p1").egress_policy == ""
    policy = "allow-list: pypi.org; loopback, private, link-local and metadata addresses denied"
    request = ClaimRequest(new_request_id(), new_token(), 0, policy)
    world.coordinator.claim(world.provider_token, request)
    with world.session() as session:
        info = show_provider(session, OPERATOR, "p1")
    assert info.egress_policy == policy
    assert info.as_dict()["egress_policy"] == policy
