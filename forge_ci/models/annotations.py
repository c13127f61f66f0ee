"""Annotations: the ``::error``/``::warning``/``::notice`` commands of an attempt's steps.

::

    attempts 1──* attempt_annotations     in the order the runner reported them

Stored masked (the attempt's secrets and ``::add-mask::`` values), shown on the job and run
pages. Positions count per attempt from 0. A step's summary (``$GITHUB_STEP_SUMMARY``) is a
column of ``attempt_steps``.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forge_ci.models.base import Base


class AttemptAnnotation(Base):
    __tablename__ = "attempt_annotations"  # (attempt_id, position) is unique: no extra index
    __table_args__ = (
        UniqueConstraint(
            "attempt_id", "position", name="uq_attempt_annotations_attempt_id_position"
        ),
        CheckConstraint("level IN ('error', 'notice', 'warning')", name="level"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    position: Mapped[int]
    step_id: Mapped[str] = mapped_column(String(100))
    level: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)
    #: ``""`` / 0: not given.
    file: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text)
    line: Mapped[int]
    end_line: Mapped[int]
    col: Mapped[int]
    end_column: Mapped[int]
