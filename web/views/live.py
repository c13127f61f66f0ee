"""Browser polling endpoints of a run page (session cookie, repository read access).

``GET .../pipelines/<number>/updates[?since=<base>]``: the run, its jobs, their latest attempts
and steps, and why queued jobs wait, with an ``ETag`` (:mod:`forge_ci.runs.changes`): a poll
sending it back in ``If-None-Match`` gets ``304 Not Modified`` and no body while nothing shown
changed, for the cost of one small statement instead of loading the whole run: it rechecks the
reader's session, user and membership, and reads the run's counters and the providers, on a
plain connection (:mod:`forge_ci.coordinator.watch`). The same statement answers a changed
poll whose run this process presented for that token moments ago (:class:`web.deltas.Answers`);
every other answer goes through the request's session and the ordinary use cases, and the run
is presented once per token. A changed answer names its ``base``; a poll
sending that back as ``since`` gets only the jobs whose shown content differs from that
answer's (``"full": false``; :mod:`web.deltas`), or the whole run (``"full": true``) when the
server no longer knows that base.
``GET .../pipelines/<number>/attempts/<attempt>/logs?after=<cursor>``: one page of at most 100
log records after a cursor (:func:`forge_ci.coordinator.logs.read_log_page`).
``.../log.txt`` is the whole log as plain text, for people without JavaScript and for tools.

IDs, cursors and numbers are decimal strings. Every answer has ``Cache-Control: no-store``; an
unreadable repository is a JSON 404 like a missing run. Runner credentials do not work here
(only the session cookie identifies the reader).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, jsonify, request, stream_with_context

from forge_ci.authz import Role
from forge_ci.coordinator.blockers import queue_blockers_of
from forge_ci.coordinator.logs import find_attempt_in, read_log_page, read_log_page_in
from forge_ci.coordinator.watch import RunTag, RunWatch, run_tag_in, watch_run
from forge_ci.errors import InvalidInput
from forge_ci.models import utcnow
from forge_ci.repos import RepositoryAccess
from forge_ci.runs.details import JobDetail, StepDetail, run_details_in
from web.access import request_repository
from web.auth import current_actor, session_holder, session_token
from web.deltas import Answer, job_digests
from web.errors import json_view
from web.present import duration, status, timestamp
from web.storage import db, reading, state
from web.views.runs import controls, job_note, log_note, run_note, waiting_for

blueprint = Blueprint("live", __name__)

RUN = "/<owner:owner>/<repo:name>/pipelines/<int:number>"
MAX_CURSOR = 2**63 - 1


def _no_store(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-store"
    return response


def _step(step: StepDetail) -> dict[str, Any]:
    return {
        "id": step.step_id,
        "name": step.name,
        "state": step.state,
        "conclusion": step.conclusion or "",
        "status": status(step.state, step.conclusion),
        "started_at": timestamp(step.started_at),
        "completed_at": timestamp(step.completed_at),
        "duration": duration(step.started_at, step.completed_at),
    }


def _job(job: JobDetail, note: str) -> dict[str, Any]:
    attempt = job.latest_attempt
    return {
        "id": str(job.id),
        "key": job.key,
        "name": job.name,
        "state": job.state,
        "conclusion": job.conclusion or "",
        "status": status(job.state, job.conclusion),
        "reason": job.status_reason or "",
        "note": note,
        "log_note": log_note(job, note),
        "cancel_requested": job.cancel_requested,
        "queued_at": timestamp(job.queued_at),
        "started_at": timestamp(job.started_at),
        "completed_at": timestamp(job.completed_at),
        "duration": duration(job.started_at, job.completed_at),
        "attempt": None
        if attempt is None
        else {
            "id": str(attempt.id),
            "number": str(attempt.number),
            "state": attempt.state,
            "conclusion": attempt.conclusion or "",
        },
        "steps": [_step(step) for step in job.steps],
    }


@blueprint.route(RUN + "/updates")
@json_view
def updates(owner: str, name: str, number: int) -> Response:
    full_name = f"{owner}/{name}"
    token = session_token()
    sent = request.if_none_match
    if token is not None:
        # The usual poll: nothing changed since the reader's last answer, or the run was just
        # presented for another viewer with the same token. One statement on a plain
        # connection decides that, the reader's rights included; anything else (a change not
        # presented yet, refused, not signed in) is answered below, the ordinary way.
        with reading() as connection:
            watch = watch_run(connection, token, full_name, number, utcnow())
        tag = _tag(watch)
        if tag is not None and sent.contains(tag):
            return _not_modified(tag)
        if tag is not None and watch is not None and watch.run is not None:
            run_id = watch.run.counters.id
            kept = state().answers.get(run_id, tag)
            if kept is not None:
                return _answer(run_id, kept, tag, _since(request.args.get("since")))
    access = request_repository(owner, name)
    # The token's columns again, in this request's transaction and before the run itself: the
    # answer is never older than the tag it is sent with.
    now = utcnow()
    run_tag = run_tag_in(db(), access, number, now)
    counters = run_tag.counters
    tag = run_tag.tag(access.role)
    if sent.contains(tag):
        db().rollback()
        return _not_modified(tag)
    since = _since(request.args.get("since"))
    # Every viewer's next poll after a change is a changed one: the run is presented once per
    # change token in this process, not once per viewer (web.deltas.Answers).
    answer = state().answers.get(counters.id, tag)
    if answer is None:
        answer = _present(access, run_tag, number, now)
        state().answers.put(counters.id, tag, answer)
    db().rollback()
    return _answer(counters.id, answer, tag, since)


def _answer(run_id: int, answer: Answer, tag: str, since: str) -> Response:
    """``answer`` as the reader needs it: the jobs changed since their base ``since``."""
    delta = state().bases.changed_jobs(run_id, answer.jobs, since, answer.digests)
    body = {
        "full": delta.full,
        "base": delta.base,
        "run": answer.run,
        "jobs": delta.jobs,
        "controls": answer.controls,
        "server_time": timestamp(utcnow()),
    }
    response = jsonify(body)
    response.set_etag(tag)
    return _no_store(response)


def _present(access: RepositoryAccess, run_tag: RunTag, number: int, now: datetime) -> Answer:
    """The run as its page shows it, with why queued jobs wait (the tag's run, explained from
    the providers as the tag saw them)."""
    counters = run_tag.counters
    providers = run_tag.provider_states() if counters.has_queued else ()
    blockers = (
        queue_blockers_of(db(), access, counters, counters.id, providers, now)
        if counters.has_queued
        else {}
    )
    details = run_details_in(db(), access, number)
    waiting = waiting_for(details)
    run = details.run
    jobs = [_job(job, job_note(job, blockers.get(job.id), waiting)) for job in details.jobs]
    shown = {
        "number": str(run.number),
        "state": run.state,
        "conclusion": run.conclusion or "",
        "status": status(run.state, run.conclusion),
        "terminal": details.is_terminal,
        "note": run_note(details),
        "waiting_for_concurrency": run.waiting_for_concurrency,
        "started_at": timestamp(run.started_at),
        "completed_at": timestamp(run.completed_at),
        "duration": duration(run.started_at, run.completed_at),
    }
    buttons = controls(access.role >= Role.ADMIN, details)
    return Answer(shown, jobs, buttons, job_digests(jobs))


def _tag(watch: RunWatch | None) -> str | None:
    """The change token of the run for the request's reader (None: not a reader, or no run)."""
    if watch is None:
        return None
    return watch.tag(watch.role_of(session_holder(watch.user)))


def _not_modified(tag: str) -> Response:
    unchanged = Response(status=304)
    unchanged.set_etag(tag)
    return _no_store(unchanged)


def _since(value: str | None) -> str:
    """The base of an earlier answer (:mod:`web.deltas`), or empty for the whole run."""
    if not value:
        return ""
    if len(value) != 16 or value.strip("0123456789abcdef"):
        raise InvalidInput(
            f"since must be the base of an earlier answer (16 hexadecimal digits), "
            f"not {value[:40]!r}"
        )
    return value


def _cursor(value: str | None) -> int:
    """A canonical non-negative decimal (no sign, spaces or leading zeros), as the spec says."""
    if value is None or value == "":
        return 0
    if not value.isascii() or not value.isdigit() or (len(value) > 1 and value[0] == "0"):
        raise InvalidInput(f"after must be a decimal cursor such as 0 or 42, not {value[:40]!r}")
    # Length first: int() of 4,301 digits or more raises Python's own ValueError.
    if len(value) > len(str(MAX_CURSOR)) or int(value) > MAX_CURSOR:
        raise InvalidInput("after is out of range")
    return int(value)


@blueprint.route(RUN + "/attempts/<int:attempt_id>/logs")
@json_view
def logs(owner: str, name: str, number: int, attempt_id: int) -> Response:
    after = _cursor(request.args.get("after"))
    page = read_log_page_in(db(), request_repository(owner, name), number, attempt_id, after)
    db().rollback()
    return _no_store(jsonify(page.as_dict()))


@blueprint.route(RUN + "/attempts/<int:attempt_id>/log.txt")
def log_text(owner: str, name: str, number: int, attempt_id: int) -> Response:
    actor = current_actor()
    full_name = f"{owner}/{name}"
    # Authorize and find the attempt before the response starts; the pages follow in their own
    # sessions so that a long log does not hold one transaction open (each page rechecks).
    find_attempt_in(db(), request_repository(owner, name), number, attempt_id)
    db().rollback()
    database = state().database

    def chunks() -> Iterator[str]:
        cursor = 0
        while True:
            with database.session(read_only=True) as session:
                page = read_log_page(session, actor, full_name, number, attempt_id, cursor)
            for record in page.records:
                yield record.text
            cursor = page.next_cursor
            if not page.has_more:
                return

    response = Response(stream_with_context(chunks()), mimetype="text/plain")
    response.headers["Content-Disposition"] = (
        f'inline; filename="{owner}-{name}-run-{number}-attempt-{attempt_id}.log"'
    )
    return _no_store(response)
