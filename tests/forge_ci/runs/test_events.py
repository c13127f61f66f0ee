"""Push events into runs, in the core: opt-in, trust, filters, outcomes, idempotency, retries.

Events are made here the way the push path leaves them (a confirmed row and its pin under
refs/forge-ci/push-events/<id>); tests/ssh/test_push_workflows.py pushes over real SSH.
"""

from __future__ import annotations

import secrets
import threading
from datetime import timedelta

import pygit2
import pytest
from sqlalchemy import func, select

from forge_ci.errors import RepositoryBusy
from forge_ci.locks import repository_lock
from forge_ci.models import (
    PushEvent,
    PushEventResult,
    PushEventWorkflow,
    Run,
    User,
    utcnow,
)
from forge_ci.repos import revoke, set_push_workflows
from forge_ci.runs import create, events
from forge_ci.runs.events import process_push_event
from forge_ci.runs.pins import PIN_PREFIX
from tests.forge_ci.runs.conftest import OPERATOR, Forge, job, workflow

ZERO = "0" * 40
WF = ".github/workflows/"
ON_MAIN = workflow(job("build") + job("test", needs="build"), on="\n  push:\n    branches: [main]")
ON_SRC = workflow(job("src"), on="\n  push:\n    paths: ['src/**']")
ON_RELEASE = workflow(job("rel"), on="\n  push:\n    branches: ['release/*']")
DISPATCH_ONLY = workflow(job("manual"))
GITHUB_ONLY = "on: schedule\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: x\n"


def _event(
    forge: Forge,
    new: str,
    old: str = ZERO,
    ref: str = "refs/heads/main",
    pusher: str = "alice",
    created_at_offset: float = 0,
) -> int:
    """A confirmed push event with its pin, as the SSH push path leaves it."""
    user = forge.session.scalar(select(User).where(User.name == pusher))
    assert user is not None
    event = PushEvent(
        repository_id=forge.repo.id,
        pusher_id=user.id,
        push_session=secrets.token_hex(8),
        ref=ref,
        old_sha=old,
        new_sha=new,
        state="confirmed",
        created_at=utcnow() + timedelta(seconds=created_at_offset),
        settled_at=utcnow(),
    )
    forge.session.add(event)
    forge.session.flush()
    if set(new) != {"0"} and len(new) == 40 and new in forge.git():
        forge.git().references.create(f"refs/forge-ci/push-events/{event.id}", pygit2.Oid(hex=new))
    forge.session.commit()
    return event.id


def _enable(forge: Forge) -> None:
    set_push_workflows(forge.session, OPERATOR, "alice/demo", True)
    forge.session.commit()


def _process(forge: Forge, event_id: int) -> events.EventOutcome:
    outcome = process_push_event(forge.session, forge.settings, event_id)
    forge.session.commit()
    return outcome


def _outcomes(forge: Forge, event_id: int) -> dict[str, tuple[str, str, int | None]]:
    rows = forge.session.scalars(
        select(PushEventWorkflow)
        .where(PushEventWorkflow.push_event_id == event_id)
        .execution_options(populate_existing=True)
    )
    return {
        row.workflow_path.removeprefix(WF): (
            row.outcome,
            row.detail,
            row.run.number if row.run is not None else None,
        )
        for row in rows
    }


def _runs(forge: Forge) -> int:
    return forge.session.scalar(select(func.count()).select_from(Run)) or 0


def _state(forge: Forge, event_id: int) -> str:
    event = forge.session.get(PushEvent, event_id, populate_existing=True)
    assert event is not None
    state = event.state
    forge.session.rollback()  # an open transaction of the test's would hold the write lock
    return state


def test_each_workflow_file_gets_an_outcome_and_matching_ones_a_run(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit(
        {
            WF + "main.yml": ON_MAIN,
            WF + "src.yaml": ON_SRC,
            WF + "release.yml": ON_RELEASE,
            WF + "manual.yml": DISPATCH_ONLY,
            WF + "github.yml": GITHUB_ONLY,
            WF + "notes.txt": "not a workflow",
            "src/app.py": "print('hi')\n",
        }
    )
    event_id = _event(forge, sha)
    outcome = _process(forge, event_id)
    assert outcome.result == "processed" and outcome.runs == (1, 2)
    assert outcome.detail == f"5 workflow files inspected at {sha[:12]}; runs created: #1, #2"
    found = _outcomes(forge, event_id)
    assert found["main.yml"] == (
        "run_created",
        "branch 'main' matches 'main' in branches [main]",
        1,
    )
    assert found["src.yaml"] == (
        "run_created",
        # The first push of main: its changed paths are unknown, so path filters match.
        "push on branch 'main' (no branch filter); changed paths are unknown, so paths "
        "cannot exclude it",
        2,
    )
    assert found["release.yml"] == (
        "not_matched",
        "branch 'main' is not in branches [release/*]",
        None,
    )
    assert found["manual.yml"] == ("not_matched", "the workflow has no push trigger", None)
    assert found["github.yml"][0] == "invalid"
    assert "schedule needs a list of cron entries" in found["github.yml"][1]
    diagnostics = forge.session.scalar(
        select(PushEventWorkflow.diagnostics).where(
            PushEventWorkflow.workflow_path == WF + "github.yml"
        )
    )
    assert diagnostics and diagnostics[0]["line"] == 1
    assert "notes.txt" not in found
    run = forge.run(1)
    assert (run.event_name, run.ref, run.sha) == ("push", "refs/heads/main", sha)
    assert run.context["event_name"] == "push" and run.requested_by_name == "alice"
    assert forge.states(1) == {"build": "queued", "test": "waiting"}
    assert _state(forge, event_id) == "received"


def test_replay_creates_nothing_twice(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN, WF + "b.yml": ON_MAIN.replace("CI", "B")})
    event_id = _event(forge, sha)
    first = _process(forge, event_id)
    again = _process(forge, event_id)
    assert first.runs == again.runs == (1, 2)
    assert (again.result, again.detail) == (first.result, first.detail)
    assert _runs(forge) == 2
    # Two workers racing on the same event still make one run per workflow.
    event_id = _event(forge, forge.commit({"x": "1"}), old=sha)
    errors: list[BaseException] = []

    def work() -> None:
        session = forge.database.sessions()
        try:
            process_push_event(session, forge.settings, event_id)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            session.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert _runs(forge) == 4
    assert sorted(n for _, _, n in _outcomes(forge, event_id).values() if n) == [3, 4]


def test_a_half_processed_event_is_completed_without_duplicates(forge: Forge) -> None:
    """A crash after the first file's transaction: the next attempt does only the rest."""
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN, WF + "b.yml": ON_MAIN})
    event_id = _event(forge, sha)
    real = events._process_file
    calls = 0

    def crash_on_second(*args: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise SystemExit("worker killed")
        real(*args)  # type: ignore[arg-type]

    events._process_file = crash_on_second  # type: ignore[assignment]
    try:
        with pytest.raises(SystemExit):
            _process(forge, event_id)
    finally:
        events._process_file = real  # type: ignore[assignment]
    forge.session.rollback()
    assert _runs(forge) == 1 and _state(forge, event_id) == "confirmed"
    assert forge.session.get(PushEventResult, event_id) is None
    assert _process(forge, event_id).runs == (1, 2)
    assert _runs(forge) == 2


@pytest.mark.parametrize(
    ("ref", "new", "old", "detail"),
    [
        ("refs/tags/v1", "commit", ZERO, "tag pushes do not start workflows"),
        ("refs/heads/main", ZERO, "commit", "the branch was deleted; there is nothing to run"),
        ("refs/heads/main", "commit", "commit", "the branch did not change"),
        ("refs/notes/commits", "commit", ZERO, "only branch pushes start workflows"),
    ],
)
def test_tags_deletions_and_unchanged_refs_create_no_runs(
    forge: Forge, ref: str, new: str, old: str, detail: str
) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": workflow(job("a"), on="push")})
    event_id = _event(
        forge, sha if new == "commit" else new, sha if old == "commit" else old, ref=ref
    )
    outcome = _process(forge, event_id)
    assert outcome.result == "ignored" and detail in outcome.detail
    assert _runs(forge) == 0 and _outcomes(forge, event_id) == {}
    assert _state(forge, event_id) == "received"


def test_disabled_repositories_and_older_pushes_create_no_runs(forge: Forge) -> None:
    sha = forge.commit({WF + "a.yml": ON_MAIN})
    while_off = _event(forge, sha)
    outcome = _process(forge, while_off)
    assert (outcome.result, outcome.detail) == (
        "disabled",
        "push workflows are off for this repository",
    )
    # Pushed while off, processed after switching on: still not replayed.
    pending = _event(forge, sha, created_at_offset=-5)
    _enable(forge)
    outcome = _process(forge, pending)
    assert outcome.result == "disabled" and "older pushes are not replayed" in outcome.detail
    assert _process(forge, while_off).result == "disabled"  # decided once
    assert _runs(forge) == 0
    # A push after switching on runs; switching off again cancels nothing already created.
    later = _event(forge, forge.commit({"x": "1"}), old=sha)
    assert _process(forge, later).runs == (1,)
    set_push_workflows(forge.session, OPERATOR, "alice/demo", False)
    forge.session.commit()
    assert forge.run(1).state == "queued"
    after_off = _event(forge, forge.commit({"x": "2"}))
    assert _process(forge, after_off).result == "disabled"


def test_switching_off_while_an_event_is_processed_stops_its_remaining_files(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN, WF + "b.yml": ON_MAIN})
    event_id = _event(forge, sha)
    decide = events._decide_file

    def owner_switches_off_after_the_first_file(*args: object) -> object:
        if args[-1] == WF + "b.yml":  # the owner's switch lands between the two files
            with forge.database.session() as other:
                set_push_workflows(other, OPERATOR, "alice/demo", False)
                other.commit()
        return decide(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(events, "_decide_file", owner_switches_off_after_the_first_file)
    outcome = _process(forge, event_id)
    assert outcome.runs == (1,)
    found = _outcomes(forge, event_id)
    assert found["a.yml"][0] == "run_created"
    assert found["b.yml"][:2] == (
        "failed",
        "push workflows were switched off before its run was created",
    )


def test_only_owners_admins_and_site_admins_run_code_rechecked_when_processed(
    forge: Forge,
) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN})
    by_writer = _process(forge, _event(forge, sha, pusher="bob"))
    assert by_writer.result == "not_authorized"
    assert by_writer.detail == (
        "bob has write access; only pushes by repository owners, admins and site "
        "administrators run workflows"
    )
    assert _process(forge, _event(forge, sha, pusher="carol")).runs == (1,)  # an admin
    # carol loses her role between the push and its processing.
    pending = _event(forge, sha, pusher="carol")
    revoke(forge.session, OPERATOR, "alice/demo", "carol")
    forge.session.commit()
    outcome = _process(forge, pending)
    assert outcome.result == "not_authorized" and outcome.detail.startswith("carol has no access")
    # A deactivated owner runs nothing either; a site administrator does.
    alice = forge.session.scalar(select(User).where(User.name == "alice"))
    assert alice is not None
    alice.is_active = False
    forge.session.commit()
    assert _process(forge, _event(forge, sha)).result == "not_authorized"
    erin = forge.session.scalar(select(User).where(User.name == "erin"))
    assert erin is not None
    erin.is_admin = True
    forge.session.commit()
    assert _process(forge, _event(forge, sha, pusher="erin")).runs == (2,)
    assert _runs(forge) == 2


def test_path_filters_use_the_diff_of_the_push(forge: Forge) -> None:
    _enable(forge)
    base = forge.commit({WF + "src.yml": ON_SRC, "src/a.py": "1", "docs/a.md": "1"})
    _process(forge, _event(forge, base))  # first push of main: paths unknown -> runs
    assert _runs(forge) == 1
    docs = forge.commit({"docs/a.md": "2"})
    outcome = _process(forge, _event(forge, docs, old=base))
    assert outcome.runs == () and _outcomes(forge, outcome.event_id)["src.yml"] == (
        "not_matched",
        "no changed path matches paths [src/**]",
        None,
    )
    code = forge.commit({"src/a.py": "2"})
    outcome = _process(forge, _event(forge, code, old=docs))
    assert outcome.runs == (2,)
    assert _outcomes(forge, outcome.event_id)["src.yml"][1] == (
        "push on branch 'main' (no branch filter); 'src/a.py' matches 'src/**' in paths [src/**]"
    )
    # A new branch is compared with where it left the default branch.
    topic_docs = forge.commit({"docs/b.md": "1"}, branch="topic", parent=code)
    outcome = _process(forge, _event(forge, topic_docs, ref="refs/heads/topic"))
    assert outcome.runs == ()
    topic_src = forge.commit({"src/b.py": "1"}, branch="topic2", parent=code)
    outcome = _process(forge, _event(forge, topic_src, ref="refs/heads/topic2"))
    assert outcome.runs == (3,)
    # A new branch without commits of its own has nothing to compare: unknown, so it runs,
    # whether it starts at the default branch's tip or at an older commit of it.
    for number, start in ((4, code), (5, docs)):
        outcome = _process(forge, _event(forge, start, ref=f"refs/heads/from-{start[:7]}"))
        assert outcome.runs == (number,)
        assert "changed paths are unknown" in _outcomes(forge, outcome.event_id)["src.yml"][1]


def test_at_most_64_workflow_files_are_inspected(forge: Forge) -> None:
    _enable(forge)
    files = {f"{WF}w{index:02d}.yml": DISPATCH_ONLY for index in range(66)}
    sha = forge.commit(files)
    outcome = _process(forge, _event(forge, sha))
    assert len(_outcomes(forge, outcome.event_id)) == 64
    assert outcome.detail.startswith(f"64 workflow files inspected at {sha[:12]}; runs created")
    assert "2 more workflow files were not inspected (at most 64 are): " in outcome.detail
    assert f"{WF}w64.yml, {WF}w65.yml" in outcome.detail


def test_a_busy_repository_is_retried_later_and_nothing_is_half_done(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN})
    event_id = _event(forge, sha)
    monkeypatch.setattr(events, "EVENT_LOCK_TIMEOUT", 0.2)
    with repository_lock(forge.settings.locks_dir, forge.repo.id, "alice/demo", 1):
        with pytest.raises(RepositoryBusy, match="alice/demo is busy"):
            _process(forge, event_id)
    forge.session.rollback()
    assert _state(forge, event_id) == "confirmed" and _runs(forge) == 0
    assert _process(forge, event_id).runs == (1,)


def test_unexpected_failures_are_recorded_without_their_details(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN, WF + "b.yml": ON_MAIN})
    event_id = _event(forge, sha)
    real = create.insert_jobs
    calls = 0

    def fail_once(*args: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("password=hunter2 at /var/lib/forge-ci/secret")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(create, "insert_jobs", fail_once)
    outcome = _process(forge, event_id)
    found = _outcomes(forge, event_id)
    assert found["a.yml"] == ("failed", "a run could not be created (internal error)", None)
    assert found["b.yml"][0] == "run_created"
    assert "hunter2" not in outcome.detail and "hunter2" not in str(found)
    assert "hunter2" in caplog.text  # the operator's log has it
    pins = [name for name in forge.git().references if name.startswith(PIN_PREFIX)]
    assert pins == [forge.run(outcome.runs[0]).pin_ref]


def test_a_missing_commit_is_reported(forge: Forge) -> None:
    _enable(forge)
    forge.commit({WF + "a.yml": ON_MAIN})
    ghost = "1234567890" * 4
    outcome = _process(forge, _event(forge, ghost))
    assert outcome.result == "source_missing"
    assert outcome.detail == "the pushed commit 123456789012 is no longer in the repository"


def test_events_that_are_not_confirmed_are_left_alone(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ON_MAIN})
    event_id = _event(forge, sha)
    event = forge.session.get(PushEvent, event_id)
    assert event is not None
    event.state = "committed"
    forge.session.commit()
    outcome = _process(forge, event_id)
    assert outcome.result is None and outcome.detail == "the event is committed, not confirmed"
    assert _process(forge, 999).detail == "no such push event"
    assert _runs(forge) == 0


def test_the_worker_job_asks_rq_to_retry_a_busy_repository_in_30_seconds(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rq import Retry

    import worker.jobs

    _enable(forge)
    event_id = _event(forge, forge.commit({WF + "a.yml": ON_MAIN}))
    monkeypatch.setenv("FORGE_CI_DATA_DIR", str(forge.settings.data_dir))
    monkeypatch.setenv("FORGE_CI_DATABASE_URL", forge.settings.database_url)
    monkeypatch.setattr(worker.jobs, "_process_database", None)
    monkeypatch.setattr(events, "EVENT_LOCK_TIMEOUT", 0.1)
    try:
        with repository_lock(forge.settings.locks_dir, forge.repo.id, "alice/demo", 1):
            retry = worker.jobs.process_push_event(event_id)
        assert isinstance(retry, Retry)
        assert (retry.max, retry.intervals) == (10, [30])
        assert _state(forge, event_id) == "confirmed"
        outcome = worker.jobs.process_push_event(event_id)
        assert isinstance(outcome, events.EventOutcome) and outcome.runs == (1,)
    finally:
        state = worker.jobs._process_database
        if state is not None:
            state[1].dispose()
