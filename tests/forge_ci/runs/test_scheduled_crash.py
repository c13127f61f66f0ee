"""kill -9 of a worker in the middle of a scheduled minute: no run is lost to it, none doubled.

A real process is killed with SIGKILL at the worst moments: after its run was inserted but before
the minute's row and the commit, and right after the commit. The place is chosen by wrapping a
function in the child; the crash itself is real. A restarted scheduler then takes the same minute.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from sqlalchemy import select

from forge_ci.models import Run, ScheduledMinute
from forge_ci.repos import set_scheduled_workflows
from forge_ci.runs.scheduler import Scheduler
from tests.forge_ci.runs.conftest import CI, Forge
from tests.forge_ci.runs.test_scheduled import EVERY_MINUTE, Clock

CHILD = """
import os, signal, sys
from datetime import datetime, UTC
from forge_ci.db import Database
from forge_ci.settings import load_settings
from forge_ci.runs import create
from forge_ci.runs.scheduler import Scheduler

moment = sys.argv[1]
original = create.RunCreation.create
created = []


def create_then_maybe_die(self, *args, **kwargs):
    run = original(self, *args, **kwargs)
    created.append(run)
    if moment == "after-insert":
        self.session.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # the run is written, not committed
    return run


create.RunCreation.create = create_then_maybe_die

from sqlalchemy.orm import Session

commit = Session.commit


def commit_then_maybe_die(self):
    commit(self)
    if created and moment == "after-commit":
        os.kill(os.getpid(), signal.SIGKILL)  # committed; the worker never heard of it


Session.commit = commit_then_maybe_die

database = Database(load_settings())
minute = datetime(2026, 12, 1, 12, 7, 30, tzinfo=UTC)
Scheduler(database.session, load_settings(), lambda: minute).tick()
print("survived")
"""


@pytest.mark.parametrize(("moment", "runs_left"), [("after-insert", 0), ("after-commit", 1)])
def test_a_worker_killed_mid_minute_leaves_one_run_after_restart(
    forge: Forge, moment: str, runs_left: int
) -> None:
    forge.commit({CI: EVERY_MINUTE})
    set_scheduled_workflows(forge.session, forge.alice, forge.full_name, True)
    forge.session.commit()
    env = {
        "FORGE_CI_DATA_DIR": str(forge.settings.data_dir),
        "FORGE_CI_DATABASE_URL": forge.settings.database_url,
        "PATH": "/usr/bin:/bin",
    }
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), moment],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr
    assert "survived" not in child.stdout

    def stored() -> tuple[list[int], list[str]]:
        with forge.database.session(read_only=True) as session:
            numbers = list(session.scalars(select(Run.number)))
            rows = list(session.scalars(select(ScheduledMinute.outcome)))
        return numbers, rows

    assert stored() == ([1] * runs_left, ["run_created"] * runs_left)
    # The worker comes back in the same minute and takes it again.
    restarted = Scheduler(forge.database.session, forge.settings, Clock("2026-12-01T12:07:50"))
    restarted.tick()
    assert stored() == ([1], ["run_created"])
