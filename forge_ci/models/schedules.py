"""Scheduled minutes: what the scheduler decided for one workflow file in one UTC minute.

::

    repositories 1──* scheduled_minutes      (repository_id, workflow_path, minute) unique: the
                          │                    key that makes a minute fire at most once, across
                          │                    worker restarts and any number of workers
                          0..1── runs          run_created -> the run

A row is written only for minutes whose cron matched (in the same transaction as the run it
created), so a minute that was skipped because no worker was up has no row: it is not replayed.
Texts are shown to repository readers.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.base import Base, utcnow
from forge_ci.models.runs import Run

RUN_CREATED = "run_created"
#: The person who switched scheduled workflows on may no longer start runs (rechecked each time).
NOT_AUTHORIZED = "not_authorized"
#: The run could not be created (a rule refused it, or an internal error); see detail.
FAILED = "failed"
OUTCOMES = (RUN_CREATED, NOT_AUTHORIZED, FAILED)


class ScheduledMinute(Base):
    """One workflow's scheduled minute and its outcome."""

    __tablename__ = "scheduled_minutes"
    __table_args__ = (
        UniqueConstraint("repository_id", "workflow_path", "minute"),
        CheckConstraint(
            "outcome IN (" + ", ".join(repr(o) for o in sorted(OUTCOMES)) + ")", name="outcome"
        ),
        CheckConstraint("run_id IS NULL OR outcome = 'run_created'", name="run_only_if_created"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repositories.id", ondelete="CASCADE"), index=True
    )
    workflow_path: Mapped[str] = mapped_column(String(255))
    #: The scheduled minute (UTC, seconds zero).
    minute: Mapped[datetime]
    #: The cron expression that matched, as written in the file.
    cron: Mapped[str] = mapped_column(String(255))
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    run: Mapped[Run | None] = relationship()
