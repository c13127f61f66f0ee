"""Scheduled workflows: the switch, one run per workflow and minute, restarts and racing workers.

The scheduler is driven by an injected clock: no test waits for wall time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from forge_ci.authz import Role
from forge_ci.db import Database
from forge_ci.errors import PermissionDenied
from forge_ci.models import Repository, Run, ScheduledMinute
from forge_ci.repos import grant, set_scheduled_workflows
from forge_ci.runs.scheduled import recent_scheduled_minutes
from forge_ci.runs.scheduler import MAX_CATCH_UP_MINUTES, Scheduler
from tests.forge_ci.runs.conftest import CI, OPERATOR, Forge

NIGHTLY = """\
name: Nightly
on:
  schedule:
    - cron: '*/5 * * * *'
    - cron: '0 3 * * MON'
jobs:
  build:
    runs-on: [self-hosted]
    steps:
      - run: make
"""
EVERY_MINUTE = NIGHTLY.replace("'*/5 * * * *'", "'* * * * *'")
PUSH_ONLY = NIGHTLY.replace("on:\n  schedule:", "on:\n  push:\n  x-schedule:").split("  x-")[0]
PUSH_ONLY += "jobs:\n  build:\n    runs-on: [self-hosted]\n    steps:\n      - run: make\n"


class Clock:
    """A settable UTC clock for the scheduler."""

    def __init__(self, when: str) -> None:
        self.now = datetime.fromisoformat(when).replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: str) -> None:
        self.now = datetime.fromisoformat(when).replace(tzinfo=UTC)

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def scheduler(forge: Forge, clock: Clock, database: Database | None = None) -> Scheduler:
    return Scheduler((database or forge.database).session, forge.settings, clock)


@dataclass(frozen=True)
class RunSeen:
    number: int
    event_name: str
    ref: str
    sha: str
    requested_by_name: str
    context: dict[str, Any]


def runs(forge: Forge) -> list[RunSeen]:
    """The runs as stored, read in a transaction of their own (the scheduler must not wait)."""
    with forge.database.session(read_only=True) as session:
        return [
            RunSeen(r.number, r.event_name, r.ref, r.sha, r.requested_by_name, dict(r.context))
            for r in session.scalars(select(Run).order_by(Run.number))
        ]


def minutes_stored(forge: Forge) -> list[tuple[datetime, str, int | None, str]]:
    with forge.database.session(read_only=True) as session:
        return [
            (row.minute, row.outcome, row.run_id, row.cron)
            for row in session.scalars(select(ScheduledMinute).order_by(ScheduledMinute.minute))
        ]


def switch_on(forge: Forge, who: str = "alice") -> None:
    set_scheduled_workflows(forge.session, forge.people[who], forge.full_name, True)
    forge.session.commit()


def test_scheduled_workflows_are_off_by_default(forge: Forge) -> None:
    forge.commit({CI: NIGHTLY})
    assert forge.repo.scheduled_workflows_enabled is False
    forge.session.rollback()
    ticks = scheduler(forge, Clock("2026-12-01T12:00:10"))
    assert ticks.tick() == []
    assert runs(forge) == []


def test_a_matching_minute_runs_the_default_branch_as_its_switcher(forge: Forge) -> None:
    sha = forge.commit({CI: NIGHTLY, ".github/workflows/push.yml": PUSH_ONLY})
    forge.commit({CI: EVERY_MINUTE}, branch="other")
    switch_on(forge, "carol")
    clock = Clock("2026-12-01T12:00:10")
    ticks = scheduler(forge, clock)
    (decided,) = ticks.tick()
    assert (decided.outcome, decided.run_number, decided.workflow_path) == ("run_created", 1, CI)
    (run,) = runs(forge)
    assert (run.event_name, run.ref, run.sha) == ("schedule", "refs/heads/main", sha)
    assert run.requested_by_name == "carol"
    assert run.context["event_name"] == "schedule"
    event = run.context["event"]
    assert event["schedule"] == "*/5 * * * *"
    assert event["repository"]["full_name"] == run.context["repository"]
    assert event["sender"]["login"] == run.requested_by_name
    assert forge.states(1) == {"build": "queued"}
    forge.session.rollback()

    for minute in range(1, 5):  # 12:01 .. 12:04 do not match */5
        clock.set(f"2026-12-01T12:0{minute}:30")
        assert ticks.tick() == []
    clock.set("2026-12-01T12:05:00")
    assert [d.run_number for d in ticks.tick()] == [2]
    assert len(runs(forge)) == 2
    # A later commit on the default branch is what the next minute runs.
    newer = forge.commit({CI: NIGHTLY, "README": "x"})
    clock.set("2026-12-01T12:10:59")
    ticks.tick()
    assert runs(forge)[-1].sha == newer


def test_no_missed_run_while_up_even_when_a_tick_is_late(forge: Forge) -> None:
    forge.commit({CI: EVERY_MINUTE})
    switch_on(forge)
    clock = Clock("2026-12-01T12:00:05")
    ticks = scheduler(forge, clock)
    ticks.tick()
    clock.set("2026-12-01T12:04:50")  # 12:01 .. 12:04 were due meanwhile
    assert [d.minute.minute for d in ticks.tick()] == [1, 2, 3, 4]
    assert [r.number for r in runs(forge)] == [1, 2, 3, 4, 5]
    rows = minutes_stored(forge)
    assert [minute.minute for minute, *_ in rows] == [0, 1, 2, 3, 4]
    assert all(minute.tzinfo is not None and minute.second == 0 for minute, *_ in rows)


def test_minutes_while_no_worker_ran_are_not_replayed(forge: Forge) -> None:
    forge.commit({CI: EVERY_MINUTE})
    switch_on(forge)
    clock = Clock("2026-12-01T12:00:05")
    scheduler(forge, clock).tick()
    clock.set("2026-12-01T12:30:05")  # the worker was down for half an hour
    (decided,) = scheduler(forge, clock).tick()
    assert decided.minute.minute == 30
    assert len(runs(forge)) == 2


def test_a_very_late_worker_catches_up_a_bounded_number_of_minutes(forge: Forge) -> None:
    forge.commit({CI: EVERY_MINUTE})
    switch_on(forge)
    clock = Clock("2026-12-01T12:00:05")
    ticks = scheduler(forge, clock)
    ticks.tick()
    clock.set("2026-12-01T13:00:05")  # up, but the database was unreachable for an hour
    assert len(ticks.tick()) == MAX_CATCH_UP_MINUTES
    assert len(runs(forge)) == 1 + MAX_CATCH_UP_MINUTES


def test_a_restart_in_the_middle_of_a_minute_creates_no_duplicate(forge: Forge) -> None:
    forge.commit({CI: NIGHTLY})
    switch_on(forge)
    clock = Clock("2026-12-01T12:05:10")
    assert len(scheduler(forge, clock).tick()) == 1
    clock.set("2026-12-01T12:05:40")  # a new worker process, same minute
    restarted = Database(forge.settings)
    try:
        assert scheduler(forge, clock, restarted).tick() == []
    finally:
        restarted.dispose()
    assert len(runs(forge)) == 1


@contextmanager
def _no_lock(*args: object, **kwargs: object) -> Iterator[None]:
    yield


@pytest.mark.parametrize("shared_lock", [True, False], ids=["one-host", "two-hosts"])
def test_two_workers_racing_the_same_minutes_create_one_run_each(
    forge: Forge, shared_lock: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not shared_lock:
        # Workers on two hosts do not share the repository's file lock: only the database's
        # unique key keeps them from both creating a run.
        monkeypatch.setattr("forge_ci.runs.create.repository_lock", _no_lock)
    forge.commit({CI: EVERY_MINUTE})
    switch_on(forge)
    minutes = 4
    databases = [Database(forge.settings), Database(forge.settings)]
    clocks = [Clock("2026-12-01T12:00:01"), Clock("2026-12-01T12:00:02")]
    workers = [scheduler(forge, c, d) for c, d in zip(clocks, databases, strict=True)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for _ in range(minutes):
                start.wait(timeout=30)
                workers[index].tick()
                clocks[index].advance(minutes=1)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for database in databases:
        database.dispose()
    assert not errors, errors
    assert [r.number for r in runs(forge)] == list(range(1, minutes + 1))
    assert len(minutes_stored(forge)) == minutes


def test_a_switcher_who_lost_their_role_starts_nothing_and_it_says_why(forge: Forge) -> None:
    forge.commit({CI: NIGHTLY})
    switch_on(forge, "carol")
    grant(forge.session, OPERATOR, forge.full_name, "carol", Role.WRITE)
    forge.session.commit()
    clock = Clock("2026-12-01T12:05:00")
    (decided,) = scheduler(forge, clock).tick()
    assert decided.outcome == "not_authorized"
    assert "carol, who switched scheduled workflows on, now has write access" in decided.detail
    assert runs(forge) == []
    (row,) = recent_scheduled_minutes(forge.session, forge.people["dave"], forge.full_name)
    assert (row.outcome, row.run_id, row.cron) == ("not_authorized", None, "*/5 * * * *")
    forge.session.rollback()
    # Given back: the next matching minute runs again.
    grant(forge.session, OPERATOR, forge.full_name, "carol", Role.ADMIN)
    forge.session.commit()
    clock.set("2026-12-01T12:10:00")
    assert [d.outcome for d in scheduler(forge, clock).tick()] == ["run_created"]


def test_only_owners_and_admins_switch_and_off_stops_the_next_minute(forge: Forge) -> None:
    forge.commit({CI: NIGHTLY})
    with pytest.raises(PermissionDenied):
        set_scheduled_workflows(forge.session, forge.people["bob"], forge.full_name, True)
    forge.session.rollback()
    with pytest.raises(PermissionDenied, match="bob has write access"):
        set_scheduled_workflows(forge.session, OPERATOR, forge.full_name, True, requester="bob")
    forge.session.rollback()
    with pytest.raises(PermissionDenied, match="in someone else's name"):
        set_scheduled_workflows(
            forge.session, forge.people["carol"], forge.full_name, True, requester="alice"
        )
    forge.session.rollback()
    repo = set_scheduled_workflows(forge.session, OPERATOR, forge.full_name, True)
    assert repo.scheduled_workflows_requester is not None
    assert repo.scheduled_workflows_requester.name == "alice"  # the owner, by default
    forge.session.commit()
    set_scheduled_workflows(forge.session, forge.alice, forge.full_name, False)
    forge.session.commit()
    stored = forge.session.get(Repository, forge.repo.id)
    assert stored is not None and stored.scheduled_workflows_requester_id is None
    forge.session.rollback()
    assert scheduler(forge, Clock("2026-12-01T12:05:00")).tick() == []
    assert runs(forge) == []


def test_invalid_and_unscheduled_files_are_not_run(forge: Forge) -> None:
    broken = NIGHTLY.replace("runs-on: [self-hosted]", "runs_on: [self-hosted]")
    forge.commit({CI: broken, ".github/workflows/push.yml": PUSH_ONLY})
    switch_on(forge)
    assert scheduler(forge, Clock("2026-12-01T12:05:00")).tick() == []
    assert runs(forge) == []
