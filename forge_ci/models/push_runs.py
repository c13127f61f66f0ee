"""What processing a push event decided: one result per event, one outcome per workflow file.

::

    push_events 1──0..1 push_event_results     processed (files inspected) or why not:
         │                                       ignored (tag, deletion, unchanged ref),
         │                                       disabled, not_authorized, source_missing
         1──* push_event_workflows             (push_event_id, workflow_path) unique: the
                      │                          idempotency key of replayed events
                      0..1── runs               run_created -> the run (number in the UI)

Texts here are shown to repository readers: they name what was decided and why, never an
exception's internals.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.base import Base, utcnow
from forge_ci.models.runs import Run

#: Event-level results.
PROCESSED = "processed"
IGNORED = "ignored"
DISABLED = "disabled"
NOT_AUTHORIZED = "not_authorized"
SOURCE_MISSING = "source_missing"
EVENT_RESULTS = (PROCESSED, IGNORED, DISABLED, NOT_AUTHORIZED, SOURCE_MISSING)

#: Outcomes of one workflow file.
RUN_CREATED = "run_created"
NOT_MATCHED = "not_matched"
INVALID = "invalid"
FAILED = "failed"
WORKFLOW_OUTCOMES = (RUN_CREATED, NOT_MATCHED, INVALID, FAILED)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class PushEventResult(Base):
    """The decision about one push event as a whole."""

    __tablename__ = "push_event_results"
    __table_args__ = (CheckConstraint(_one_of("result", EVENT_RESULTS), name="result"),)

    push_event_id: Mapped[int] = mapped_column(
        ForeignKey("push_events.id", ondelete="CASCADE"), primary_key=True
    )
    result: Mapped[str] = mapped_column(String(16))
    #: Why, for people: "tag pushes do not start workflows", "bob has write access; ..."
    detail: Mapped[str] = mapped_column(Text)
    #: The changed paths the trigger filters saw; None when unknown (new branch, huge diff).
    changed_paths_count: Mapped[int | None]
    processed_at: Mapped[datetime] = mapped_column(default=utcnow)


class PushEventWorkflow(Base):
    """The outcome of one workflow file for one push event."""

    __tablename__ = "push_event_workflows"
    __table_args__ = (
        UniqueConstraint("push_event_id", "workflow_path"),
        CheckConstraint(_one_of("outcome", WORKFLOW_OUTCOMES), name="outcome"),
        # SET NULL on the run keeps the outcome if a run row is ever deleted.
        CheckConstraint("run_id IS NULL OR outcome = 'run_created'", name="run_only_if_created"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    push_event_id: Mapped[int] = mapped_column(
        ForeignKey("push_events.id", ondelete="CASCADE"), index=True
    )
    workflow_path: Mapped[str] = mapped_column(String(255))
    outcome: Mapped[str] = mapped_column(String(16))
    #: The trigger's reason (matched or not), or the first problem of an invalid file.
    detail: Mapped[str] = mapped_column(Text)
    #: Every problem of an invalid file: [{"line", "column", "message"}].
    diagnostics: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    run: Mapped[Run | None] = relationship()
