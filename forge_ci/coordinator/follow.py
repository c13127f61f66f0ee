"""Printing a run's logs as whole, prefixed lines, once or until the run ends.

Shared by ``forge-ci run logs`` and ``ssh git@HOST run logs|watch``. Every line is printed as
``<job key> | <text>``. The prefix also defuses workflow commands: a build that prints
``::add-mask::...`` or ``::error::...`` cannot steer a CI system (GitHub Actions reads
commands only at the start of a line, after leading spaces) that runs the command and reads its
output. CR, LF and CR LF all end lines, so a bare carriage return cannot start a new command
line either, and the other control characters (ESC, BEL, ...) are shown in caret notation
(``^[``), so a build cannot send escape sequences to the terminal of whoever follows it.

Following polls until the run has completed and every attempt's log is complete. The front door
supplies ``echo`` and ``wait``; either may raise to stop early (an SSH client that went away), and
nothing is left running: the loop holds no session between polls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from forge_ci import states
from forge_ci.authz import Actor
from forge_ci.db import SessionScope
from forge_ci.errors import NotFound

_LINE_END = re.compile(r"\r\n|\r|\n")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def defused(text: str) -> str:
    """``text`` with every control character but TAB in caret notation (ESC -> ``^[``)."""
    return _CONTROL.sub(lambda m: "^" + chr(ord(m.group()) ^ 0x40), text)


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
            self.echo(f"{prefix}{defused(line)}")
        if parts[-1]:
            self.partial[key] = (prefix, parts[-1])

    def flush(self, attempt_id: int | None = None) -> None:
        for key in sorted(self.partial):
            if attempt_id is None or key[0] == attempt_id:
                prefix, line = self.partial.pop(key)
                self.echo(f"{prefix}{defused(line)}")


@dataclass(frozen=True)
class Outcome:
    """How a printed run stands: its conclusion once completed, else its state."""

    state: str
    conclusion: str

    @property
    def succeeded(self) -> bool:
        return self.state == states.COMPLETED and self.conclusion == states.SUCCESS

    @property
    def word(self) -> str:
        """``success``, ``failure``, ``cancelled``, ... or the state of a run not yet done."""
        return (self.conclusion or "unknown") if self.state == states.COMPLETED else self.state


def follow_logs(
    session_scope: SessionScope,
    actor: Actor,
    full_name: str,
    number: int,
    *,
    follow: bool,
    echo: Callable[[str], None],
    job: str | None = None,
    interval: float = 1.0,
    wait: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Print run ``number``'s logs (of job ``job`` only, if given); with ``follow`` until it ends.

    Readers of the repository may; anyone else gets the repository's NotFound.
    """
    from forge_ci.coordinator.logs import read_log_page, run_attempts
    from forge_ci.runs.queries import show_run

    if job is not None:
        with session_scope(read_only=True) as session:
            keys = [j.key for j in show_run(session, actor, full_name, number).jobs]
        if job not in keys:
            raise NotFound(f"run #{number} of {full_name} has no job {job!r}")
    printer = LogPrinter(echo)
    cursors: dict[int, int] = {}
    complete: set[int] = set()
    while True:
        with session_scope(read_only=True) as session:
            view = run_attempts(session, actor, full_name, number)
            attempts = [a for a in view.attempts if job is None or a.job_key == job]
            for attempt in attempts:
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
            a.attempt_id in complete for a in attempts
        )
        if not follow or finished:
            printer.flush()
            return Outcome(view.run_state, view.run_conclusion)
        wait(interval)


def verdict_line(full_name: str, number: int, outcome: Outcome) -> str:
    """The last line of a follow, for stderr: what the exit status (0 or 1) stands for."""
    if outcome.succeeded:
        return f"run #{number} of {full_name} succeeded"
    return f"run #{number} of {full_name} did not succeed: {outcome.word}"


class NoRunToWatch(Exception):
    """The caller's latest push started no run; ``reason`` says why (a front door prints it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: How long ``run watch`` waits for the worker to decide the caller's push.
PUSH_PATIENCE = 300.0


def watch_target(
    session_scope: SessionScope,
    actor: Actor,
    full_name: str,
    public_url: str,
    *,
    note: Callable[[str], None],
    interval: float = 1.0,
    wait: Callable[[float], None] = time.sleep,
    patience: float = PUSH_PATIENCE,
) -> int:
    """The number of the run to follow (:mod:`forge_ci.runs.watching`), waiting for a push.

    ``note`` gets one line when the caller's push is still being decided. NoRunToWatch when
    that push started none; Unavailable when the worker has not decided it within
    ``patience`` seconds.
    """
    from forge_ci.errors import Unavailable
    from forge_ci.runs.watching import choose_run_to_watch

    deadline = time.monotonic() + patience
    noted = False
    while True:
        with session_scope(read_only=True) as session:
            choice = choose_run_to_watch(session, actor, full_name, public_url)
        if choice.number is not None:
            return choice.number
        if choice.no_run is not None:
            raise NoRunToWatch(choice.no_run)
        if time.monotonic() > deadline:
            raise Unavailable(
                f"the push to {choice.pending} has not been processed in {patience:.0f} s; "
                "is a worker running?"
            )
        if not noted:
            note(f"waiting for the push to {choice.pending} to be processed")
            noted = True
        wait(interval)
