"""The claim queue as data (forge_ci/models/queue.py) follows every job state change.

Checked against the reference: the queued jobs themselves. The concurrency test checks the
same after 1,000 concurrent claims.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from forge_ci.models import Job, QueueCount, QueuedJob, Run
from forge_ci.models.queue import key_labels, label_key
from forge_ci.runs.scheduling import cancel_run_jobs, lock_run
from tests.forge_ci.coordinator.world import LINUX, World, plan_job


def _queue(world: World) -> tuple[set[tuple[int, int, str]], dict[tuple[int, str], int]]:
    """(the job_queue rows, the non-zero counts), and assert they match the jobs."""
    with world.session() as session:
        rows: set[tuple[int, int, str]] = set(
            session.execute(select(QueuedJob.job_id, QueuedJob.repository_id, QueuedJob.labels))
        )
        counts = {
            (r, labels): n
            for r, labels, n in session.execute(
                select(QueueCount.repository_id, QueueCount.labels, QueueCount.queued)
            )
            if n
        }
        reference = {
            (job_id, repository_id, label_key(runs_on))
            for job_id, repository_id, runs_on in session.execute(
                select(Job.id, Run.repository_id, Job.runs_on)
                .join(Run, Run.id == Job.run_id)
                .where(Job.state == "queued")
            )
        }
    assert rows == reference
    tally: dict[tuple[int, str], int] = {}
    for _, repository_id, labels in reference:
        tally[(repository_id, labels)] = tally.get((repository_id, labels), 0) + 1
    assert counts == tally
    return rows, counts


def test_the_queue_follows_queueing_claims_dependents_and_cancellation(world: World) -> None:
    run_id = world.queue_run(
        plan_job("build"),
        plan_job("gpu", runs_on=(*LINUX, " GPU ")),
        plan_job("deploy", needs=("build",)),
    )
    linux, gpu = label_key(LINUX), label_key((*LINUX, "gpu"))
    rows, counts = _queue(world)
    assert {labels for _, _, labels in rows} == {linux, gpu}  # deploy waits: not queued
    assert sorted(counts.values()) == [1, 1]

    build = world.claim()  # the provider has no gpu label: build is taken, gpu stays
    assert build is not None and build.assignment.job_key == "build"
    rows, counts = _queue(world)
    assert [labels for _, _, labels in rows] == [gpu]

    world.start(build)
    world.run_steps(build)
    world.complete(build)  # deploy becomes queued
    rows, _ = _queue(world)
    assert {labels for _, _, labels in rows} == {linux, gpu}

    def cancel(session: Any) -> None:
        cancel_run_jobs(session, lock_run(session, run_id), "stop")

    world.in_session(cancel)  # both queued jobs leave the queue; nothing is claimable
    assert _queue(world) == (set(), {})
    assert world.claim() is None


def test_a_count_never_goes_below_zero(world: World) -> None:
    world.queue_run(plan_job("build"))

    def break_count(session: Any) -> None:
        session.execute(update(QueueCount).values(queued=QueueCount.queued - 2))

    with pytest.raises(IntegrityError):
        world.in_session(break_count)
    _queue(world)  # unchanged


@pytest.mark.parametrize(
    ("runs_on", "same_as"),
    [
        (["self-hosted", "linux"], ["linux", "self-hosted"]),
        ([" Linux ", "SELF-HOSTED"], ["self-hosted", "linux"]),
        (["linux", "linux", "self-hosted"], ["self-hosted", "linux"]),
    ],
)
def test_label_keys_compare_labels_as_providers_store_them(
    runs_on: list[str], same_as: list[str]
) -> None:
    assert label_key(runs_on) == label_key(same_as)
    assert key_labels(label_key(runs_on)) == {"self-hosted", "linux"}
    assert label_key(runs_on) != label_key([*same_as, "gpu"])
    assert label_key(["a,b"]) != label_key(["a", "b"])  # a comma is part of a label
