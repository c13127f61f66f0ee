"""Waking waiting claims when jobs are queued: Redis pub/sub first, the database as fallback.

Correctness never depends on Redis. A waiting claim re-checks a cheap *queue signature* (count
and newest ``queued_at`` of queued jobs) every :data:`POLL_WITHOUT_REDIS` seconds when no Redis
subscription is live, and every :data:`POLL_WITH_REDIS` seconds as a safety net when one is.
With Redis, a process that queues jobs publishes on :data:`CHANNEL` after its commit and every
waiting claim in every web process wakes at once::

    runs scheduler ── commit ──► after_commit hook ──PUBLISH──► Redis ──► WakeupListener thread
                                                                           │ generation += 1
                                   waiting claims (Condition.wait) ◄───────┘ notify_all

:func:`install_publisher` adds the after-commit hook to SQLAlchemy sessions of this process;
it notices jobs whose state became ``queued`` in the ORM (bulk SQL updates are seen by the
fallback poll only).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any

from sqlalchemy import event, func, inspect, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.models import Job

CHANNEL = "forge-ci:jobs-queued"
POLL_WITHOUT_REDIS = 0.1
POLL_WITH_REDIS = 0.25
_FLAG = "forge_ci_jobs_queued"

log = logging.getLogger(__name__)


def queue_signature(session: Session) -> tuple[int, Any]:
    """Changes whenever a job is queued or leaves the queue (read-only, indexed)."""
    count, newest = session.execute(
        select(func.count(Job.id), func.max(Job.queued_at)).where(Job.state == states.QUEUED)
    ).one()
    return int(count), newest


def _client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)


class Publisher:
    """Publishes wake-ups; a failing Redis is skipped for a few seconds, never an error."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self._client: Any = None
        self._down_until = 0.0
        self._lock = threading.Lock()
        _publishers.add(self)
        _watch_forks()

    def _after_fork_in_child(self) -> None:
        """A fresh lock and client in a forked child (an RQ work horse).

        The worker's parent publishes from its lease-sweeper thread; a fork while that thread
        held the lock (or was inside the Redis client's connection pool) left the child a lock
        nobody would ever release, and the child's first publish hung for good in
        ``futex_do_wait`` (issue #14, finding 9). The child has one thread: resetting is safe.
        """
        self._lock = threading.Lock()
        self._client = None
        self._down_until = 0.0

    def publish(self) -> bool:
        if time.monotonic() < self._down_until:
            return False
        try:
            with self._lock:
                if self._client is None:
                    self._client = _client(self.redis_url)
                client = self._client
            client.publish(CHANNEL, b"1")
            return True
        except Exception as exc:  # noqa: BLE001 - any Redis failure: the poll covers it
            log.debug("wake-up not published: %s", exc)
            self._down_until = time.monotonic() + 5.0
            return False


_installed: dict[str, Publisher] = {}
_publishers: weakref.WeakSet[Publisher] = weakref.WeakSet()
_fork_hook: list[bool] = []


def _reset_publishers_in_child() -> None:
    for publisher in list(_publishers):
        publisher._after_fork_in_child()


def _watch_forks() -> None:
    """Reset publishers in forked children (registered once, with the first publisher)."""
    if not _fork_hook:
        os.register_at_fork(after_in_child=_reset_publishers_in_child)
        _fork_hook.append(True)


def install_publisher(redis_url: str) -> Publisher:
    """Publish a wake-up after every commit that queued a job (idempotent per process)."""
    if redis_url in _installed:
        return _installed[redis_url]
    publisher = Publisher(redis_url)
    _installed[redis_url] = publisher
    # Each publisher has its own flag: with one shared flag, the first publisher installed in
    # the process (another Redis) would take it and this one would never publish.
    flag = (_FLAG, redis_url)

    @event.listens_for(Session, "after_flush")
    def _after_flush(session: Session, _context: Any) -> None:
        for obj in list(session.new) + list(session.dirty):
            if isinstance(obj, Job) and states.QUEUED in inspect(obj).attrs.state.history.added:
                session.info[flag] = True
                return

    @event.listens_for(Session, "after_commit")
    def _after_commit(session: Session) -> None:
        if session.info.pop(flag, False):
            publisher.publish()

    @event.listens_for(Session, "after_rollback")
    def _after_rollback(session: Session) -> None:
        session.info.pop(flag, None)

    return publisher


class WakeupListener:
    """One subscriber thread per process; waiting claims block on its condition."""

    def __init__(self, redis_url: str | None) -> None:
        self.redis_url = redis_url
        self._condition = threading.Condition()
        self._generation = 0
        self._connected = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    @property
    def connected(self) -> bool:
        return self._connected

    def start(self) -> WakeupListener:
        """Start the subscriber thread (once; without a Redis URL there is none)."""
        with self._start_lock:
            if self.redis_url and self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._listen, name="forge-ci-wakeups", daemon=True
                )
                self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def generation(self) -> int:
        with self._condition:
            return self._generation

    def notify(self) -> None:
        """Wake every waiting claim of this process (also used by tests and the API itself)."""
        with self._condition:
            self._generation += 1
            self._condition.notify_all()

    def wait(self, since: int, timeout: float) -> bool:
        """Block until a wake-up newer than ``since`` or ``timeout``; True when woken."""
        with self._condition:
            return self._condition.wait_for(lambda: self._generation != since, timeout)

    @property
    def poll_interval(self) -> float:
        return POLL_WITH_REDIS if self._connected else POLL_WITHOUT_REDIS

    def _listen(self) -> None:
        assert self.redis_url is not None
        backoff = 0.5
        while not self._stop.is_set():
            try:
                client = _client(self.redis_url)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                self._connected = True
                backoff = 0.5
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None:
                        self.notify()
                pubsub.close()
                client.close()
            except Exception as exc:  # noqa: BLE001 - reconnect on any failure
                log.debug("wake-up subscription lost: %s", exc)
            finally:
                self._connected = False
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)
