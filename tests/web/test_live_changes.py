"""The run page's poll answers 304 while nothing shown changed, and shows every change next.

Each change below is made the real way (through the coordinator and the core's use cases, as a
runner, an operator or an admin would) between two polls: the poll after it must not be 304 and
must show the change; a poll after that is 304 again. What changes without anything shown
changing (lease renewals, log chunks) keeps the token. The poller sends its last answer's base
like the page does, so a changed poll carries only the jobs that changed: each one is checked
to be exactly the jobs whose shown content moved, and the view it makes (merged over the
earlier answers) to equal a whole fresh answer. The cheapness is counted in SQL statements, not
timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, select

from forge_ci.authz import Actor, Role
from forge_ci.coordinator.blockers import RECENT_CONTACT, provider_states, queue_blockers_of
from forge_ci.coordinator.providers import pause_provider
from forge_ci.coordinator.watch import run_tag_in
from forge_ci.db import Database
from forge_ci.models import Job, Provider, Run, User, utcnow
from forge_ci.protocol import HeartbeatRequest
from forge_ci.repos import grant, repository_access, revoke
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.signins import revoke_user_sessions
from tests.web.people import OPERATOR, REPO
from tests.web.scenario import CI, Pipelines, StandardRun
from web.deltas import ANSWER_SECONDS

RUN = "/olivia/app/pipelines/1"


def _settled(part: dict[str, Any]) -> dict[str, Any]:
    # A running duration is counted on by the page itself: it is not part of what changed.
    return {k: v for k, v in part.items() if k != "duration" or part["completed_at"]}


def _shown(jobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        key: {**_settled(job), "steps": [_settled(step) for step in job["steps"]]}
        for key, job in jobs.items()
    }


class Poller:
    """A reader polling like pipelines.js: the last ETag goes back in If-None-Match, the last
    base as ``since``; :attr:`jobs` is what the page would show (each answer merged in)."""

    def __init__(self, browser: Any, run: str = RUN) -> None:
        self.browser = browser
        self.run = run
        self.etag = ""
        self.base = ""
        self.jobs: dict[str, dict[str, Any]] = {}
        #: The keys of the jobs the last changed answer carried.
        self.sent: set[str] = set()

    def poll(self) -> dict[str, Any] | None:
        headers = {"If-None-Match": self.etag} if self.etag else {}
        since = f"?since={self.base}" if self.base else ""
        response = self.browser.get(f"{self.run}/updates{since}", headers=headers)
        assert response.headers["Cache-Control"] == "no-store"
        if response.status_code == 304:
            assert response.get_data() == b""
            assert response.headers["ETag"] == self.etag
            return None
        assert response.status_code == 200
        self.etag = response.headers["ETag"]
        data: dict[str, Any] = response.json
        assert data["full"] is (not self.base)  # this process knows every base it handed out
        self.base = data["base"]
        self.sent = {job["key"] for job in data["jobs"]}
        self.jobs.update(_jobs(data))
        whole = self.browser.get(f"{self.run}/updates").json  # no base: every job
        assert whole["full"] is True and whole["base"] == self.base
        assert _shown(self.jobs) == _shown(_jobs(whole)), "the merged view is not the run"
        return {**data, "jobs": list(self.jobs.values())}


def _jobs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["key"]: job for job in data["jobs"]}


def _changed(poller: Poller, change: Callable[[], object], *sent: str) -> dict[str, Any]:
    """The next poll after ``change``, which must carry exactly the jobs ``sent``."""
    assert poller.poll() is None, "unchanged before the change"
    change()
    data = poller.poll()
    assert data is not None, "the change was not noticed"
    assert poller.sent == set(sent), poller.sent
    assert poller.poll() is None, "unchanged again after it"
    return data


def test_an_unchanged_run_answers_304_and_any_other_tag_gets_the_body(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    poller = Poller(as_person("rita"))
    first = poller.poll()
    assert first is not None and poller.etag.startswith('"')
    assert poller.poll() is None
    assert poller.poll() is None
    stale = as_person("rita").get(f"{RUN}/updates", headers={"If-None-Match": '"0000"'})
    assert stale.status_code == 200 and stale.json["run"]["status"] == first["run"]["status"]
    # A base this server never handed out (or long forgot) gets the whole run; a malformed one
    # is refused by name.
    unknown = as_person("rita").get(f"{RUN}/updates?since={'0' * 16}")
    assert unknown.json["full"] is True and len(unknown.json["jobs"]) == 4
    bad = as_person("rita").get(f"{RUN}/updates?since=../etc")
    assert bad.status_code == 400 and "since must be the base" in bad.json["error"]["message"]
    # The refusal is unchanged: a non-reader gets 404 whatever tag it sends.
    outsider = as_person("otto").get(f"{RUN}/updates", headers={"If-None-Match": poller.etag})
    assert outsider.status_code == 404


def test_every_shown_change_is_in_the_next_poll(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    poller.poll()
    lint = standard.lint
    step = lint.assignment.steps[0].id

    # Quiet changes: a lease renewal and a log chunk change nothing the poll shows.
    lint.coordinator.heartbeat(lint.token, lint.attempt_id, HeartbeatRequest(lint.execution_id))
    lint.log("more output\n", step)
    assert poller.poll() is None

    data = _changed(poller, lambda: lint.step(step, "completed", "success", 0), "lint")
    assert _jobs(data)["lint"]["steps"][0]["status"] == "success"

    data = _changed(poller, lambda: lint.complete("success"), "lint", "deploy")
    assert _jobs(data)["lint"]["status"] == "success"
    assert _jobs(data)["deploy"]["note"] == "Waiting for test."

    # A provider with the gpu label: the queued job's explanation follows the providers.
    data = _changed(poller, lambda: pipelines.add_provider("gpu", "self-hosted,linux,gpu"), "test")
    assert "gpu" not in _jobs(data)["test"]["note"]

    def pause() -> None:
        with database.session() as session:
            pause_provider(session, OPERATOR, "gpu")
            session.commit()

    data = _changed(poller, pause, "test")
    assert _jobs(data)["test"]["note"] == "Every provider with these labels is paused."

    def cancel() -> None:
        with database.session() as session:
            cancel_run(session, OPERATOR, REPO, 1)
            session.commit()

    data = _changed(poller, cancel, "test", "deploy")
    assert _jobs(data)["test"]["status"] == "cancelled"


def test_a_claim_shows_the_new_attempt(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    poller = Poller(as_person("rita"))
    poller.poll()
    standard.lint.complete("success")
    poller.poll()
    pipelines.add_provider("gpu", "self-hosted,linux,gpu")
    poller.poll()
    execution = pipelines.claim()
    assert execution is not None and execution.assignment.job_key == "test"
    data = poller.poll()
    assert data is not None and _jobs(data)["test"]["attempt"]["state"] == "leased"
    data = _changed(poller, execution.start, "test")
    assert _jobs(data)["test"]["attempt"]["state"] == "running"


def test_the_requesters_rights_and_the_providers_contact_follow_without_a_run_change(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    database: Database,
) -> None:
    """What queue blockers are computed from besides the run: the time since a provider's last
    contact, which moves with the clock alone (nothing is written: the poll reads the providers
    as of its own time), and the requester's rights (a run adam started; adam loses his role)."""
    with database.session() as session:
        adam = session.scalar(select(User).where(User.name == "adam"))
        assert adam is not None
        run = dispatch_run(session, pipelines.settings, Actor.for_user(adam), REPO, "main", CI)
        number = run.number
    with database.session() as session:
        access = repository_access(session, OPERATOR, REPO)
        counters = run_tag_in(session, access, number, utcnow()).counters
        contact = session.scalar(select(Provider.last_contact_at).where(Provider.name == "p1"))
        assert contact is not None and counters.has_queued
        now = provider_states(session, access, contact + RECENT_CONTACT)  # a minute: recent
        later = provider_states(session, access, contact + RECENT_CONTACT * 2)
        assert [(p.recent, p.busy) for p in now] == [(True, True)]  # p1 runs lint of run 1
        assert [(p.recent, p.busy) for p in later] == [(False, True)]
        waits = queue_blockers_of(session, access, counters, counters.id, now, utcnow())
        silent = queue_blockers_of(session, access, counters, counters.id, later, utcnow())
        assert {b.code for b in waits.values()} == {"providers_busy"}
        assert {b.code for b in silent.values()} == {"no_recent_contact"}

    poller = Poller(as_person("rita"), f"/olivia/app/pipelines/{number}")
    data = poller.poll()
    assert data is not None and _jobs(data)["build"]["note"].startswith("Every provider")

    def demote() -> None:
        with database.session() as session:
            revoke(session, OPERATOR, REPO, "adam")
            session.commit()

    data = _changed(poller, demote, "build", "lint")
    assert _jobs(data)["build"]["note"].startswith("Not authorized: adam, who started the run")


def test_the_token_is_per_role_so_buttons_follow_a_role_change(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    data = poller.poll()
    assert data is not None and data["controls"]["cancel"] is False

    def promote() -> None:
        with database.session() as session:
            grant(session, OPERATOR, REPO, "rita", Role.ADMIN)
            session.commit()

    data = _changed(poller, promote)
    assert data["controls"]["cancel"] is True


def test_revisions_count_concurrent_changes_without_losing_one(
    standard: StandardRun, database: Database
) -> None:
    """Two sessions change the same job: ``revision = revision + 1`` in SQL counts both."""
    job_id = standard.jobs["deploy"]
    with database.session() as session:
        before = session.scalar(select(Job.revision).where(Job.id == job_id))
    assert before is not None
    with database.session() as first:
        job = first.get(Job, job_id)
        assert job is not None
        job.status_reason = "first"
        first.commit()
    with database.session() as second:
        job = second.get(Job, job_id)
        assert job is not None
        job.status_reason = "second"
        second.commit()
        job.status_reason = "second"  # no net change: no bump
        second.commit()
    with database.session() as session:
        assert session.scalar(select(Job.revision).where(Job.id == job_id)) == before + 2


@contextmanager
def _statements(database: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    for engine in database.engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for engine in database.engines:
            event.remove(engine, "before_cursor_execute", record)


def test_an_unchanged_poll_reads_a_few_rows_however_large_the_run(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    poller = Poller(as_person("rita"))
    with _statements(database) as full:
        poller.poll()
    with _statements(database) as unchanged:
        assert poller.poll() is None
    assert len(unchanged) < len(full)
    # One statement however large the run (forge_ci.coordinator.watch): the live session and
    # its user, the repository and the reader's membership, the counters (with the requester's
    # rights) and the providers the blockers are computed from; none of it loads the run's
    # steps, attempts, edges or queued jobs, nor computes an explanation (SQLite's reading
    # connection also says BEGIN).
    queries = [text for text in unchanged if text != "BEGIN"]
    assert len(queries) == 1, queries
    (statement,) = queries
    for read in ("web_sessions", "memberships", "jobs.revision", "providers.labels"):
        assert read in statement.replace("jobs_1.", "jobs."), read
    loads = [text for text in unchanged if "revision" not in text or "jobs.revision," in text]
    for table in ("attempt_steps", "job_dependencies", "attempts.job_id", "runs_on"):
        assert not any(table in text for text in loads), table
    with database.session() as session:
        run = session.scalar(select(Run).where(Run.number == 1))
        assert run is not None and run.revision >= 1


def test_a_poll_rechecks_the_reader_every_time_whatever_tag_it_sends(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
    people: Any,
) -> None:
    """The session, the user and the membership are read on every poll (as plain rows): a
    reader removed from the repository, or signed out everywhere, is refused at the next poll
    even with a current ETag."""
    rita, sam = Poller(as_person("rita")), Poller(as_person("sam"))
    assert rita.poll() is not None and rita.poll() is None
    assert sam.poll() is not None and sam.poll() is None
    with database.session() as session:
        revoke(session, OPERATOR, REPO, "rita")
        session.commit()
    refused = rita.browser.get(f"{RUN}/updates", headers={"If-None-Match": rita.etag})
    assert refused.status_code == 404
    with database.session() as session:
        revoke_user_sessions(session, OPERATOR, people.ids["sam"])
        session.commit()
    ended = sam.browser.get(f"{RUN}/updates", headers={"If-None-Match": sam.etag})
    assert ended.status_code not in (200, 304)


def test_a_current_tag_gets_nothing_once_the_user_row_says_no(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    """The user row is read with the session on every poll (the unchanged poll's one statement
    included): a deactivated reader, a site administrator who is one no more (sam is no member
    of olivia/app) and a reader whose password changed (the cookie's binding no longer holds)
    are refused at the next poll, although their ETag is current."""
    pollers = {name: Poller(as_person(name)) for name in ("rita", "sam", "will")}
    for poller in pollers.values():
        assert poller.poll() is not None and poller.poll() is None
    with database.session() as session:
        users = {user.name: user for user in session.scalars(select(User))}
        users["rita"].is_active = False
        users["sam"].is_admin = False
        users["will"].password_hash = "changed"
        session.commit()
    for name, poller in pollers.items():
        refused = poller.browser.get(f"{RUN}/updates", headers={"If-None-Match": poller.etag})
        assert refused.status_code == 404, name
    # Everyone else's tag still holds.
    olivia = Poller(as_person("olivia"))
    assert olivia.poll() is not None and olivia.poll() is None


def test_the_prepared_statement_reads_what_sqlalchemy_reads(
    standard: StandardRun, database: Database, people: Any
) -> None:
    """The poll's statement run as driver SQL (:mod:`forge_ci.coordinator.driver_sql`) gives
    the row SQLAlchemy's own execution gives, with every constant and input bound the same
    way."""
    from forge_ci.coordinator.driver_sql import Prepared
    from forge_ci.coordinator.watch import watch_statement
    from forge_ci.signins import session_token_hash

    statement = watch_statement()
    now = utcnow()
    values = {
        "token_hash": session_token_hash("no such session"),
        "now": now,
        "owner": "olivia",
        "name": "app",
        "number": 1,
        "cutoff": now - RECENT_CONTACT,
    }
    with database.reading() as connection:
        prepared = Prepared(statement, connection.dialect)
        ours = connection.exec_driver_sql(prepared.sql, prepared.parameters(values)).first()
        theirs = connection.execute(statement, values).first()
    assert ours is not None and theirs is not None
    assert list(ours) == list(theirs)  # (SQLite's booleans come as 1 and 0: equal)
    assert ours[-1] and ours[-1] == theirs[-1]  # the providers' rows, with the poll's cutoff


def test_a_change_is_presented_once_for_every_viewer_with_the_same_token(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    database: Database,
) -> None:
    """After a change, the first viewer's poll presents the run; the next viewer's (the same
    token: read access, no buttons) gets the same jobs without the run being loaded again, and
    still has its rights rechecked. An owner (buttons: another token) gets their own."""
    rita, will, olivia = (Poller(as_person(name)) for name in ("rita", "will", "olivia"))
    for poller in (rita, will, olivia):
        poller.poll()
    lint = standard.lint
    lint.step(lint.assignment.steps[0].id, "completed", "success", 0)
    first = rita.poll()
    with _statements(database) as seen:
        response = will.browser.get(
            f"{RUN}/updates?since={will.base}", headers={"If-None-Match": will.etag}
        )
    assert response.status_code == 200 and first is not None
    assert response.headers["ETag"] == rita.etag
    assert [job["key"] for job in response.json["jobs"]] == ["lint"]
    assert _shown(_jobs(response.json)) == _shown({"lint": _jobs(first)["lint"]})
    assert any("web_sessions" in text for text in seen)  # the reader, rechecked
    assert any("memberships" in text for text in seen)
    for table in ("job_dependencies", "runs_on", "attempt_steps.position"):
        assert not any(table in text for text in seen), table
    owners = olivia.poll()
    assert owners is not None and owners["controls"]["cancel"] is True
    assert olivia.etag != rita.etag


def test_the_queue_is_explained_from_the_providers_the_token_saw(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
    database: Database,
) -> None:
    """A provider paused while a changed poll is answered, between its token's read and the
    rest: on PostgreSQL a second read of the providers saw the pause under the old token, and
    once the provider was resumed that token was current again (304 with the wrong note, and
    the same answer for other viewers). The answer now explains the queue from the rows the
    token was computed from, which are the providers as provider_states reads them."""
    standard.lint.complete("success")
    pipelines.add_provider("gpu", "self-hosted,linux,gpu")
    with database.session() as session:
        access = repository_access(session, OPERATOR, REPO)
        now = utcnow()
        assert run_tag_in(session, access, 1, now).provider_states() == provider_states(
            session, access, now
        )
    rita = Poller(as_person("rita"))
    before = rita.poll()
    assert before is not None
    note = _jobs(before)["test"]["note"]
    paused: list[str] = []
    aggregates = ("string_agg", "group_concat")  # the token's providers, in its statement
    tokens: list[str] = []

    def pause_after_the_token(conn, cursor, statement, *_: object) -> None:  # type: ignore[no-untyped-def]
        if paused or "web_sessions" in statement:  # the poll's own statement: not yet
            return
        if any(name in statement for name in aggregates):
            tokens.append(statement)  # the changed path's token
        elif tokens:  # the first statement after the token's: pause the provider now
            paused.append(statement)
            with database.session() as session:
                pause_provider(session, OPERATOR, "gpu")
                session.commit()

    time.sleep(ANSWER_SECONDS + 0.1)  # rita's answer is no longer kept: the changed path runs
    for engine in database.engines:
        event.listen(engine, "before_cursor_execute", pause_after_the_token)
    try:
        changed = rita.browser.get(f"{RUN}/updates", headers={"If-None-Match": '"stale"'})
    finally:
        for engine in database.engines:
            event.remove(engine, "before_cursor_execute", pause_after_the_token)
    assert paused and changed.status_code == 200
    assert _jobs(changed.json)["test"]["note"] == note  # what its token stands for
