"""``run list|show|dispatch|cancel|rerun``: the use cases ``forge-ci run ...`` calls, as the
key's user (``run logs`` and ``run watch`` follow in :mod:`ssh.console.following`)."""

from __future__ import annotations

from typing import Any

from forge_ci import states
from forge_ci.coordinator.run_report import LIST_COLUMNS, list_rows, report_lines, run_report
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.dispatch import dispatch_run, input_values
from forge_ci.runs.queries import list_runs, show_run
from forge_ci.runs.rerun import rerun_run
from ssh.console.session import Call


def run_list(call: Call) -> int:
    args = call.args
    with call.session(read_only=True) as (session, actor):
        views = list_runs(
            session, actor, args.full_name, args.limit, branch=args.branch, workflow=args.workflow
        )
        rows = [view.as_dict(with_jobs=False) for view in views]
    return call.print(rows, lambda: call.term.table(list_rows(rows), LIST_COLUMNS))


def run_show(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        data = run_report(session, actor, call.args.full_name, call.args.number)
    return call.print(data, lambda: call.term.lines(report_lines(data)))


def _summary(call: Call, full_name: str, number: int) -> dict[str, Any]:
    """The run as ``run list --json`` shows it, read after the change committed."""
    with call.session(read_only=True) as (session, actor):
        return show_run(session, actor, full_name, number).as_dict(with_jobs=False)


def run_dispatch(call: Call) -> int:
    args = call.args
    inputs = input_values(args.input)
    with call.session() as (session, actor):
        created = dispatch_run(
            session, call.ctx.settings, actor, args.full_name, args.branch, args.workflow, inputs
        )
        number, sha, state = created.number, created.sha, created.state
    text = f"created run #{number} of {args.full_name} ({args.workflow} at {sha[:12]}): {state}"
    return call.print(_summary(call, args.full_name, number), lambda: call.term.out(text))


def run_cancel(call: Call) -> int:
    args = call.args
    with call.session() as (session, actor):
        cancelled = cancel_run(session, actor, args.full_name, args.number)
        done = cancelled.state == states.COMPLETED
    if done:
        text = f"run #{args.number} of {args.full_name} cancelled"
    else:
        text = (
            f"run #{args.number} of {args.full_name}: cancellation requested; running jobs are "
            "being stopped"
        )
    return call.print(_summary(call, args.full_name, args.number), lambda: call.term.out(text))


def run_rerun(call: Call) -> int:
    args = call.args
    with call.session() as (session, actor):
        created = rerun_run(
            session, call.ctx.settings, actor, args.full_name, args.number, failed_only=args.failed
        )
        number = created.number
    text = f"created run #{number} of {args.full_name} (rerun of #{args.number})"
    return call.print(_summary(call, args.full_name, number), lambda: call.term.out(text))
