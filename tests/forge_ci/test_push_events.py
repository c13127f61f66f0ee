"""Push-event use cases on both databases: intents, settling (recovery and pins), reading."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user, get_user
from forge_ci.authz import Actor, Role
from forge_ci.errors import Conflict, NeedsInspection, NotFound, PermissionDenied
from forge_ci.gitstore import repository_path
from forge_ci.models import PushEvent, PushEventState, User
from forge_ci.models.push_events import TRANSITIONS
from forge_ci.pushes.events import (
    list_push_events,
    mark_received,
    offered_event_ids,
    repositories_with_open_events,
)
from forge_ci.pushes.inspection import resolve_push_event
from forge_ci.pushes.intents import PushContext, moves_git_will_try, record_intents
from forge_ci.pushes.refpolicy import check_ref_updates, refusal_reason
from forge_ci.pushes.settling import Settled, settle_push, settle_repository
from forge_ci.refs import Update, events_in
from forge_ci.repos import create_repository, grant
from forge_ci.settings import Settings

OPERATOR = Actor.operator()
ZERO = "0" * 40


@pytest.fixture
def repo_id(session: Session, settings: Settings) -> int:
    create_user(session, OPERATOR, "alice", None)
    create_user(session, OPERATOR, "bob", None)
    repository = create_repository(session, settings, OPERATOR, "alice/demo")
    session.commit()
    return repository.id


@pytest.fixture
def git(settings: Settings, repo_id: int) -> pygit2.Repository:
    return pygit2.Repository(str(repository_path(settings.repositories_dir, "alice", "demo")))


def commit(git: pygit2.Repository, message: str, parents: list[str] | None = None) -> str:
    """A commit object in the repository, not on any ref."""
    signature = pygit2.Signature("Test", "test@example.com", 1700000000, 0)
    tree = git.TreeBuilder().write()
    parent_ids = [pygit2.Oid(hex=p) for p in parents or []]
    return str(git.create_commit(None, signature, signature, message, tree, parent_ids))


def set_ref(git: pygit2.Repository, name: str, oid: str | None) -> None:
    if oid is None:
        git.references.delete(name)
    else:
        git.references.create(name, pygit2.Oid(hex=oid), force=True)


# The use cases that write start their own (serialized) transaction, as the SSH parent's fresh
# sessions do; so the helpers below end the transaction their reads began.


def push(session: Session, repo_id: int, session_id: str = "s1") -> PushContext:
    alice = session.scalar(select(User).where(User.name == "alice"))
    assert alice is not None
    context = PushContext(repo_id, alice.id, session_id, "alice/demo")
    session.rollback()
    return context


def states(session: Session) -> dict[str, str]:
    session.expire_all()
    found = {e.ref: e.state for e in session.scalars(select(PushEvent).order_by(PushEvent.id))}
    session.rollback()
    return found


# --- the state machine --------------------------------------------------------------------------


def test_the_transition_table_covers_every_state_and_nothing_else() -> None:
    assert set(TRANSITIONS) == set(PushEventState)
    allowed = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert allowed == {
        (PushEventState.PREPARED, PushEventState.CONFIRMED),
        (PushEventState.PREPARED, PushEventState.ABORTED),
        (PushEventState.CONFIRMED, PushEventState.RECEIVED),
    }
    for source in PushEventState:
        for target in PushEventState:
            event = PushEvent(state=source.value, id=1)
            if (source, target) in allowed:
                event.move_to(target)
                assert event.state == target.value
            else:
                with pytest.raises(ValueError, match="is not allowed"):
                    event.move_to(target)
                assert event.state == source.value


# --- ref policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("refs/heads/main", None),
        ("refs/heads/feature/x", None),
        ("refs/tags/v1.0", None),
        ("refs/forge-ci/x", "reserved for forge-ci"),
        ("refs/forge-ci/push-events/1", "reserved for forge-ci"),
        ("refs/notes/commits", "only branches"),
        ("refs/pull/1/head", "only branches"),
        ("refs/heads/", "only branches"),
        ("HEAD", "only branches"),
        ("refs/heads/HEAD", "cannot be named HEAD"),  # `git push HEAD:HEAD` (issue #14)
        ("refs/tags/HEAD", "cannot be named HEAD"),
        ("refs/heads/feature/HEAD", None),
        ("refs/heads/HEADS", None),
        ("refs/heads/" + "x" * 1100, "longer than 1024 bytes"),
    ],
)
def test_only_branches_and_tags_may_be_pushed(ref: str, reason: str | None) -> None:
    found = refusal_reason(ref)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found


def test_a_refusal_names_every_refused_ref() -> None:
    updates = [
        Update(ZERO, "a" * 40, "refs/heads/ok"),
        Update(ZERO, "a" * 40, "refs/forge-ci/x"),
        Update(ZERO, "a" * 40, "refs/notes/x"),
    ]
    with pytest.raises(PermissionDenied) as caught:
        check_ref_updates(updates)
    assert "refs/forge-ci/x" in caught.value.message and "refs/notes/x" in caught.value.message
    assert "refs/heads/ok" not in caught.value.message


# --- intents ------------------------------------------------------------------------------------


def test_intents_are_recorded_once_then_settled_against_the_refs(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    context = push(session, repo_id)
    a, b = commit(git, "a"), commit(git, "b")
    set_ref(git, "refs/heads/dev", a)
    # What the SSH parent records of a pre-receive request: the updates that make events.
    updates = events_in(
        [
            Update(ZERO, a, "refs/heads/main"),
            Update(a, b, "refs/heads/dev"),
            Update(ZERO, a, "HEAD"),  # git's reflog-only mirror of the branch HEAD points to
            Update(ZERO, ZERO, "refs/heads/gone"),  # git's no-op packed-refs update
            Update(ZERO, a, "refs/forge-ci/push-events/9"),  # internal: never an event
        ]
    )
    ids = record_intents(session, context, updates)
    assert len(ids) == 2
    assert record_intents(session, context, updates) == ids  # the same report again
    assert states(session) == {"refs/heads/main": "prepared", "refs/heads/dev": "prepared"}
    with pytest.raises(Conflict, match="already recorded"):
        record_intents(session, context, [Update(ZERO, b, "refs/heads/main")])
    session.rollback()

    # Another push's settling never touches these rows.
    other = push(session, repo_id, "s2")
    assert settle_push(session, settings, other) == Settled()
    # git moved main and refused dev (dev is still at its old value).
    set_ref(git, "refs/heads/main", a)
    settled = settle_push(session, settings, context)
    main_id, dev_id = ids
    assert settled == Settled(confirmed=[main_id], aborted=[dev_id])
    assert settle_push(session, settings, context) == Settled()  # nothing open any more
    assert str(git.references[f"refs/forge-ci/push-events/{main_id}"].target) == a
    assert states(session) == {"refs/heads/main": "confirmed", "refs/heads/dev": "aborted"}
    event = session.scalar(select(PushEvent).where(PushEvent.ref == "refs/heads/dev"))
    assert event is not None and event.settled_at is not None
    assert event.pusher.name == "alice" and event.push_session == "s1"
    session.rollback()


def test_settling_a_push_reports_refs_moved_outside_forge_ci_and_keeps_them_open(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1, c2, c3 = commit(git, "one"), commit(git, "two"), commit(git, "three")
    set_ref(git, "refs/heads/main", c1)
    context = push(session, repo_id)
    main_id, ok_id = record_intents(
        session, context, [Update(c1, c2, "refs/heads/main"), Update(ZERO, c2, "refs/heads/ok")]
    )
    set_ref(git, "refs/heads/main", c3)  # by hand, while the push was in flight
    set_ref(git, "refs/heads/ok", c2)
    settled = settle_push(session, settings, context)
    assert settled.confirmed == [ok_id] and settled.aborted == []
    [problem] = settled.problems
    assert f"push event {main_id} (refs/heads/main" in problem and f"now at {c3[:12]}" in problem
    assert states(session) == {"refs/heads/main": "prepared", "refs/heads/ok": "confirmed"}
    # ...and the repository's next write is refused until an operator looks.
    with pytest.raises(NeedsInspection, match=f"push event {main_id} "):
        settle_repository(session, settings, repo_id)


def test_intents_take_the_old_values_git_will_check_not_the_clients(
    git: pygit2.Repository,
) -> None:
    """pre-receive hears what the client claims; git checks the old values only later."""
    a, b, c = commit(git, "a"), commit(git, "b"), commit(git, "c")
    set_ref(git, "refs/heads/main", b)
    set_ref(git, "refs/heads/doomed", a)
    not_an_object = "1234567890" * 4
    claimed = [
        Update(b, c, "refs/heads/main"),  # true: kept
        Update(a, b, "refs/heads/main"),  # main is at b, not a: git refuses it
        Update(ZERO, c, "refs/heads/main"),  # "create" of a ref that exists: refused
        Update(c, a, "refs/heads/new"),  # an "update" of a ref that does not exist: refused
        Update(ZERO, a, "refs/heads/new"),  # a true creation: kept
        Update(b, ZERO, "refs/heads/doomed"),  # a deletion from the wrong value: refused
        # A deletion from no object at all, or from zeros, deletes whatever the ref holds
        # ("allowing deletion of corrupt ref"): recorded with the value it really has.
        Update(not_an_object, ZERO, "refs/heads/doomed"),
        Update(ZERO, ZERO, "refs/heads/doomed"),
        Update(not_an_object, ZERO, "refs/heads/absent"),  # deletes nothing: no move
    ]
    assert moves_git_will_try(git, claimed) == [
        Update(b, c, "refs/heads/main"),
        Update(ZERO, a, "refs/heads/new"),
        Update(a, ZERO, "refs/heads/doomed"),
        Update(a, ZERO, "refs/heads/doomed"),
    ]


def test_intents_for_refused_refs_are_not_recorded(session: Session, repo_id: int) -> None:
    context = push(session, repo_id)
    with pytest.raises(PermissionDenied, match="refs/notes/x"):
        record_intents(
            session,
            context,
            [Update(ZERO, "a" * 40, "refs/heads/main"), Update(ZERO, "a" * 40, "refs/notes/x")],
        )
    session.rollback()
    assert states(session) == {}


# --- settling -----------------------------------------------------------------------------------


def test_settling_resolves_prepared_intents_against_the_refs(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1 = commit(git, "one")
    c2 = commit(git, "two", [c1])
    set_ref(git, "refs/heads/main", c1)
    set_ref(git, "refs/heads/moved", c2)
    set_ref(git, "refs/heads/kept", c1)
    set_ref(git, "refs/heads/doomed", c1)
    context = push(session, repo_id)
    record_intents(
        session,
        context,
        [
            Update(c1, c2, "refs/heads/moved"),  # git moved it, the answer was lost
            Update(c1, c2, "refs/heads/kept"),  # git never moved it
            Update(ZERO, c2, "refs/heads/new"),  # never created
            Update(c1, ZERO, "refs/heads/doomed"),  # deleted below
            Update(ZERO, c1, "refs/tags/v1"),  # created below
        ],
    )
    set_ref(git, "refs/heads/doomed", None)
    set_ref(git, "refs/tags/v1", c1)

    settled = settle_repository(session, settings, repo_id)

    assert states(session) == {
        "refs/heads/moved": "confirmed",
        "refs/heads/kept": "aborted",
        "refs/heads/new": "aborted",
        "refs/heads/doomed": "confirmed",
        "refs/tags/v1": "confirmed",
    }
    events = {e.ref: e for e in session.scalars(select(PushEvent))}
    assert sorted(settled.confirmed) == sorted(
        events[r].id for r in ("refs/heads/moved", "refs/heads/doomed", "refs/tags/v1")
    )
    pins = {r.name: str(r.target) for r in git.references.iterator()}
    assert pins[f"refs/forge-ci/push-events/{events['refs/heads/moved'].id}"] == c2
    assert pins[f"refs/forge-ci/push-events/{events['refs/tags/v1'].id}"] == c1
    # A deletion has nothing to pin.
    assert f"refs/forge-ci/push-events/{events['refs/heads/doomed'].id}" not in pins
    session.rollback()
    # Settling again changes nothing.
    assert settle_repository(session, settings, repo_id).confirmed == []


def test_a_confirmation_leaves_nothing_to_settle(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1 = commit(git, "one")
    context = push(session, repo_id)
    update = [Update(ZERO, c1, "refs/heads/main")]
    [event_id] = record_intents(session, context, update)
    set_ref(git, "refs/heads/main", c1)
    assert settle_push(session, settings, context).confirmed == [event_id]
    assert settle_repository(session, settings, repo_id).confirmed == []
    assert str(git.references[f"refs/forge-ci/push-events/{event_id}"].target) == c1
    assert offered_event_ids(session) == [event_id]
    session.rollback()


def test_a_ref_moved_outside_forge_ci_refuses_writes_naming_the_event(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1, c2, c3 = commit(git, "one"), commit(git, "two"), commit(git, "three")
    set_ref(git, "refs/heads/main", c1)
    set_ref(git, "refs/heads/ok", c1)
    context = push(session, repo_id)
    ids = record_intents(
        session,
        context,
        [Update(c1, c2, "refs/heads/main"), Update(c1, c2, "refs/heads/ok")],
    )
    set_ref(git, "refs/heads/main", c3)  # by hand, to a third value
    set_ref(git, "refs/heads/ok", c2)
    main_id = min(ids)

    for _ in range(2):  # refused every time until someone looks
        with pytest.raises(NeedsInspection) as caught:
            settle_repository(session, settings, repo_id)
        message = caught.value.message
        assert f"push event {main_id} (refs/heads/main" in message
        assert f"now at {c3[:12]}" in message and "alice/demo" in message
        assert "refs/heads/ok" not in message
    # What could be settled was settled.
    assert states(session) == {"refs/heads/main": "prepared", "refs/heads/ok": "confirmed"}
    assert repositories_with_open_events(session) == [repo_id]
    session.rollback()

    set_ref(git, "refs/heads/main", c1)  # the operator puts the ref back
    assert settle_repository(session, settings, repo_id).aborted == [main_id]
    assert repositories_with_open_events(session) == []


def test_a_vanished_ref_or_commit_needs_inspection(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1, c2 = commit(git, "one"), commit(git, "two")
    set_ref(git, "refs/heads/main", c1)
    context = push(session, repo_id)
    record_intents(session, context, [Update(c1, c2, "refs/heads/main")])
    set_ref(git, "refs/heads/main", None)
    with pytest.raises(NeedsInspection, match="the ref no longer exists"):
        settle_repository(session, settings, repo_id)

    set_ref(git, "refs/heads/main", c1)  # (resolved: back at its old value)
    other = push(session, repo_id, "s2")
    missing = "1234567890" * 4
    ghost = [Update(ZERO, missing, "refs/heads/ghost")]
    record_intents(session, other, ghost)
    # The ref points at an object the repository does not have: it cannot be pinned.
    (Path(git.path) / "refs/heads/ghost").write_text(missing + "\n")
    [problem] = settle_push(session, settings, other).problems
    assert "commit is missing" in problem
    with pytest.raises(NeedsInspection, match="commit is missing"):
        settle_repository(session, settings, repo_id)


def _stuck_event(session: Session, git: pygit2.Repository, repo_id: int) -> tuple[int, list[str]]:
    """A push of main c1 -> c2 in flight while someone set main to c3 by hand."""
    c1, c2, c3 = commit(git, "one"), commit(git, "two"), commit(git, "three")
    set_ref(git, "refs/heads/main", c1)
    [event_id] = record_intents(
        session, push(session, repo_id), [Update(c1, c2, "refs/heads/main")]
    )
    set_ref(git, "refs/heads/main", c3)
    return event_id, [c1, c2, c3]


def test_an_operator_says_the_push_happened(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    event_id, (_c1, c2, c3) = _stuck_event(session, git, repo_id)
    verdict = resolve_push_event(session, settings, OPERATOR, "alice/demo", event_id, pushed=True)
    assert (verdict.ref, verdict.was, verdict.now, verdict.state) == (
        "refs/heads/main",
        c3,
        c2,
        "confirmed",
    )
    assert str(git.references["refs/heads/main"].target) == c2
    assert str(git.references[f"refs/forge-ci/push-events/{event_id}"].target) == c2
    assert settle_repository(session, settings, repo_id) == Settled()  # writes resume
    assert offered_event_ids(session) == [event_id]


def test_an_operator_says_the_push_did_not_happen(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c0 = commit(git, "zero")
    set_ref(git, "refs/heads/topic", c0)
    [created] = record_intents(
        session, push(session, repo_id), [Update(ZERO, c0, "refs/heads/new")]
    )
    set_ref(git, "refs/heads/new", commit(git, "by hand"))
    verdict = resolve_push_event(session, settings, OPERATOR, "alice/demo", created, pushed=False)
    assert (verdict.now, verdict.state) == (None, "aborted")  # a creation that did not happen
    assert git.references.get("refs/heads/new") is None
    assert repositories_with_open_events(session) == []


def test_resolving_is_refused_for_settled_events_missing_commits_and_non_owners(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    event_id, (c1, _c2, c3) = _stuck_event(session, git, repo_id)
    grant(session, OPERATOR, "alice/demo", "bob", Role.ADMIN)
    bob = Actor.for_user(get_user(session, "bob"))
    session.commit()
    with pytest.raises(PermissionDenied):  # owners only
        resolve_push_event(session, settings, bob, "alice/demo", event_id, pushed=True)
    with pytest.raises(NotFound, match="push event 999 of alice/demo not found"):
        resolve_push_event(session, settings, OPERATOR, "alice/demo", 999, pushed=True)
    # A commit that never arrived cannot have been pushed.
    [ghost] = record_intents(
        session, push(session, repo_id, "s2"), [Update(c1, "1234567890" * 4, "refs/heads/g")]
    )
    set_ref(git, "refs/heads/g", c3)
    with pytest.raises(Conflict, match="new commit 123456789012 is missing.*--not-pushed"):
        resolve_push_event(session, settings, OPERATOR, "alice/demo", ghost, pushed=True)
    assert str(git.references["refs/heads/g"].target) == c3  # nothing was changed
    # One verdict settles its event; the other still refuses writes, and says so.
    with pytest.raises(NeedsInspection, match=f"push event {event_id} .* is now aborted, but"):
        resolve_push_event(session, settings, OPERATOR, "alice/demo", event_id, pushed=False)
    with pytest.raises(Conflict, match=f"push event {event_id} of alice/demo is already aborted"):
        resolve_push_event(session, settings, OPERATOR, "alice/demo", event_id, pushed=True)
    assert str(git.references["refs/heads/main"].target) == c1


# --- reading and receiving ----------------------------------------------------------------------


def test_events_are_listed_for_readers_only(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1 = commit(git, "one")
    context = push(session, repo_id)
    record_intents(session, context, [Update(ZERO, c1, "refs/heads/main")])
    bob = session.scalar(select(User).where(User.name == "bob"))
    assert bob is not None
    as_bob = Actor.for_user(bob)
    with pytest.raises(NotFound, match="alice/demo not found"):
        list_push_events(session, as_bob, "alice/demo")
    with pytest.raises(NotFound, match="alice/nope not found"):
        list_push_events(session, OPERATOR, "alice/nope")
    grant(session, OPERATOR, "alice/demo", "bob", Role.READ)
    [info] = list_push_events(session, as_bob, "alice/demo")
    row = info.as_dict()
    assert set(row) == {"id", "ref", "old_sha", "new_sha", "pusher", "state", "created_at"}
    assert (row["ref"], row["old_sha"], row["new_sha"], row["pusher"], row["state"]) == (
        "refs/heads/main",
        ZERO,
        c1,
        "alice",
        "prepared",
    )


def test_receiving_is_idempotent_and_only_for_confirmed_events(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    c1 = commit(git, "one")
    context = push(session, repo_id)
    [event_id] = record_intents(session, context, [Update(ZERO, c1, "refs/heads/main")])
    assert mark_received(session, event_id) is False  # not confirmed yet
    session.commit()
    set_ref(git, "refs/heads/main", c1)
    settle_repository(session, settings, repo_id)
    assert offered_event_ids(session) == [event_id]
    assert mark_received(session, event_id) is True
    session.commit()
    assert mark_received(session, event_id) is False
    assert mark_received(session, 999999) is False
    session.commit()
    assert offered_event_ids(session) == []
    event = session.get(PushEvent, event_id)
    assert event is not None and event.state == "received" and event.received_at is not None


def test_many_pins_are_packed_and_a_stale_loose_pin_is_overwritten(
    session: Session, settings: Settings, repo_id: int, git: pygit2.Repository
) -> None:
    a, b = commit(git, "a"), commit(git, "b")
    context = push(session, repo_id)
    updates = [Update(ZERO, a, f"refs/heads/b{n:02d}") for n in range(20)]
    ids = record_intents(session, context, updates)
    for update in updates:
        set_ref(git, update.ref, a)
    # A pin name that already has a loose file (a restore, or a pin written before a crash):
    # the loose file would hide a packed record, so it is rewritten in place.
    set_ref(git, f"refs/forge-ci/push-events/{ids[0]}", b)
    assert settle_push(session, settings, context).confirmed == ids
    pins = {r.name: str(r.target) for r in git.references.iterator()}
    assert all(pins[f"refs/forge-ci/push-events/{i}"] == a for i in ids)
    packed = (Path(git.path) / "packed-refs").read_text()
    assert f"{a} refs/forge-ci/push-events/{ids[1]}\n" in packed
    assert f"refs/forge-ci/push-events/{ids[0]}\n" not in packed
