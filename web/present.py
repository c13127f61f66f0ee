"""Small presentation helpers shared by templates, JSON endpoints and the graph: states, times.

A thing's *status* is what people see: its conclusion once completed, else its state
(``queued``, ``waiting``, ``running``). CSS colours statuses through ``status-<status>``
classes; the graph and the JavaScript use the same names.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from flask import Flask

from forge_ci import states
from forge_ci.models import utcnow

#: Statuses that mean "finished well / badly / not at all", for colours and icons.
GOOD = frozenset({states.SUCCESS})
BAD = frozenset({states.FAILURE, states.TIMED_OUT, states.LOST})
NEUTRAL = frozenset({states.CANCELLED, states.SKIPPED})
SYMBOLS = {
    states.SUCCESS: "✓",
    states.FAILURE: "✗",
    states.TIMED_OUT: "⏱",
    states.LOST: "?",
    states.CANCELLED: "⊘",
    states.SKIPPED: "↷",
    states.RUNNING: "●",
    states.QUEUED: "○",
    states.WAITING: "◌",
    states.PENDING: "○",
    states.LEASED: "○",
}


def status(state: str, conclusion: str | None) -> str:
    return conclusion if state == states.COMPLETED and conclusion else state


def label(value: str) -> str:
    """``timed_out`` -> ``timed out``."""
    return value.replace("_", " ")


def symbol(value: str) -> str:
    return SYMBOLS.get(value, "•")


def format_duration(delta: timedelta | None) -> str:
    if delta is None:
        return ""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def duration(
    started: datetime | None, completed: datetime | None, now: datetime | None = None
) -> str:
    """How long something ran (so far, while it runs); empty before it started."""
    if started is None:
        return ""
    return format_duration((completed or now or utcnow()) - started)


def timestamp(moment: datetime | None) -> str:
    """UTC, to the second: unambiguous and the same for every reader."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else ""


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    if moment is None:
        return "never"
    delta = (now or utcnow()) - moment
    return "just now" if delta.total_seconds() < 5 else f"{format_duration(delta)} ago"


def branch(ref: str) -> str:
    """A ref as people name it: ``main`` for a branch, ``tag v1.0`` for a tag."""
    if ref.startswith("refs/tags/"):
        return "tag " + ref.removeprefix("refs/tags/")
    return ref.removeprefix("refs/heads/")


def short_sha(sha: str) -> str:
    return sha[:12]


def init_app(app: Flask) -> None:
    app.jinja_env.filters.update(
        label=label,
        symbol=symbol,
        timestamp=timestamp,
        ago=ago,
        branch=branch,
        short_sha=short_sha,
    )
    app.jinja_env.globals.update(status=status, duration=duration)
