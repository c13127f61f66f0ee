"""``run logs [--follow]`` and ``run watch``: a run's log on the client's terminal.

Lines come from :func:`forge_ci.coordinator.follow.follow_logs` (prefixed ``job | ``, which
defuses ``::error::`` and the like, control characters in caret notation). A follow streams
until the run has ended, then exits 0 only on success and 1 on any other ending, naming it on
stderr; it stops as soon as the client goes away (:class:`ssh.console.terminal.ClientGone`).
"""

from __future__ import annotations

from forge_ci.authz import Actor
from forge_ci.coordinator.follow import NoRunToWatch, follow_logs, verdict_line, watch_target
from ssh.console.session import EXIT_OK, EXIT_UNSUCCESSFUL, Call

#: Seconds between polls of a followed run.
POLL_INTERVAL = 0.5


def _actor(call: Call) -> Actor:
    with call.session(read_only=True) as (_, actor):
        return actor


def _follow(call: Call, actor: Actor, number: int, follow: bool, job: str | None) -> int:
    full_name = call.args.full_name
    if follow:
        call.term.follow()
    outcome = follow_logs(
        call.ctx.database.session,
        actor,
        full_name,
        number,
        follow=follow,
        echo=call.term.out,
        job=job,
        interval=POLL_INTERVAL,
        wait=call.term.wait,
    )
    if not follow:
        return EXIT_OK
    call.term.err(verdict_line(full_name, number, outcome))
    return EXIT_OK if outcome.succeeded else EXIT_UNSUCCESSFUL


def run_logs(call: Call) -> int:
    args = call.args
    return _follow(call, _actor(call), args.number, args.follow, args.job)


def run_watch(call: Call) -> int:
    actor = _actor(call)
    call.term.follow()
    try:
        number = watch_target(
            call.ctx.database.session,
            actor,
            call.args.full_name,
            call.ctx.settings.public_url,
            note=call.term.err,
            interval=POLL_INTERVAL,
            wait=call.term.wait,
        )
    except NoRunToWatch as exc:
        call.term.err(exc.reason)
        return EXIT_UNSUCCESSFUL
    call.term.err(f"following run #{number} of {call.args.full_name}")
    return _follow(call, actor, number, True, None)
