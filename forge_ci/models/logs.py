"""Stored job logs: masked records with per-attempt cursors, and the maskers' carry-over.

::

    attempts 1──* log_records     position 1, 2, 3... per attempt (the reading cursor);
                                  ``sequence`` is the runner's upload sequence (None for
                                  records the server wrote: notices, flushed tails)
    attempts 1──* log_carries     one per (step, stream) with withheld text, sealed

Record text is already masked. Nothing here holds a secret in the clear (a carry's ``ending``
is masked text too).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forge_ci.models.base import Base, utcnow


class LogRecord(Base):
    """One stored piece of an attempt's log."""

    __tablename__ = "log_records"
    __table_args__ = (
        UniqueConstraint("attempt_id", "position", name="uq_log_records_attempt_id_position"),
        UniqueConstraint("attempt_id", "sequence", name="uq_log_records_attempt_id_sequence"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Indexed by the unique (attempt_id, position) constraint.
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    #: 1, 2, 3... within the attempt; the reading cursor.
    position: Mapped[int]
    #: The runner's sequence for uploaded chunks; None for server records.
    sequence: Mapped[int | None]
    #: The step id, or "" for job-level output.
    step_id: Mapped[str] = mapped_column(String(100), default="")
    #: stdout, stderr or system.
    stream: Mapped[str] = mapped_column(String(8))
    #: Masked text (may be empty when the whole chunk was withheld for the next one).
    text: Mapped[str] = mapped_column(Text)
    #: HMAC-SHA256 of the unmasked chunk keyed by the attempt credential: recognizes an exact
    #: replay without storing anything a reader of the database could check guesses against.
    digest: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LogCarry(Base):
    """Withheld text of one (step, stream) of an attempt, sealed (see forge_ci.masking)."""

    __tablename__ = "log_carries"

    attempt_id: Mapped[int] = mapped_column(
        ForeignKey("attempts.id", ondelete="CASCADE"), primary_key=True
    )
    step_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    stream: Mapped[str] = mapped_column(String(8), primary_key=True)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    #: What the stream ends with if no chunk follows (Masker.finish when sealed): the mask, "",
    #: or a tail that the masking rule does not count as secret (Masker.tail_is_secret); so the
    #: server can end the stream without the credential. None (rows from before 0005): the mask.
    ending: Mapped[str | None] = mapped_column(Text)
