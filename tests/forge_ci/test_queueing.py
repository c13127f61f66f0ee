"""Enqueueing push events on a real Redis, and what happens when Redis is gone."""

from __future__ import annotations

import dataclasses
import logging

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
    try:
        assert queue.enqueue_push_events([7, 8])
        assert queue.enqueue_push_events([7])  # still waiting: not queued twice
        check = rq_queue(queue_settings.redis_url)
        assert check.job_ids == ["push-event-7", "push-event-8"]
        job = check.fetch_job("push-event-7")
        assert job is not None and job.func_name == PROCESS_PUSH_EVENT and job.args == (7,)
        # A hung job is ended after half a minute, not RQ's three (issue #14, finding 9).
        assert job.timeout == JOB_TIMEOUT_SECONDS == 30
        # A job that ran (or failed) is no longer waiting; the event, if still confirmed, is
        # enqueued again: that is how a failed job is retried by the worker's scan.
        job.set_status("failed")
        check.remove(job)
        assert queue.enqueue_push_events([7])
        assert check.job_ids == ["push-event-8", "push-event-7"]
        assert queue.enqueue_push_events([9], fresh=True)  # a push's own, in one round trip
        fresh = check.fetch_job("push-event-9")
        assert fresh is not None and fresh.timeout == JOB_TIMEOUT_SECONDS
        check.connection.close()
    finally:
        queue.close()


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
