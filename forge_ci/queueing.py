"""Handing work to RQ workers: jobs by dotted name, only after the database commit.

Redis is never the only copy of anything. An enqueue that fails (Redis down, restarted, flushed)
is logged and reported, never raised into the caller: the event stays ``confirmed`` in the
database and ``forge-ci worker``'s periodic scan enqueues it again. The core imports only
``rq.Queue`` and ``rq.job`` here, never worker internals.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from forge_ci.settings import Settings

log = logging.getLogger(__name__)

PUSH_EVENTS_QUEUE = "forge-ci-push-events"
#: Dotted name of the job (in the worker front door), so the core never imports it.
PROCESS_PUSH_EVENT = "worker.jobs.process_push_event"
#: A push event's job is ended (its work horse killed) after this long, so that one hung job
#: holds up the worker for at most this long (RQ's default is 180 s). Processing an event reads
#: at most 64 workflow files at one commit; it takes well under a second. The event stays
#: confirmed, so the scan enqueues it again (issue #14, finding 9).
JOB_TIMEOUT_SECONDS = 30

#: Job states in which an enqueued job will still run; enqueueing again would only duplicate it.
_PENDING = frozenset({"queued", "started", "deferred", "scheduled"})
# Short timeouts: a push must not hang on a Redis that is down; the scan catches up later.
_CONNECT_TIMEOUT = 2.0
_SOCKET_TIMEOUT = 5.0


def push_event_job_id(event_id: int) -> str:
    return f"push-event-{event_id}"


class JobQueue:
    """The push-event queue on the configured Redis; connects lazily, once per process."""

    def __init__(self, settings: Settings) -> None:
        self.redis_url = settings.redis_url
        self._queue: Any = None

    def _rq_queue(self) -> Any:
        if self._queue is None:
            import redis
            from rq import Queue

            connection = redis.Redis.from_url(
                self.redis_url,
                socket_connect_timeout=_CONNECT_TIMEOUT,
                socket_timeout=_SOCKET_TIMEOUT,
            )
            self._queue = Queue(PUSH_EVENTS_QUEUE, connection=connection)
        return self._queue

    def prepare(self) -> None:
        """Import RQ and build the client ahead of the first enqueue (connects on first use)."""
        self._rq_queue()

    @property
    def connection(self) -> Any:
        """The Redis client (the worker front door serves the same queue with it)."""
        return self._rq_queue().connection

    def enqueue_push_events(self, event_ids: Iterable[int], *, fresh: bool = False) -> bool:
        """Enqueue ``process_push_event`` for each id not already waiting. False if Redis failed.

        ``fresh``: the events were confirmed just now (by the caller, under the repository
        lock), so no job can exist for them yet and the check for one is skipped.
        """
        import redis

        try:
            queue = self._rq_queue()
            if fresh:  # one round trip for the whole push, however many refs it moved
                queue.enqueue_many(
                    [
                        queue.prepare_data(
                            PROCESS_PUSH_EVENT,
                            (event_id,),
                            job_id=push_event_job_id(event_id),
                            description=f"push event {event_id}",
                            timeout=JOB_TIMEOUT_SECONDS,
                        )
                        for event_id in event_ids
                    ]
                )
                return True
            for event_id in event_ids:
                job_id = push_event_job_id(event_id)
                job = None if fresh else queue.fetch_job(job_id)
                if job is not None and job.get_status(refresh=False).value in _PENDING:
                    continue
                queue.enqueue(
                    PROCESS_PUSH_EVENT,
                    event_id,
                    job_id=job_id,
                    description=f"push event {event_id}",
                    job_timeout=JOB_TIMEOUT_SECONDS,
                )
        except (redis.RedisError, OSError) as exc:
            log.warning("could not enqueue push events (the worker's scan will): %s", exc)
            return False
        return True

    def close(self) -> None:
        if self._queue is not None:
            self._queue.connection.close()
            self._queue = None
