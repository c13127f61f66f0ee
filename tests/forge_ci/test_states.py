"""The transition tables, tested as tables (a state added and forgotten fails here)."""

from __future__ import annotations

import itertools

import pytest

from forge_ci import states
from forge_ci.errors import Conflict

EXPECTED = {
    "run": {("queued", "running"), ("queued", "completed"), ("running", "completed")},
    "job": {
        ("waiting", "queued"),
        ("waiting", "completed"),
        ("queued", "running"),
        ("queued", "completed"),
        ("running", "queued"),  # its attempt never started (forge_ci/coordinator/attempts.py)
        ("running", "completed"),
    },
    "attempt": {("leased", "running"), ("leased", "completed"), ("running", "completed")},
    "step": {("pending", "running"), ("pending", "completed"), ("running", "completed")},
}


@pytest.mark.parametrize("kind", sorted(states.TABLES))
def test_every_pair_of_states_is_allowed_exactly_when_the_table_says(kind: str) -> None:
    table = states.TABLES[kind]
    assert set(EXPECTED) == set(states.TABLES)
    for current, new in itertools.product(table, table):
        conclusion = "cancelled" if new == "completed" else None
        if (current, new) in EXPECTED[kind] or (current == new and current != "completed"):
            states.require_transition(kind, current, new, conclusion)
        else:
            with pytest.raises(Conflict, match=f"a {current} {kind} cannot become {new}"):
                states.require_transition(kind, current, new, conclusion)


@pytest.mark.parametrize("kind", sorted(states.TABLES))
def test_completed_is_the_only_terminal_state_and_never_moves(kind: str) -> None:
    assert states.TABLES[kind]["completed"] == frozenset()
    assert [s for s in states.TABLES[kind] if states.is_terminal(s)] == ["completed"]


def test_conclusions_belong_to_completed_only() -> None:
    with pytest.raises(ValueError, match="needs a conclusion"):
        states.require_transition("job", "running", "completed")
    with pytest.raises(ValueError, match="needs a conclusion"):
        states.require_transition("attempt", "running", "completed", "skipped")
    with pytest.raises(ValueError, match="only a completed job has a conclusion"):
        states.require_transition("job", "waiting", "queued", "success")
    with pytest.raises(ValueError, match="unknown job state"):
        states.require_transition("job", "waiting", "exploded")
    states.require_transition("step", "pending", "completed", "skipped")
