"""The lifecycle of runs, jobs, attempts and steps: one table of allowed transitions each.

State (where a thing is in its life) and conclusion (how it ended) are separate. Only the
``completed`` state has a conclusion, and completed things never move again::

    run:      queued ──► running ──► completed
                 └──────────────────────┘
    job:      waiting ──► queued ◄──► running ──► completed
                 └───────────┴───────────────────────┘  (skipped / cancelled before running;
                                                         back to queued: the attempt never started)
    attempt:  leased ──► running ──► completed
                 └──────────────────────┘               (lost / cancelled before starting)
    step:     pending ──► running ──► completed
                 └──────────────────────┘               (skipped by its condition, cancelled)

Every state change in the code goes through :func:`require_transition`, and the tests check
these tables themselves, so a state added and forgotten fails.
"""

from __future__ import annotations

from typing import Final

from forge_ci.errors import Conflict

# --- Conclusions ------------------------------------------------------------------------------

SUCCESS: Final = "success"
FAILURE: Final = "failure"
CANCELLED: Final = "cancelled"
SKIPPED: Final = "skipped"
TIMED_OUT: Final = "timed_out"
LOST: Final = "lost"

CONCLUSIONS: Final = frozenset({SUCCESS, FAILURE, CANCELLED, SKIPPED, TIMED_OUT, LOST})
#: Conclusions that count as "the dependency did not succeed" for `needs`.
UNSUCCESSFUL: Final = frozenset({FAILURE, CANCELLED, TIMED_OUT, LOST})

# --- States -----------------------------------------------------------------------------------

#: A job whose ``needs`` have not all finished.
WAITING: Final = "waiting"
#: A run or job ready to be claimed.
QUEUED: Final = "queued"
#: An attempt claimed by a provider, not yet started by its runner.
LEASED: Final = "leased"
#: A step the runner has not reached yet.
PENDING: Final = "pending"
RUNNING: Final = "running"
COMPLETED: Final = "completed"

RUN_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    QUEUED: frozenset({RUNNING, COMPLETED}),
    RUNNING: frozenset({COMPLETED}),
    COMPLETED: frozenset(),
}

JOB_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    WAITING: frozenset({QUEUED, COMPLETED}),
    QUEUED: frozenset({RUNNING, COMPLETED}),
    # running -> queued only when the job's attempt never started (no runner called `start`
    # within the start window, so none of its code ran): the job waits for a new attempt
    # (forge_ci/coordinator/attempts.py bounds how often). Work that started and was lost is
    # `lost`, never retried behind the user's back.
    RUNNING: frozenset({QUEUED, COMPLETED}),
    COMPLETED: frozenset(),
}

ATTEMPT_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    LEASED: frozenset({RUNNING, COMPLETED}),
    RUNNING: frozenset({COMPLETED}),
    COMPLETED: frozenset(),
}

STEP_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    PENDING: frozenset({RUNNING, COMPLETED}),
    RUNNING: frozenset({COMPLETED}),
    COMPLETED: frozenset(),
}

#: Which conclusions each kind may end with.
ALLOWED_CONCLUSIONS: Final[dict[str, frozenset[str]]] = {
    "run": CONCLUSIONS,
    "job": CONCLUSIONS,
    "attempt": frozenset({SUCCESS, FAILURE, CANCELLED, TIMED_OUT, LOST}),
    "step": frozenset({SUCCESS, FAILURE, CANCELLED, SKIPPED, TIMED_OUT}),
}

TABLES: Final[dict[str, dict[str, frozenset[str]]]] = {
    "run": RUN_TRANSITIONS,
    "job": JOB_TRANSITIONS,
    "attempt": ATTEMPT_TRANSITIONS,
    "step": STEP_TRANSITIONS,
}


def is_terminal(state: str) -> bool:
    return state == COMPLETED


def require_transition(kind: str, current: str, new: str, conclusion: str | None = None) -> None:
    """Raise Conflict unless ``kind`` may move from ``current`` to ``new`` (with ``conclusion``).

    Staying in the same non-terminal state is allowed (idempotent repeats); a completed thing
    never changes, not even to the same state with another conclusion.
    """
    table = TABLES[kind]
    if current not in table or new not in table:
        raise ValueError(f"unknown {kind} state {current!r} or {new!r}")
    if current == new and not is_terminal(current):
        return
    if new not in table[current]:
        raise Conflict(f"a {current} {kind} cannot become {new}")
    if new == COMPLETED:
        if conclusion not in ALLOWED_CONCLUSIONS[kind]:
            raise ValueError(f"a completed {kind} needs a conclusion, not {conclusion!r}")
    elif conclusion is not None:
        raise ValueError(f"only a completed {kind} has a conclusion")
