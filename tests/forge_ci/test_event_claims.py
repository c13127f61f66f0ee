"""Claiming push events on both databases (issue #14, finding 5): one processor wins an event,
a dead holder's claim runs out or is given back, and the scan offers only unclaimed events."""

from __future__ import annotations

import secrets
import threading
from datetime import timedelta

from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.models import PushEvent, PushEventState, utcnow
from forge_ci.pushes.events import (
    CLAIM_SECONDS,
    claim_event,
    claim_holder,
    offered_event_ids,
    release_claim,
    still_offered,
)
from forge_ci.repos import create_repository
from forge_ci.settings import Settings

ZERO = "0" * 40


def make_events(
    session: Session, settings: Settings, count: int, state: str = "confirmed"
) -> list[int]:
    alice = create_user(session, Actor.operator(), f"u{secrets.token_hex(3)}", None)
    repository = create_repository(
        session, settings, Actor.operator(), f"{alice.name}/r{secrets.token_hex(3)}"
    )
    session.flush()
    events = [
        PushEvent(
            repository_id=repository.id,
            pusher_id=alice.id,
            push_session=secrets.token_hex(8),
            ref=f"refs/heads/b{i}",
            old_sha=ZERO,
            new_sha="1" * 40,
            state=state,
        )
        for i in range(count)
    ]
    session.add_all(events)
    session.commit()
    return [event.id for event in events]


def offered(session: Session, *args: object, **kwargs: object) -> list[int]:
    """offered_event_ids, ending the read so that the claims below start their own writers."""
    found = offered_event_ids(session, *args, **kwargs)  # type: ignore[arg-type]
    session.rollback()
    return found


def holder_of(database: Database, event_id: int) -> tuple[str | None, str]:
    with database.session(read_only=True) as s:
        event = s.get(PushEvent, event_id)
        assert event is not None
        return event.claimed_by, event.state


def test_one_claimer_wins_a_claim_runs_out_or_is_given_back(
    settings: Settings, database: Database, session: Session
) -> None:
    first, second, prepared = make_events(session, settings, 2) + make_events(
        session, settings, 1, "prepared"
    )
    assert claim_holder(1234).endswith(":1234")
    now = utcnow()
    assert claim_event(session, first, "a:1", now=now)
    # The refusals: a held event is not taken, nor offered, nor released by someone else.
    assert not claim_event(session, first, "b:2", now=now + timedelta(seconds=CLAIM_SECONDS - 1))
    assert offered(session, now=now) == [second]
    assert not release_claim(session, first, "b:2")
    assert holder_of(database, first) == ("a:1", "confirmed")
    # A claim that ran out (its holder died with the whole worker) is taken over ...
    later = now + timedelta(seconds=CLAIM_SECONDS + 1)
    assert offered(session, now=later) == [first, second]
    assert claim_event(session, first, "b:2", now=later)
    assert not release_claim(session, first, "a:1")  # the old holder cannot free it any more
    # ... and one given back (busy, failed, its work horse killed) is offered again at once.
    assert release_claim(session, first, "b:2")
    assert offered(session, [first, prepared]) == [first]
    assert claim_event(session, first, "c:3")
    # Only confirmed events are claimed: not one still prepared, nor one already received.
    assert not claim_event(session, prepared, "a:1")
    event = session.get(PushEvent, second)
    assert event is not None
    event.move_to(PushEventState.RECEIVED)
    session.commit()
    assert not claim_event(session, second, "a:1")
    assert still_offered(database)([first, second, prepared]) == []


def test_concurrent_claimers_each_event_has_exactly_one_winner(
    settings: Settings, database: Database, session: Session
) -> None:
    ids = make_events(session, settings, 30)
    wins: dict[int, list[str]] = {event_id: [] for event_id in ids}
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def claimer(name: str) -> None:
        start.wait()
        try:
            with database.session() as s:
                for event_id in ids:
                    if claim_event(s, event_id, name):
                        wins[event_id].append(name)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"h:{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert all(len(winners) == 1 for winners in wins.values()), wins
    assert offered(session) == []
