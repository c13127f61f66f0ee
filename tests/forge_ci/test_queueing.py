"""Enqueueing push events on a real Redis, and what happens when Redis is gone."""

from __future__ import annotations

import dataclasses
import logging
import threading

import pytest
import redis
from rq import Queue

from forge_ci.queueing import JOB_TIMEOUT_SECONDS, PROCESS_PUSH_EVENT, PUSH_EVENTS_QUEUE, JobQueue
from forge_ci.settings import Settings, load_settings


@pytest.fixture
def queue_settings(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Settings:
    settings = load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path_factory.mktemp("q"))})
    return dataclasses.replace(settings, redis_url=redis_url)


def rq_queue(redis_url: str) -> Queue:
    return Queue(PUSH_EVENTS_QUEUE, connection=redis.Redis.from_url(redis_url))


def test_events_are_enqueued_once_by_dotted_name(queue_settings: Settings) -> None:
    queue = JobQueue(queue_settings)
    check = rq_queue(queue_settings.redis_url)
    try:
        assert queue.enqueue_push_events([7, 8, 7])
        assert queue.enqueue_push_events([7])  # still waiting: not queued twice
        assert check.job_ids == ["push-event-7", "push-event-8"]
        job = check.fetch_job("push-event-7")
        assert job is not None and job.func_name == PROCESS_PUSH_EVENT and job.args == (7,)
        # A hung job is ended after half a minute, not RQ's three (issue #14, finding 9).
        assert job.timeout == JOB_TIMEOUT_SECONDS == 30
        # A job that ran (or failed) is no longer waiting; the event, if still ready, is
        # enqueued again: that is how a failed job is retried by the worker's scan.
        for status, event_id in (("failed", 7), ("finished", 8)):
            ended = check.fetch_job(f"push-event-{event_id}")
            assert ended is not None
            ended.set_status(status)
            check.remove(ended)
        asked: list[list[int]] = []

        def ready(ids: list[int]) -> list[int]:
            asked.append(ids)
            return [i for i in ids if i != 8]  # 8 was processed: its job finished

        assert queue.enqueue_push_events([7, 8, 9], ready)
        assert asked == [[7, 8, 9]]
        assert check.job_ids == ["push-event-7", "push-event-9"]
        requeued = check.fetch_job("push-event-7")
        assert requeued is not None and requeued.get_status() == "queued"
    finally:
        check.connection.close()
        queue.close()


def test_concurrent_enqueuers_queue_each_event_once(queue_settings: Settings) -> None:
    """The push and the scans of several workers enqueue the same events at once (issue #14,
    finding 5: RQ queued an id twice and the event was processed twice)."""
    ids = list(range(1, 451))  # three chunks
    queues = [JobQueue(queue_settings) for _ in range(4)]
    start = threading.Barrier(len(queues))
    results: list[bool] = []

    def enqueue(queue: JobQueue) -> None:
        start.wait()
        for _ in range(3):
            results.append(queue.enqueue_push_events(reversed(ids) if id(queue) % 2 else ids))

    threads = [threading.Thread(target=enqueue, args=(queue,)) for queue in queues]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for queue in queues:
        queue.close()
    check = rq_queue(queue_settings.redis_url)
    queued = check.job_ids
    check.connection.close()
    assert results == [True] * 12
    assert sorted(queued) == sorted(f"push-event-{i}" for i in ids)  # each once, none lost


def test_a_missing_redis_is_reported_not_raised(
    tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path_factory.mktemp("noredis")
    settings = load_settings(
        env={"FORGE_CI_DATA_DIR": str(directory), "FORGE_CI_REDIS_URL": f"unix://{directory}/x"}
    )
    queue = JobQueue(settings)
    with caplog.at_level(logging.WARNING, logger="forge_ci.queueing"):
        assert queue.enqueue_push_events([1]) is False
    assert "the worker's scan will" in caplog.text
    queue.close()
