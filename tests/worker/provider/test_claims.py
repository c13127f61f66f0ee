"""Claiming through the real runner API: long polls, answers lost in flight and restarts replay
the same persisted claim and get the same attempt back, never a second one.

The server is the real Flask application on 127.0.0.1 (werkzeug, threaded) with a coordinator
on real time. An answer lost mid-flight cannot be produced on loopback on demand, so a small TCP
proxy forwards the request and drops the answer (the one fault injected here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from forge_ci.db import Database
from forge_ci.errors import ConfigurationError
from forge_ci.models import Attempt, Provider
from forge_ci_testing.forge import wait_for
from tests.forge_ci.coordinator.world import World, plan_job
from worker.provider.claims import ClaimClient, ClaimConflict, ProviderRefused, Stopped
from worker.provider.state import ClaimRecord, ProviderState
from worker.provider.upstream import Server


class LossyProxy:
    """Forwards connections to ``target``; the first ``drop`` answers never reach the client."""

    def __init__(self, target: Server, drop: int) -> None:
        self.target = target
        self.drop = drop
        self.forwarded = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.server = Server("http", "127.0.0.1", self.listener.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        with client, socket.create_connection((self.target.host, self.target.port)) as upstream:
            client.settimeout(30)
            upstream.settimeout(60)
            request = b""
            while b"\r\n\r\n" not in request:
                request += client.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(
                next(
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            while len(body) < length:
                body += client.recv(65536)
            upstream.sendall(head + b"\r\n\r\n" + body)
            answer = upstream.recv(65536)  # the server has acted on the request by now
            self.forwarded += 1
            if self.forwarded <= self.drop:
                return  # lost in flight: the client sees its connection closed, no answer
            client.sendall(answer)
            while chunk := upstream.recv(65536):
                client.sendall(chunk)

    def close(self) -> None:
        self.listener.close()


def attempts(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count(Attempt.id))) or 0)


def test_a_claim_waits_for_work_and_gets_it(world: World, server: Server) -> None:
    client = ClaimClient(server, world.provider_token, wait_seconds=10)
    threading.Timer(0.5, lambda: world.queue_run(plan_job())).start()
    began = time.monotonic()
    assignment = client.claim(ClaimRecord.fresh())
    assert assignment is not None and assignment.state == "leased"
    assert 0.4 < time.monotonic() - began < 8


def test_a_lost_answer_is_replayed_and_gets_the_same_attempt(
    world: World, server: Server, database: Database
) -> None:
    world.queue_run(plan_job())
    proxy = LossyProxy(server, drop=1)
    client = ClaimClient(proxy.server, world.provider_token, wait_seconds=0)
    record = ClaimRecord.fresh()
    try:
        assignment = client.claim(record)
    finally:
        proxy.close()
    # The lost one and its replay; on a loaded machine a replay may itself be answered 503 (no
    # answer yet) and sent once more, which is the protocol working, not a second claim.
    assert proxy.forwarded >= 2
    assert assignment is not None and assignment.state == "leased"
    assert attempts(database) == 1
    with database.session() as session:
        attempt = session.get(Attempt, assignment.attempt_id)
        assert attempt is not None and attempt.request_id == record.request_id


def test_a_restarted_provider_replays_its_persisted_claim(
    world: World, server: Server, database: Database, tmp_path: Path
) -> None:
    world.queue_run(plan_job())
    state = ProviderState(tmp_path / "state")
    state.prepare()
    record = ClaimRecord.fresh()
    state.save(record)
    proxy = LossyProxy(server, drop=1000)
    first = ClaimClient(proxy.server, world.provider_token, wait_seconds=0)
    # The provider dies after sending its claim: the server leased an attempt nobody heard of.
    threading.Timer(1.5, first.stop).start()
    with pytest.raises(Stopped):
        first.claim(record)
    proxy.close()
    assert attempts(database) == 1

    restarted = ProviderState(tmp_path / "state")
    [pending] = restarted.records()
    assert pending == record
    assignment = ClaimClient(server, world.provider_token, wait_seconds=0).claim(pending)
    assert assignment is not None and assignment.state == "leased"
    assert attempts(database) == 1
    # A spent record is refused once its attempt has ended, rather than leasing anew.
    with database.session() as session:
        attempt = session.get(Attempt, assignment.attempt_id)
        assert attempt is not None
        attempt.lease_expires_at = attempt.claimed_at  # the start window ran out
        session.commit()
    with pytest.raises(ClaimConflict):
        ClaimClient(server, world.provider_token, wait_seconds=0).claim(pending)


_WAITING_PROVIDER = """
import sys
from worker.provider.claims import ClaimClient
from worker.provider.state import ClaimRecord
from worker.provider.upstream import Server
ClaimClient(Server("http", "127.0.0.1", int(sys.argv[1])), sys.argv[2], wait_seconds=60).claim(
    ClaimRecord.fresh()
)
"""


def _contact(database: Database) -> object:
    with database.session() as session:
        return session.scalar(select(Provider.last_contact_at))


def test_a_provider_killed_while_its_claim_waits_is_assigned_nothing(
    world: World, server: Server, database: Database
) -> None:
    """kill -9 while the claim waits on the server: its job goes to the next claimer instead
    of to the dead connection (where it would have waited out the start window)."""
    provider = subprocess.Popen(
        [sys.executable, "-c", _WAITING_PROVIDER, str(server.port), world.provider_token],
        cwd=Path(__file__).parents[3],
    )
    try:
        # The claim reached the server (its first try stored the contact time) and now waits.
        wait_for("the claim to reach the server", lambda: _contact(database), timeout=30)
        assert provider.poll() is None
    finally:
        provider.kill()
        provider.wait()
    world.queue_run(plan_job())
    time.sleep(1.0)  # ten of the waiting claim's polls: it would have taken the job by now
    assert attempts(database) == 0
    assignment = ClaimClient(server, world.provider_token, wait_seconds=0).claim(
        ClaimRecord.fresh()
    )
    assert assignment is not None and assignment.attempt_number == 1
    assert attempts(database) == 1


def test_an_unknown_token_stops_the_provider(world: World, server: Server) -> None:
    with pytest.raises(ProviderRefused):
        ClaimClient(server, "cd" * 32, wait_seconds=0).claim(ClaimRecord.fresh())


def test_claim_records_are_private_and_durable(tmp_path: Path) -> None:
    state = ProviderState(tmp_path / "state")
    state.prepare()
    record = ClaimRecord.fresh()
    state.save(record)
    state.save(record.assigned(7))
    [path] = (tmp_path / "state" / "claims").iterdir()
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    assert state.records() == [record.assigned(7)]
    assert record.attempt_token not in repr(record)
    (tmp_path / "state" / "claims" / "half-written.json.tmp").write_text("{")
    assert state.records() == [record.assigned(7)]  # an unfinished write never counts
    state.forget(record)
    assert state.records() == []
    provider_id = state.provider_id()
    assert ProviderState(tmp_path / "state").provider_id() == provider_id


def test_one_state_directory_serves_one_provider(tmp_path: Path) -> None:
    state = ProviderState(tmp_path / "state")
    state.prepare()
    fd = state.lock()
    try:
        with pytest.raises(ConfigurationError, match="another provider"):
            ProviderState(tmp_path / "state").lock()
    finally:
        os.close(fd)
    (tmp_path / "open").mkdir(mode=0o755)
    with pytest.raises(ConfigurationError, match="0700"):
        ProviderState(tmp_path / "open").prepare()
