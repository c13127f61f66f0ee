"""Push events: one row per ref update accepted (or attempted) through a push.

A row starts as the intent the SSH parent records when ``pre-receive`` reports a push's
updates, before git moves any ref (the repository lock is held for the whole push), and ends as
a durable event a worker can act on::

               settling after receive-pack, finding the ref at new
    prepared ----------------------------------------------------> confirmed ----> received
        |          (the commit is pinned in the same step)                    worker
        +----------------------------------------------------> aborted
               settling, finding the ref still at old

``confirmed`` means: git moved the ref, the commit is pinned under
``refs/forge-ci/push-events/<id>`` (deletions have nothing to pin) and the row is committed, so
the event can be enqueued. :data:`TRANSITIONS` is the whole state machine; the tests check it
as a table.

A worker processing a confirmed event first *claims* it (``claimed_by``, ``claimed_until``: one
conditional UPDATE that only one processor wins, ``forge_ci.pushes.events.claim_event``), so an
event is worked on by one process at a time. A claim is a lease, not a state: the event stays
``confirmed`` until its result is recorded, and a claim whose holder died without releasing it
ends when ``claimed_until`` passes; the worker's scan then offers the event again.
"""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forge_ci.models.accounts import User
from forge_ci.models.base import Base, utcnow
from forge_ci.models.repositories import Repository
from forge_ci.refs import INTERNAL_REF_PREFIX

#: Longest ref name a push may create; pre-receive refuses longer ones with the reason.
MAX_REF_LENGTH = 1024
PIN_PREFIX = INTERNAL_REF_PREFIX + "push-events/"


class PushEventState(enum.StrEnum):
    PREPARED = "prepared"
    CONFIRMED = "confirmed"
    ABORTED = "aborted"
    RECEIVED = "received"


#: Allowed moves. A state not listed as a key would be a state added and forgotten.
TRANSITIONS: dict[PushEventState, frozenset[PushEventState]] = {
    PushEventState.PREPARED: frozenset({PushEventState.CONFIRMED, PushEventState.ABORTED}),
    PushEventState.CONFIRMED: frozenset({PushEventState.RECEIVED}),
    PushEventState.ABORTED: frozenset(),
    PushEventState.RECEIVED: frozenset(),
}


class PushEvent(Base):
    """One ref update of one push: who, where, from which value to which, and how far it got."""

    __tablename__ = "push_events"
    __table_args__ = (
        # A ref moves at most once per push; a hook repeated by git must not record it twice.
        UniqueConstraint("push_session", "ref"),
        Index("ix_push_events_repository_id_state", "repository_id", "state"),
        Index("ix_push_events_state", "state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id", ondelete="CASCADE"))
    pusher_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    #: Random id of the SSH push that made the update (one per ``git receive-pack`` run).
    push_session: Mapped[str] = mapped_column(String(64))
    ref: Mapped[str] = mapped_column(String(MAX_REF_LENGTH))
    #: Object ids as hex; all zeros for "did not exist" (creation) / "no longer exists" (deletion).
    old_sha: Mapped[str] = mapped_column(String(64))
    new_sha: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default=PushEventState.PREPARED.value)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: When the event reached ``confirmed`` or ``aborted``.
    settled_at: Mapped[datetime | None]
    received_at: Mapped[datetime | None]
    #: Who processes the event (``host:pid`` of a work horse), kept after it was received.
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    #: The claim's lease: until then no other processor takes the event.
    claimed_until: Mapped[datetime | None]

    repository: Mapped[Repository] = relationship()
    pusher: Mapped[User] = relationship()

    @property
    def is_deletion(self) -> bool:
        return self.new_sha.strip("0") == ""

    @property
    def pin_ref(self) -> str | None:
        """Where the pushed commit is pinned, or None for a deletion (nothing to keep)."""
        return None if self.is_deletion else f"{PIN_PREFIX}{self.id}"

    def can_move_to(self, state: PushEventState) -> bool:
        return state in TRANSITIONS[PushEventState(self.state)]

    def move_to(self, state: PushEventState) -> None:
        """Change state along :data:`TRANSITIONS`; anything else is a bug in the caller."""
        if not self.can_move_to(state):
            raise ValueError(f"push event {self.id}: {self.state} -> {state.value} is not allowed")
        self.state = state.value
        if state in (PushEventState.CONFIRMED, PushEventState.ABORTED):
            self.settled_at = utcnow()
        elif state is PushEventState.RECEIVED:
            self.received_at = utcnow()
