"""Handing work to RQ workers: jobs by dotted name, only after the database commit.

Redis is never the only copy of anything. An enqueue that fails (Redis down, restarted, flushed)
is logged and reported, never raised into the caller: the event stays ``confirmed`` in the
database and ``forge-ci worker``'s periodic scan enqueues it again. The core imports only
``rq.Queue``, here, never worker internals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
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

#: Job states after which an event's job runs no more; in any other (queued, started, scheduled
#: for a retry...) enqueueing it again would queue the event twice.
_ENDED = frozenset({"finished", "failed", "stopped", "canceled"})
#: Events enqueued per Redis transaction, and how often one is tried again when a job of its
#: chunk changed state meanwhile (the scan enqueues what is left at its next pass).
_CHUNK = 200
_ATTEMPTS = 10
#: The ``status`` field of each job hash in KEYS (false: no such job), in one round trip.
_STATUSES = (
    "local found = {} for i, key in ipairs(KEYS) do "
    "found[i] = redis.call('HGET', key, 'status') end return found"
)
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

    def enqueue_push_events(
        self, event_ids: Iterable[int], ready: Callable[[list[int]], Collection[int]] | None = None
    ) -> bool:
        """Enqueue ``process_push_event`` once for each event that no job waits for or runs.

        False if Redis failed (logged). Atomic against every other enqueuer (the push, the
        scans of every worker process), so two of them never queue one event twice: see
        :func:`_enqueue_chunk`. ``ready`` answers which of some ids still need processing
        (``forge_ci.pushes.events.offered_event_ids``); it is asked last, while the jobs' keys
        are watched, so an event whose job finished meanwhile is not queued again.
        """
        import redis

        ids = list(dict.fromkeys(event_ids))
        try:
            queue = self._rq_queue()
            for start in range(0, len(ids), _CHUNK):
                _enqueue_chunk(queue, ids[start : start + _CHUNK], ready)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not enqueue push events (the worker's scan will): %s", exc)
            return False
        return True

    def close(self) -> None:
        if self._queue is not None:
            self._queue.connection.close()
            self._queue = None


def _enqueue_chunk(
    queue: Any, ids: list[int], ready: Callable[[list[int]], Collection[int]] | None
) -> int:
    """Enqueue the jobs of ``ids`` that are not pending, in one Redis transaction; return how many.

    RQ's enqueue of a job id that is already queued pushes the id a second time (and the event
    is processed twice; issue #14, finding 5). So the jobs' keys are WATCHed, their states read,
    ``ready`` asked, and the jobs enqueued in MULTI/EXEC: if any of those keys changed meanwhile
    (another enqueuer, a worker starting or ending one), EXEC does nothing and the chunk is
    looked at again.
    """
    import redis

    keys = [queue.job_class.key_for(push_event_job_id(event_id)) for event_id in ids]
    with queue.connection.pipeline() as pipe:
        for _ in range(_ATTEMPTS):
            try:
                pipe.watch(*keys)
                statuses = pipe.eval(_STATUSES, len(keys), *keys)
                todo = [
                    event_id
                    for event_id, status in zip(ids, statuses, strict=True)
                    if status is None or status.decode() in _ENDED
                ]
                if todo and ready is not None:
                    still = set(ready(todo))
                    todo = [event_id for event_id in todo if event_id in still]
                if not todo:
                    pipe.reset()
                    return 0
                pipe.multi()
                queue.enqueue_many(
                    [
                        queue.prepare_data(
                            PROCESS_PUSH_EVENT,
                            (event_id,),
                            job_id=push_event_job_id(event_id),
                            description=f"push event {event_id}",
                            timeout=JOB_TIMEOUT_SECONDS,
                        )
                        for event_id in todo
                    ],
                    pipeline=pipe,
                )
                pipe.execute()
                return len(todo)
            except redis.WatchError:
                continue
    log.info("push events %s..%s kept changing; the worker's scan enqueues them", ids[0], ids[-1])
    return 0
