"""RQ jobs, enqueued by dotted name (``forge_ci.queueing``) after the database commit.

Each job takes ids, opens its own session on an engine created in *this* process (RQ forks a
work horse per job; an engine inherited across a fork would share the parent's connections), and
is idempotent: a delivery of an event that another work horse holds, or that was processed
already, returns at once (the event's claim, ``forge_ci.pushes.events``).
"""

from __future__ import annotations

import logging
import os

from rq import Retry
from sqlalchemy.orm import configure_mappers

from forge_ci.coordinator.wakeups import install_publisher
from forge_ci.db import Database, unavailable_on_failure
from forge_ci.errors import RepositoryBusy, Unavailable
from forge_ci.runs.events import EventOutcome
from forge_ci.runs.events import process_push_event as process_event
from forge_ci.settings import Settings, load_settings

log = logging.getLogger(__name__)

#: Temporary trouble (a busy repository, an unreachable database) is retried this much later,
#: by RQ's scheduler, so the worker moves on to other repositories' events meanwhile. Once the
#: retries are spent the job fails; the event stays confirmed and the worker's scan enqueues
#: it again.
RETRY_SECONDS = 30
RETRY_TIMES = 10

#: (pid, database, settings) of this process, made on first use after any fork.
_process_database: tuple[int, Database, Settings] | None = None


def preload() -> None:
    """Import and configure, in the worker's parent process, what every job needs.

    RQ forks a work horse per job; what the parent has loaded the horse gets for free. Without
    this, every push paid for importing the workflow engine and configuring the ORM mappers
    (about half a second on a small machine) before its run was created. No engine or
    connection is made here: those stay per process.
    """
    import forge_ci.workflow as workflow

    for name in workflow.__all__:
        getattr(workflow, name)
    configure_mappers()


def process_database() -> tuple[Database, Settings]:
    """This process's database and settings, created on first use after any fork."""
    global _process_database
    if _process_database is None or _process_database[0] != os.getpid():
        settings = load_settings()
        # Runs this process creates queue jobs: waiting claims hear of them at once.
        install_publisher(settings.redis_url)
        _process_database = (os.getpid(), Database(settings), settings)
    return _process_database[1], _process_database[2]


def process_push_event(event_id: int) -> EventOutcome | Retry:
    """Turn a confirmed push event into runs (``forge_ci.runs.events``), or retry later.

    Returns the outcome, or an RQ ``Retry`` in 30 s when the repository is busy or the database
    is unavailable. A repeated or late run of the same event does nothing and says so.
    """
    database, settings = process_database()
    try:
        # Read-only: its writes are serialized transactions of their own (begin_write).
        with unavailable_on_failure(), database.session(read_only=True) as session:
            outcome = process_event(session, settings, event_id)
    except (RepositoryBusy, Unavailable) as exc:
        log.warning("push event %s: %s; retrying in %s s", event_id, exc, RETRY_SECONDS)
        return Retry(max=RETRY_TIMES, interval=RETRY_SECONDS)
    if outcome.repeated:
        log.info("push event %s: already processed (%s)", event_id, outcome.result)
    else:
        log.info("push event %s: %s (%s)", event_id, outcome.result, outcome.detail)
    return outcome
