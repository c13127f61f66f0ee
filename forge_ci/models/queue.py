"""The claim queue as data: one row per queued job, and a count per repository and label set.

::

    jobs (state = 'queued') ──1:1── job_queue          (repository_id, labels, queued_at, job_id)
                                    │                  indexed: a claim takes the oldest of one
                                    │                  repository and label set by one seek
                                    └─ counted in ──── job_queue_counts   (repository_id, labels)
                                                       -> queued: "anything for these labels?"
                                                       without reading a single job

Both follow the jobs' state machine in the same flush as the move itself: a job that becomes
``queued`` (``states.QUEUED``, through :func:`forge_ci.states.require_transition` in the
scheduler) gets its row and adds one to its count; a job that leaves ``queued`` (claimed, or
cancelled, skipped or failed before running) loses its row and takes one off. So a claim looks
at a handful of count rows whatever the queue's depth, and a poll of an empty queue reads no
job at all. ``labels`` is :func:`label_key` of the job's ``runs-on``: its labels compared the way
provider labels are stored (trimmed, lower case), sorted, as JSON.

Bulk ``insert()``/``update()`` statements on ``jobs`` bypass the ORM and this bookkeeping:
code that writes jobs that way calls :func:`leave_queue` for each job it takes out of the queue
(the direct claim path) or :func:`rebuild_queue` afterwards (the benches' seeding).
A count never goes below zero (a check constraint): a bookkeeping bug fails loudly instead
of hiding queued work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    Text,
    bindparam,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy import inspect as inspect_instance
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, Mapper, mapped_column

from forge_ci import states
from forge_ci.models.base import Base, table_of


def job_labels(labels: Iterable[str]) -> frozenset[str]:
    """Runner labels compared the way provider labels are stored."""
    return frozenset(label.strip().lower() for label in labels)


def label_key(runs_on: Iterable[str]) -> str:
    """The queue's key for a job's ``runs-on``: its normalized labels, sorted, as JSON."""
    return json.dumps(sorted(job_labels(runs_on)), separators=(",", ":"))


@lru_cache(maxsize=1024)
def key_labels(key: str) -> frozenset[str]:
    """The labels a :func:`label_key` stands for (every claim reads the same few keys)."""
    return frozenset(json.loads(key))


class QueuedJob(Base):
    """A job that is queued right now (the row exists exactly while ``jobs.state`` is queued)."""

    __tablename__ = "job_queue"
    __table_args__ = (
        Index(
            "ix_job_queue_repository_id_labels", "repository_id", "labels", "queued_at", "job_id"
        ),
    )

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id", ondelete="CASCADE"))
    labels: Mapped[str] = mapped_column(Text)
    queued_at: Mapped[datetime]


class QueueCount(Base):
    """How many jobs of one repository with one label set are queued."""

    __tablename__ = "job_queue_counts"
    __table_args__ = (CheckConstraint("queued >= 0", name="queued_not_negative"),)

    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), primary_key=True
    )
    labels: Mapped[str] = mapped_column(Text, primary_key=True)
    queued: Mapped[int] = mapped_column(default=0)


def _add_one(connection: Connection, repository_id: Any, labels: str) -> None:
    from sqlalchemy.dialects import postgresql, sqlite

    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(QueueCount).values(
        repository_id=repository_id, labels=labels, queued=1
    )
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=[QueueCount.repository_id, QueueCount.labels],
            set_={"queued": QueueCount.queued + 1},
        )
    )


def _take_one(connection: Connection, repository_id: Any, labels: str) -> None:
    connection.execute(
        update(QueueCount)
        .where(QueueCount.repository_id == repository_id, QueueCount.labels == labels)
        .values(queued=QueueCount.queued - 1)
    )


def _enter(connection: Connection, job: Any) -> None:
    from forge_ci.models.runs import Run

    run = inspect_instance(job).dict.get("run")
    repository_id = (
        run.repository_id
        if run is not None
        else connection.scalar(select(Run.repository_id).where(Run.id == job.run_id))
    )
    labels = label_key(job.runs_on)
    connection.execute(
        insert(QueuedJob).values(
            job_id=job.id, repository_id=repository_id, labels=labels, queued_at=job.queued_at
        )
    )
    _add_one(connection, repository_id, labels)


def _leave(connection: Connection, job: Any) -> None:
    row = connection.execute(
        delete(QueuedJob)
        .where(QueuedJob.job_id == job.id)
        .returning(QueuedJob.repository_id, QueuedJob.labels)
    ).first()
    if row is not None:
        _take_one(connection, row.repository_id, row.labels)


@cache
def leave_statements() -> tuple[Any, Any]:
    entries, counts = table_of(QueuedJob), table_of(QueueCount)
    return (
        delete(entries).where(entries.c.job_id == bindparam("job_id")),
        update(counts)
        .where(
            counts.c.repository_id == bindparam("entry_repository"),
            counts.c.labels == bindparam("entry_labels"),
        )
        .values(queued=counts.c.queued - 1),
    )


def leave_queue(connection: Connection, job_id: int, repository_id: int, labels: str) -> None:
    """A job known to be queued with ``labels`` leaves the queue; for Core statements that
    move a job out of ``queued`` (the direct claim path), which the ORM events do not see."""
    remove, take = leave_statements()
    if connection.execute(remove, {"job_id": job_id}).rowcount == 1:
        connection.execute(take, {"entry_repository": repository_id, "entry_labels": labels})


def follow_queue(model: Any) -> None:
    """Keep the queue tables in step with ``model.state`` (the jobs); from ``__declare_last__``."""
    from sqlalchemy import event

    def inserted(_mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        if target.state == states.QUEUED:
            _enter(connection, target)

    def updated(_mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        history = inspect_instance(target).attrs.state.history
        if not history.added:
            return
        was = history.deleted[0] if history.deleted else None
        now = history.added[0]
        if was == now:
            return
        if was == states.QUEUED:
            _leave(connection, target)
        if now == states.QUEUED:
            _enter(connection, target)

    event.listen(model, "after_insert", inserted)
    event.listen(model, "after_update", updated)


def rebuild_queue(connection: Connection) -> None:
    """Recompute both tables from ``jobs`` (after bulk statements; the migration does the same)."""
    from forge_ci.models.runs import Job, Run

    connection.execute(delete(QueuedJob))
    connection.execute(delete(QueueCount))
    rows = connection.execute(
        select(Job.id, Run.repository_id, Job.runs_on, Job.queued_at)
        .join(Run, Run.id == Job.run_id)
        .where(Job.state == states.QUEUED)
    ).all()
    entries: list[dict[str, Any]] = [
        {
            "job_id": job_id,
            "repository_id": repository_id,
            "labels": label_key(runs_on),
            "queued_at": queued_at,
        }
        for job_id, repository_id, runs_on, queued_at in rows
    ]
    if not entries:
        return
    connection.execute(insert(QueuedJob), entries)
    counts: dict[tuple[int, str], int] = {}
    for entry in entries:
        key = (entry["repository_id"], entry["labels"])
        counts[key] = counts.get(key, 0) + 1
    connection.execute(
        insert(QueueCount),
        [{"repository_id": r, "labels": labels, "queued": n} for (r, labels), n in counts.items()],
    )
