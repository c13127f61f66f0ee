"""Ref updates: what git reports when a push moves refs, and forge-ci's own ref namespace.

Shared by the hook wire format (:mod:`forge_ci.hookwire`), git access (:mod:`forge_ci.gitstore`)
and push events (:mod:`forge_ci.pushes`). Standard library only and imports nothing of forge-ci,
so that every one of them can stand on it::

    refs/heads/*, refs/tags/*     pushed by people: each real move is a push event
    refs/forge-ci/                forge-ci's own (INTERNAL_REF_PREFIX): never advertised,
      push-events/<id>            never pushable, never an event
      pipelines/<token>
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Refs forge-ci writes itself; updates to them are never recorded as push events.
INTERNAL_REF_PREFIX = "refs/forge-ci/"


@dataclass(frozen=True)
class Update:
    """One ref update exactly as git reports it to a hook."""

    old: str
    new: str
    ref: str


def is_zero(oid: str) -> bool:
    """True for git's null object id (``0000...``), meaning "no such ref" on either side."""
    return oid.strip("0") == ""


def makes_event(update: Update) -> bool:
    """Whether ``update`` is a real ref move outside forge-ci's own namespace.

    A push's own updates never move ``HEAD`` (pre-receive refuses a push *to* it) and never
    list a ref at its current value; what else git's ref machinery reports moves nothing: ``HEAD``
    when the pushed branch is its target (a reflog-only mirror) and ``0000 -> 0000`` when a ref is
    deleted from packed-refs. Those are not events, and neither are updates of forge-ci's own
    pins.
    """
    return (
        update.old != update.new
        and update.ref != "HEAD"
        and not update.ref.startswith(INTERNAL_REF_PREFIX)
    )


def events_in(updates: Iterable[Update]) -> tuple[Update, ...]:
    """The updates that make push events (:func:`makes_event`), in git's order."""
    return tuple(u for u in updates if makes_event(u))
