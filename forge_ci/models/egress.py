"""The egress audit: every connection a job asked the provider's proxy for, allowed or denied.

::

    attempts 1──* egress_connections     sequence 1, 2, 3... per attempt (the provider's)

The provider sends the records (``POST attempts/<id>/egress`` with its own credential, never
the attempt's, so a job cannot write its own audit); a replayed sequence is stored once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forge_ci.models.base import Base


class EgressConnection(Base):
    """One request through an attempt's egress proxy."""

    __tablename__ = "egress_connections"
    __table_args__ = (
        UniqueConstraint(
            "attempt_id", "sequence", name="uq_egress_connections_attempt_id_sequence"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Indexed by the unique (attempt_id, sequence) constraint.
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    sequence: Mapped[int]
    #: When the job asked (the provider's clock).
    requested_at: Mapped[datetime]
    #: CONNECT, or the plain HTTP method; "?" for a request the proxy could not read.
    method: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(255))
    port: Mapped[int]
    #: The address connected to, or the addresses the denial was about ("" if none).
    address: Mapped[str] = mapped_column(String(200))
    allowed: Mapped[bool]
    #: Allowed to a non-public address because an address entry names it.
    explicit: Mapped[bool]
    reason: Mapped[str] = mapped_column(String(500))
    #: Why the proxy ended an allowed connection itself (a limit), if it did.
    closed: Mapped[str] = mapped_column(String(200))
    bytes_out: Mapped[int] = mapped_column(BigInteger)
    bytes_in: Mapped[int] = mapped_column(BigInteger)
    milliseconds: Mapped[int] = mapped_column(BigInteger)
