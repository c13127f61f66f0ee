"""Logs: sequences, replays, the cap, masking before storage, carry-over, reading pages."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from forge_ci.authz import Actor
from forge_ci.coordinator import logs as log_cases
from forge_ci.coordinator.logs import read_log_page
from forge_ci.coordinator.service import AttemptRefused
from forge_ci.errors import NotFound
from forge_ci.models import AttemptSecret, LogCarry, LogRecord, Run, User
from tests.forge_ci.coordinator.world import OPERATOR, Claimed, World, plan_job

SECRET = "hunter2-but-longer"
MULTILINE = 'line one of the key\nshort\n{"token": "nested-token-value"}'


class FixedSecrets:
    """A secret source that allows and delivers given values (the masking properties here;
    the real store is tested in tests/forge_ci/secrets)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def refusal(self, session, run, name):  # type: ignore[no-untyped-def]
        return None if name in self.values else f"secret {name} does not exist"

    def value(self, session, run, name):  # type: ignore[no-untyped-def]
        return self.values.get(name)


def refused(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    with pytest.raises(AttemptRefused) as info:
        fn(*args, **kwargs)
    return info.value


def stored(world: World, attempt_id: int) -> list[tuple[str, str, str]]:
    with world.session() as session:
        rows = session.scalars(
            select(LogRecord).where(LogRecord.attempt_id == attempt_id).order_by(LogRecord.position)
        )
        return [(r.step_id, r.stream, r.text) for r in rows]


def joined(world: World, attempt_id: int, step_id: str = "", stream: str = "stdout") -> str:
    return "".join(t for s, st_, t in stored(world, attempt_id) if (s, st_) == (step_id, stream))


def started(world: World, *jobs: dict[str, Any]) -> Claimed:
    world.queue_run(*(jobs or (plan_job("build", steps=("a", "b")),)))
    claimed = world.claim()
    assert claimed is not None
    world.start(claimed)
    return claimed


def test_sequences_replays_and_conflicts(world: World) -> None:
    claimed = started(world)
    assert world.log(claimed, 1, "one\n").acknowledged_log_sequence == 1
    assert (
        world.log(claimed, 2, "two\n", step_id="a", stream="stderr").acknowledged_log_sequence == 2
    )
    # An exact replay is acknowledged without storing it twice.
    assert world.log(claimed, 1, "one\n").acknowledged_log_sequence == 2
    assert len(stored(world, claimed.id)) == 2
    conflict = refused(world.log, claimed, 1, "ONE\n")
    assert (conflict.error.code, conflict.error.http_status) == ("log_conflict", 409)
    moved = refused(world.log, claimed, 2, "two\n", step_id="b", stream="stderr")
    assert moved.error.code == "log_conflict"
    gap = refused(world.log, claimed, 4, "four\n")
    assert (gap.error.code, gap.status.acknowledged_log_sequence) == ("log_out_of_order", 2)
    assert refused(world.log, claimed, 3, "x", step_id="zz").error.code == "unknown_step"
    assert len(stored(world, claimed.id)) == 2
    # Completion must cite the last acknowledged sequence.
    mismatch = refused(world.complete, claimed, "failure", last_log_sequence=3)
    assert mismatch.error.code == "log_sequence_mismatch"
    world.complete(claimed, "failure", last_log_sequence=2)


def test_the_credential_is_masked_even_across_chunks(world: World) -> None:
    claimed = started(world)
    token = claimed.token
    world.log(claimed, 1, f"leak {token[:20]}", step_id="a")
    world.log(claimed, 2, "unrelated stderr\n", step_id="a", stream="stderr")
    world.log(claimed, 3, f"{token[20:]} done\n", step_id="a")
    world.log(claimed, 4, json.dumps({"t": token}) + "\n")
    text = "".join(t for _, _, t in stored(world, claimed.id))
    assert token not in text and token[:20] not in text and token[20:] not in text
    assert joined(world, claimed.id, "a") == "leak *** done\n"
    assert joined(world, claimed.id, "a", "stderr") == "unrelated stderr\n"
    assert joined(world, claimed.id) == '{"t": "***"}\n'


def test_the_carry_over_survives_a_server_restart(world: World) -> None:
    claimed = started(world)
    world.log(claimed, 1, f"x={claimed.token[:40]}", step_id="a")
    with world.session() as session:
        carry = session.scalar(select(LogCarry))
        assert carry is not None and claimed.token[:10].encode() not in carry.sealed
    # A new process: no cached automaton, a new coordinator.
    log_cases.MASKERS._items.clear()
    world.coordinator = world.make_coordinator()
    world.log(claimed, 2, f"{claimed.token[40:]}\n", step_id="a")
    assert joined(world, claimed.id, "a") == "x=***\n"


def test_withheld_tails_are_masked_when_the_attempt_ends(world: World) -> None:
    claimed = started(world)
    world.log(claimed, 1, f"almost {claimed.token[:30]}", step_id="a")
    assert joined(world, claimed.id, "a") == "almost "
    world.complete(claimed, "failure")
    assert joined(world, claimed.id, "a") == "almost ***"
    assert world.count(LogCarry) == 0
    # The same when the server ends the attempt without the credential (lost lease).
    second = started(world)
    world.log(second, 1, f"cut {second.token[:30]}", step_id="b")
    world.clock.advance(61)
    from forge_ci.coordinator.sweeper import Sweeper

    Sweeper(world.database.session, clock=world.clock).run_once()
    assert joined(world, second.id, "b") == "cut ***"


def test_short_tails_end_a_stream_unchanged_however_the_attempt_ends(world: World) -> None:
    """Under 8 bytes of the credential at the end is ordinary output (issue #12 item 2)."""
    from forge_ci.coordinator.sweeper import Sweeper

    claimed = started(world)
    world.log(claimed, 1, f"tidy-v{claimed.token[0]}", step_id="a")
    world.log(claimed, 2, f"seven {claimed.token[:7]}", step_id="b")
    world.log(claimed, 3, f"eight {claimed.token[:8]}", step_id="b", stream="stderr")
    assert joined(world, claimed.id, "a") == "tidy-v"  # withheld until the stream ends
    with world.session() as session:
        endings = session.scalars(select(LogCarry.ending).order_by(LogCarry.step_id)).all()
    assert sorted(endings) == sorted([claimed.token[0], claimed.token[:7], "***"])
    world.complete(claimed, "failure", last_log_sequence=3)
    assert joined(world, claimed.id, "a") == f"tidy-v{claimed.token[0]}"
    assert joined(world, claimed.id, "b") == f"seven {claimed.token[:7]}"
    assert joined(world, claimed.id, "b", "stderr") == "eight ***"
    # The same when the server ends the attempt without the credential (lost lease).
    second = started(world)
    world.log(second, 1, f"tidy-v{second.token[0]}", step_id="a")
    world.log(second, 2, f"eight {second.token[:8]}", step_id="b")
    world.clock.advance(61)
    Sweeper(world.database.session, clock=world.clock).run_once()
    assert joined(world, second.id, "a") == f"tidy-v{second.token[0]}"
    assert joined(world, second.id, "b") == "eight ***"
    assert world.count(LogCarry) == 0


def test_a_carry_without_an_ending_still_ends_as_the_mask(world: World) -> None:
    """Carries stored before the ending column (NULL) keep the old rule: one mask."""
    claimed = started(world)
    world.log(claimed, 1, f"x {claimed.token[0]}", step_id="a")
    with world.session() as session:
        row = session.scalar(select(LogCarry))
        assert row is not None
        row.ending = None
        session.commit()
    world.complete(claimed, "failure")
    assert joined(world, claimed.id, "a") == "x ***"


def test_issued_secrets_reach_the_assignment_and_never_the_log(world: World) -> None:
    world.secret_source = FixedSecrets({"API_KEY": SECRET, "KEY_FILE": MULTILINE})
    world.coordinator = world.make_coordinator()
    job = plan_job("deploy", steps=("push",))
    job["steps"][0]["env"] = {"API_KEY": {"secret": "API_KEY"}, "KEY": {"secret": "KEY_FILE"}}
    claimed = started(world, job)
    replayed = world.claim(request_id=claimed.request_id, attempt_token=claimed.token)
    assert replayed is not None and "secrets" not in replayed.assignment.to_json()
    assert claimed.assignment.steps[0].env["API_KEY"] == {"secret": "API_KEY"}
    world.step(claimed, "push", "running")
    assert world.secrets(claimed, "push") == {"API_KEY": SECRET, "KEY": MULTILINE}
    with world.session() as session:
        sealed = session.scalars(select(AttemptSecret.sealed)).all()
        assert len(sealed) == 2 and all(SECRET.encode() not in s for s in sealed)
    chunks = [
        f"key={SECRET[:5]}",
        f"{SECRET[5:]}\n",
        "line one of the key\n",
        json.dumps({"k": MULTILINE}) + "\n",
        "nested-token-value and short\n",
    ]
    for number, chunk in enumerate(chunks, 1):
        world.log(claimed, number, chunk, step_id="push")
    world.step(claimed, "push", "completed", "success", 0)
    world.complete(claimed, "success", outputs={})
    text = joined(world, claimed.id, "push")
    for forbidden in (SECRET, "line one of the key", "nested-token-value", MULTILINE):
        assert forbidden not in text
    assert "short" in text  # lines under 8 bytes are not masked on their own
    assert world.count(AttemptSecret) == 0  # forgotten when the attempt ended


def test_issued_secrets_are_read_once_per_attempt_and_process(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.secret_source = FixedSecrets({"API_KEY": SECRET})
    world.coordinator = world.make_coordinator()
    job = plan_job("deploy", steps=("push",))
    job["steps"][0]["env"] = {"API_KEY": {"secret": "API_KEY"}}
    claimed = started(world, job)
    reads: list[int] = []
    issued_values = log_cases.secrets.issued_values

    def counted(session, attempt, token):  # type: ignore[no-untyped-def]
        reads.append(attempt.id)
        return issued_values(session, attempt, token)

    monkeypatch.setattr(log_cases.secrets, "issued_values", counted)
    world.step(claimed, "push", "running")
    world.secrets(claimed, "push")  # reads them to fix the attempt's mask
    assert reads == [claimed.id]
    for number, chunk in enumerate([f"a {SECRET[:9]}", f"{SECRET[9:]} b\n", f"c {SECRET}\n"], 1):
        world.log(claimed, number, chunk, step_id="push")
    assert reads == [claimed.id] * 2  # the first chunk once, then the cached masker
    # A new process reads them again, and still masks them.
    log_cases.MASKERS._items.clear()
    world.log(claimed, 4, f"d {SECRET}\n", step_id="push")
    assert reads == [claimed.id] * 3
    assert joined(world, claimed.id, "push") == "a *** b\nc ***\nd ***\n"
    # The refusal side: another attempt does not get this attempt's masker.
    other = started(world, job)
    world.step(other, "push", "running")
    world.secrets(other, "push")
    world.log(other, 1, f"e {SECRET} {claimed.token}\n", step_id="push")
    assert reads == [claimed.id] * 3 + [other.id] * 2
    assert joined(world, other.id, "push") == f"e *** {claimed.token}\n"


def test_outputs_are_masked(world: World) -> None:
    claimed = started(world, plan_job("build", steps=("a",), outputs={"out": "x"}))
    world.run_steps(claimed)
    world.complete(claimed, "success", outputs={"out": f"token is {claimed.token}"})
    with world.session() as session:
        from forge_ci.models import JobOutput

        values = session.scalars(select(JobOutput.value)).all()
    assert values == ["token is ***"]


def test_short_outputs_are_not_masked(world: World) -> None:
    """Outputs 0..f, and tidy-v + the credential's first digit, are stored as they are."""
    names = {f"o{char}": char for char in "0123456789abcdef"}
    declared = dict.fromkeys([*names, "tidy", "seven", "eight", "whole"], "x")
    claimed = started(world, plan_job("build", steps=("a",), outputs=declared))
    token = claimed.token
    outputs = {
        **names,
        "tidy": f"tidy-v{token[0]}",
        "seven": token[:7],
        "eight": token[:8],
        "whole": token,
    }
    world.run_steps(claimed)
    world.complete(claimed, "success", outputs=outputs)
    with world.session() as session:
        from forge_ci.models import JobOutput

        stored_values = dict(session.execute(select(JobOutput.name, JobOutput.value)).all())
    assert stored_values == {
        **names,
        "tidy": f"tidy-v{token[0]}",
        "seven": token[:7],
        "eight": "***",
        "whole": "***",
    }


def test_the_log_cap_stops_the_job_with_a_clear_line(world: World) -> None:
    world.settings = dataclasses.replace(world.settings, log_cap_bytes=100)
    world.coordinator = world.make_coordinator()
    claimed = started(world)
    world.log(claimed, 1, "x" * 60)
    error = refused(world.log, claimed, 2, "y" * 41)
    assert (error.error.code, error.error.http_status) == ("log_limit_reached", 413)
    assert error.status.cancel_requested
    assert error.status.acknowledged_log_sequence == 1
    again = refused(world.log, claimed, 2, "z")
    assert again.error.code == "log_limit_reached"
    records = stored(world, claimed.id)
    assert records[-1] == ("", "system", "log limit of 100 bytes reached; job stopped\n")
    assert sum(1 for r in records if "log limit" in r[2]) == 1
    assert world.complete(claimed, "failure", last_log_sequence=1).conclusion == "cancelled"
    job = world.job(world.attempt(claimed.id).job_id)
    assert job.conclusion == "cancelled"
    assert "log limit of 100 bytes" in (job.status_reason or "")


def test_reading_pages_is_scoped_and_complete_only_at_the_end(world: World) -> None:
    claimed = started(world)
    for number in range(1, 151):
        world.log(claimed, number, f"line {number}\n", step_id="a")
    run_number = 1
    with world.session() as session:
        page = read_log_page(session, OPERATOR, "alice/app", run_number, claimed.id)
    assert len(page.records) == 100 and page.has_more and not page.complete
    assert page.records[0].as_dict() == {
        "cursor": "1",
        "step_id": "a",
        "stream": "stdout",
        "text": "line 1\n",
    }
    with world.session() as session:
        rest = read_log_page(session, OPERATOR, "alice/app", run_number, claimed.id, 100)
    assert len(rest.records) == 50 and not rest.has_more and not rest.complete
    world.complete(claimed, "failure")
    with world.session() as session:
        final = read_log_page(
            session, OPERATOR, "alice/app", run_number, claimed.id, rest.next_cursor
        )
    assert final.complete and final.attempt_state == "completed"
    assert final.conclusion == "failure"
    # Scope: another person, the wrong repository or run: all the same NotFound.
    with world.session() as session:
        bob = session.scalar(select(User).where(User.name == "bob"))
        assert bob is not None
        for actor, repository, number in (
            (Actor.for_user(bob), "alice/app", 1),
            (Actor.anonymous(), "alice/app", 1),
            (OPERATOR, "bob/lib", 1),
            (OPERATOR, "alice/app", 2),
        ):
            with pytest.raises(NotFound):
                read_log_page(session, actor, repository, number, claimed.id)
        assert session.scalar(select(Run.number)) == 1


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    secret=st.text(st.sampled_from(list('ab01"\\\n é/')), min_size=1, max_size=20),
    pieces=st.lists(st.text(st.sampled_from(list("ab01 \n")), max_size=6), max_size=6),
    cuts=st.sets(st.integers(0, 200), max_size=6),
)
def test_no_chunking_stores_a_secret(
    sqlite_world: World, secret: str, pieces: list[str], cuts: set[int]
) -> None:
    """Property, through the real service and database: nothing of the secret is stored."""
    world = sqlite_world
    world.secret_source = FixedSecrets({"S": secret})
    world.coordinator = world.make_coordinator()
    job = plan_job("p", steps=("s",))
    job["steps"][0]["env"] = {"S": {"secret": "S"}}
    claimed = started(world, job)
    world.step(claimed, "s", "running")
    assert world.secrets(claimed, "s") == {"S": secret}
    forms = [secret, json.dumps(secret)[1:-1]]
    output = "".join(p + forms[i % 2] for i, p in enumerate(pieces)) + "end"
    bounds = [0, *sorted(c for c in cuts if c < len(output)), len(output)]
    chunks = [output[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    for number, chunk in enumerate(chunks, 1):
        world.log(claimed, number, chunk, step_id="s")
    world.complete(claimed, "failure")
    text = joined(world, claimed.id, "s")
    assert secret not in text and json.dumps(secret)[1:-1] not in text
    for line in re.split(r"\r\n|\n|\r", secret):
        if len(line.encode()) >= 8:
            assert line not in text
