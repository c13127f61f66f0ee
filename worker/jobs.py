"""RQ jobs, enqueued by dotted name (``forge_ci.queueing``) after the database commit.

Each job takes ids, opens its own session on an engine created in *this* process (RQ forks a
work horse per job; an engine inherited across a fork would share the parent's connections), and
is idempotent: RQ, the scan and a retry may all run it for the same event.
"""

from __future__ import annotations

import logging
import os

from forge_ci.db import Database, unavailable_on_failure
from forge_ci.pushes.events import mark_received
from forge_ci.settings import load_settings

log = logging.getLogger(__name__)

_process_database: tuple[int, Database] | None = None


def process_database() -> Database:
    """This process's database, created on first use after any fork."""
    global _process_database
    if _process_database is None or _process_database[0] != os.getpid():
        _process_database = (os.getpid(), Database(load_settings()))
    return _process_database[1]


def process_push_event(event_id: int) -> bool:
    """Take a confirmed push event off the queue.

    For now this only marks the event ``received``: turning events into workflow runs belongs
    to the runs issue, which fills in this job. Returns True when this call moved the event;
    a repeated or late run (already received, or not confirmed) changes nothing.
    """
    with unavailable_on_failure(), process_database().session() as session:
        moved = mark_received(session, event_id)
        session.commit()
    log.info("push event %s %s", event_id, "received" if moved else "needed nothing")
    return moved
