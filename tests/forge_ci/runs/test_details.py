"""Run details, recent push events and dispatch choices: what the pipelines pages read."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import event

from forge_ci.errors import InvalidInput, NotFound
from forge_ci.runs.choices import dispatch_choices
from forge_ci.runs.details import run_details
from forge_ci.runs.recent import recent_push_events
from tests.forge_ci.runs.conftest import CI, Forge, job, workflow

TWO_JOBS = workflow(job("build") + job("test", needs="build"))


def test_details_carry_jobs_edges_timing_and_planned_steps(forge: Forge) -> None:
    forge.commit({CI: TWO_JOBS})
    run = forge.dispatch()
    forge.session.commit()
    details = run_details(forge.session, forge.people["dave"], "alice/demo", run.number)
    build, test = details.jobs
    assert (build.key, build.state, build.needs) == ("build", "queued", ())
    assert (test.key, test.state, test.needs) == ("test", "waiting", (build.id,))
    assert build.queued_at is not None and build.started_at is None
    assert [s.step_id for s in build.steps] == ["step_1"]
    assert build.steps[0].state == "pending" and build.latest_attempt is None
    assert not details.is_terminal
    forge.finish(run, "build")
    forge.finish(run, "test")
    details = run_details(forge.session, forge.people["dave"], "alice/demo", run.number)
    assert details.is_terminal and all(j.conclusion == "success" for j in details.jobs)


def test_the_plan_is_read_once_per_run_not_per_view(forge: Forge) -> None:
    forge.commit({CI: TWO_JOBS})
    number = forge.dispatch().number
    forge.session.commit()
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    engine = forge.session.get_bind()
    event.listen(engine, "before_cursor_execute", record)
    try:
        views = [
            run_details(forge.session, forge.people["dave"], "alice/demo", number) for _ in range(3)
        ]
        forge.session.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    plan_reads = [s for s in statements if re.search(r'runs\.("plan"|plan\b)', s)]
    assert len(plan_reads) <= 1, plan_reads  # none when an earlier test had the same plan
    assert views[0].jobs[0].steps == views[2].jobs[0].steps
    # Another plan is another entry: a different run never gets these steps.
    forge.commit({CI: workflow(job("other"))})
    other = run_details(forge.session, forge.people["dave"], "alice/demo", forge.dispatch().number)
    assert [j.key for j in other.jobs] == ["other"]


def test_details_are_for_readers_only(forge: Forge) -> None:
    forge.commit({CI: TWO_JOBS})
    run = forge.dispatch()
    forge.session.commit()
    with pytest.raises(NotFound):
        run_details(forge.session, forge.people["erin"], "alice/demo", run.number)
    with pytest.raises(NotFound):
        run_details(forge.session, forge.alice, "alice/demo", run.number + 1)


def test_recent_push_events_are_for_readers_and_bounded(forge: Forge) -> None:
    assert recent_push_events(forge.session, forge.people["dave"], "alice/demo") == []
    with pytest.raises(NotFound):
        recent_push_events(forge.session, forge.people["erin"], "alice/demo")
    with pytest.raises(InvalidInput):
        recent_push_events(forge.session, forge.alice, "alice/demo", limit=0)


def test_dispatch_choices_list_branches_and_workflow_files(forge: Forge) -> None:
    empty = dispatch_choices(forge.session, forge.settings, forge.alice, "alice/demo")
    assert empty.branches == () and empty.workflow_paths == ()
    forge.commit({CI: TWO_JOBS, ".github/workflows/other.yaml": TWO_JOBS})
    forge.commit({"README": "x"}, branch="feature/x")
    choices = dispatch_choices(forge.session, forge.settings, forge.people["dave"], "alice/demo")
    assert choices.branches == ("feature/x", "main")
    assert choices.workflow_paths == (CI, ".github/workflows/other.yaml")
    assert choices.default_branch == "main"
    with pytest.raises(NotFound):
        dispatch_choices(forge.session, forge.settings, forge.people["erin"], "alice/demo")
