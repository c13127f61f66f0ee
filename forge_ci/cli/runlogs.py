"""``forge-ci run logs OWNER/NAME NUMBER [--follow]``: print a run's logs, optionally until it ends.

Every line is printed as ``<job key> | <text>``. The prefix also defuses workflow commands: a
build that prints ``::add-mask::...`` or ``::error::...`` cannot steer a CI system (GitHub
Actions reads commands only at the start of a line, after leading spaces) that runs this
command and reads its output. CR, LF and CR LF all end lines, so a bare carriage return cannot
start a new command line either.

With ``--follow`` the command keeps polling until the run has completed and every attempt's log
is complete, then exits 0 only when the run succeeded; any other ending (failure, cancelled,
lost, timed out, skipped, anything unknown) exits 1 and says which.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import click

from forge_ci import states
from forge_ci.authz import Actor
from forge_ci.cli.common import open_database
from forge_ci.db import SessionScope

EXIT_UNSUCCESSFUL = 1
_LINE_END = re.compile(r"\r\n|\r|\n")


class LogPrinter:
    """Turns log records of many attempts into prefixed, whole lines."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.partial: dict[tuple[int, str, str], tuple[str, str]] = {}

    def add(self, prefix: str, attempt_id: int, step_id: str, stream: str, text: str) -> None:
        key = (attempt_id, step_id, stream)
        _, pending = self.partial.pop(key, (prefix, ""))
        parts = _LINE_END.split(pending + text)
        for line in parts[:-1]:
            self.echo(f"{prefix}{line}")
        if parts[-1]:
            self.partial[key] = (prefix, parts[-1])

    def flush(self, attempt_id: int | None = None) -> None:
        for key in sorted(self.partial):
            if attempt_id is None or key[0] == attempt_id:
                prefix, line = self.partial.pop(key)
                self.echo(f"{prefix}{line}")


def follow_logs(
    database_session: SessionScope,
    actor: Actor,
    full_name: str,
    number: int,
    follow: bool,
    interval: float,
    echo: Callable[[str], None],
) -> str:
    """Print the run's logs; with ``follow`` until the end. Returns the run's conclusion."""
    from forge_ci.coordinator.logs import read_log_page, run_attempts

    printer = LogPrinter(echo)
    cursors: dict[int, int] = {}
    complete: set[int] = set()
    while True:
        with database_session(read_only=True) as session:
            view = run_attempts(session, actor, full_name, number)
            keys: dict[str, int] = {}
            for attempt in view.attempts:
                keys[attempt.job_key] = keys.get(attempt.job_key, 0) + 1
                if attempt.attempt_id in complete:
                    continue
                label = attempt.job_key + (f" #{attempt.number}" if attempt.number > 1 else "")
                prefix = f"{label} | "
                while True:
                    page = read_log_page(
                        session,
                        actor,
                        full_name,
                        number,
                        attempt.attempt_id,
                        cursors.get(attempt.attempt_id, 0),
                    )
                    for record in page.records:
                        printer.add(
                            prefix, attempt.attempt_id, record.step_id, record.stream, record.text
                        )
                    cursors[attempt.attempt_id] = page.next_cursor
                    if page.complete:
                        printer.flush(attempt.attempt_id)
                        complete.add(attempt.attempt_id)
                        break
                    if not page.has_more:
                        break
            session.rollback()
        finished = view.run_state == states.COMPLETED and all(
            a.attempt_id in complete for a in view.attempts
        )
        if not follow or finished:
            printer.flush()
            return view.run_conclusion if view.run_state == states.COMPLETED else view.run_state
        time.sleep(interval)


@click.command("logs")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
@click.option(
    "--follow", is_flag=True, help="Keep printing until the run ends; exit 0 only on success."
)
@click.option("--interval", type=float, default=1.0, hidden=True)
def logs(full_name: str, number: int, follow: bool, interval: float) -> None:
    """Print the logs of run NUMBER of OWNER/NAME."""
    database = open_database()
    try:
        outcome = follow_logs(
            database.session,
            Actor.operator(),
            full_name,
            number,
            follow,
            interval,
            click.echo,
        )
    finally:
        database.dispose()
    if not follow:
        return
    if outcome == states.SUCCESS:
        click.echo(f"run #{number} of {full_name} succeeded", err=True)
        return
    click.echo(f"run #{number} of {full_name} did not succeed: {outcome or 'unknown'}", err=True)
    raise click.exceptions.Exit(EXIT_UNSUCCESSFUL)
