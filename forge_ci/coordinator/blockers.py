"""Why a queued job is still waiting: the explanation the run page shows under the job.

The answer follows the claim path (:mod:`forge_ci.coordinator.claims`) from the outside in::

    requester no longer authorized   -> "not authorized" (the claim would cancel the job)
    no provider may serve the repo   -> "no provider for this repository"
    none with every label            -> "no provider with these labels"
    all of those paused              -> "providers paused"
    none in contact for a minute     -> "no recent contact"
    all of them busy                 -> "providers busy"
    otherwise                        -> "waiting for a provider"

It never names a provider, counts them, or says anything about other repositories: readers of
one repository learn only what their own job needs and whether anything could serve it.

The explanations are computed from :class:`ProviderState` rows, one small statement
(:func:`provider_states`) that also tells a polling page whether anything they depend on
moved: a provider's state, labels or access, whether it is busy, and whether its last contact
is recent *now* (so a provider that falls silent shows on the next poll, although nothing was
written). A run page folds those rows into its change token and recomputes the explanations
only when they (or the run's counters) changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    Exists,
    ScalarSelect,
    Select,
    String,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal_column,
    or_,
    select,
)
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.authz import Actor, Role
from forge_ci.coordinator.attempts import Requested, requester_refusal
from forge_ci.coordinator.providers import normalize_job_labels
from forge_ci.models import Attempt, Job, Provider, ProviderGrant, Run, utcnow
from forge_ci.repos import RepositoryAccess, repository_access
from forge_ci.runs.queries import find_run
from forge_ci.workflow.labels import other_os

#: Contact (a claim or a lease renewal) within this long counts as "recent".
RECENT_CONTACT = timedelta(minutes=1)


@dataclass(frozen=True)
class Blocker:
    """A stable ``code`` for scripts and styling, and a sentence for people."""

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class QueuedJob:
    """What an explanation needs of a queued job (a page polls this: no ORM objects)."""

    id: int
    key: str
    runs_on: list[str]


@dataclass(frozen=True)
class ProviderState:
    """What an explanation needs of a provider that may serve the repository, as of ``now``."""

    id: int
    state: str
    #: Normalized labels joined by commas, as stored.
    labels: str
    #: In contact (a claim or a lease renewal) within :data:`RECENT_CONTACT`.
    recent: bool
    #: Has an attempt that has not ended.
    busy: bool

    @property
    def label_set(self) -> frozenset[str]:
        return frozenset(self.labels.split(",")) if self.labels else frozenset()


def provider_states(
    session: Session, access: RepositoryAccess, now: datetime
) -> tuple[ProviderState, ...]:
    """The providers that may serve the repository (readers), by id; one statement."""
    repository = access.require(Role.READ)
    cutoff = now - RECENT_CONTACT
    return tuple(
        ProviderState(key, state, labels, contact is not None and contact >= cutoff, bool(busy))
        for key, state, labels, contact, busy in session.connection().execute(
            _providers_statement(), {"repository_id": repository.id}
        )
    )


@cache
def _providers_statement() -> Select[int, str, str, datetime | None, bool]:
    """Built once: polls run it many times a second."""
    return (
        select(Provider.id, Provider.state, Provider.labels, Provider.last_contact_at, _busy())
        .where(*_serving(bindparam("repository_id")))
        .order_by(Provider.id)
    )


def _serving(repository_id: ColumnExpressionArgument[int]) -> tuple[ColumnElement[bool], ...]:
    """Which providers may serve the repository ``repository_id``."""
    granted = (
        select(ProviderGrant.provider_id)
        .where(ProviderGrant.repository_id == repository_id)
        .correlate_except(ProviderGrant)
    )
    return (
        Provider.state != "revoked",
        or_(Provider.scope == "all", Provider.id.in_(granted)),
    )


def _busy() -> Exists:
    # Naming the live states (rather than "not completed") lets the state index find them; as
    # two equalities, not IN (...), which SQLAlchemy would expand on every execution.
    live = or_(Attempt.state == states.LEASED, Attempt.state == states.RUNNING)
    return exists().where(Attempt.provider_id == Provider.id, live)


#: Separates the providers in :func:`provider_rows`' text (labels cannot contain it).
ROW_SEPARATOR = ";"
_SEPARATOR_SQL: Any = literal_column(f"'{ROW_SEPARATOR}'")


@cache
def provider_rows() -> ScalarSelect[str | None]:
    """What :func:`provider_states` reads, as one text for a change token: each provider's
    ``id/state/labels/recent busy`` (recent: 1 or 0 as of ``:cutoff``, the poll's clock minus
    :data:`RECENT_CONTACT`), joined by :data:`ROW_SEPARATOR` in no particular order
    (:func:`canonical_rows` sorts them); NULL for none. A subquery correlated with ``runs``
    (the run's repository), for statements that select a run (:mod:`forge_ci.coordinator.watch`)."""
    recent = case((Provider.last_contact_at >= bindparam("cutoff"), "1"), else_="0")
    busy = case((_busy(), "1"), else_="0")
    row = cast(Provider.id, String) + "/" + Provider.state + "/" + Provider.labels + "/"
    return (
        # The separator as SQL text, not a value SQLAlchemy would render into it per execution.
        select(func.aggregate_strings(row + recent + busy, _SEPARATOR_SQL))
        .where(*_serving(Run.repository_id))
        .correlate(Run)
        .scalar_subquery()
    )


def canonical_rows(text: str | None) -> str:
    """:func:`provider_rows`' text in one order (each row starts with its provider's id)."""
    return ROW_SEPARATOR.join(sorted(text.split(ROW_SEPARATOR))) if text else ""


def states_of_rows(text: str) -> tuple[ProviderState, ...]:
    """The :func:`provider_states` that :func:`provider_rows`' ``text`` was made from, by id:
    an answer explains the queue from the rows its change token was computed from (a second
    read, on PostgreSQL a later snapshot, could show what another token stands for)."""
    states = []
    for row in text.split(ROW_SEPARATOR) if text else ():
        key, state, rest = row.split("/", 2)
        labels, flags = rest[:-3], rest[-2:]  # ``labels/RB``: labels may hold no ";"
        states.append(ProviderState(int(key), state, labels, flags[0] == "1", flags[1] == "1"))
    return tuple(sorted(states, key=lambda provider: provider.id))


def _labels(job: QueuedJob) -> str:
    return ", ".join(sorted(normalize_job_labels(job.runs_on)))


def queue_blockers(
    session: Session, actor: Actor, full_name: str, number: int, now: datetime | None = None
) -> dict[int, Blocker]:
    """Job id -> why it is queued and not running, for each queued job of the run (readers).

    The run page and ``forge-ci run show`` both say this, so that they never disagree.
    """
    return queue_blockers_in(session, repository_access(session, actor, full_name), number, now)


def queue_blockers_in(
    session: Session, access: RepositoryAccess, number: int, now: datetime | None = None
) -> dict[int, Blocker]:
    """:func:`queue_blockers` in a repository already looked up for this request."""
    return {job.id: blocker for job, blocker in _blocked(session, access, number, now)}


def queue_blockers_by_key(
    session: Session, actor: Actor, full_name: str, number: int, now: datetime | None = None
) -> dict[str, Blocker]:
    """The same as :func:`queue_blockers`, by job key (``build``, ``test (3.12)``)."""
    access = repository_access(session, actor, full_name)
    return {job.key: blocker for job, blocker in _blocked(session, access, number, now)}


def queue_blockers_of(
    session: Session,
    access: RepositoryAccess,
    run: Requested,
    run_id: int,
    providers: tuple[ProviderState, ...],
    now: datetime,
) -> dict[int, Blocker]:
    """:func:`queue_blockers_in` for a run already looked up (``run`` as its counters have it)
    with the :func:`provider_states` read for it at ``now``."""
    access.require(Role.READ)
    return {
        job.id: blocker for job, blocker in _explained(session, access, run, run_id, now, providers)
    }


def _blocked(
    session: Session, access: RepositoryAccess, number: int, now: datetime | None
) -> list[tuple[QueuedJob, Blocker]]:
    run = find_run(session, access.require(Role.READ), number)
    return _explained(session, access, run, run.id, now)


def _explained(
    session: Session,
    access: RepositoryAccess,
    run: Requested,
    run_id: int,
    now: datetime | None,
    providers: tuple[ProviderState, ...] | None = None,
) -> list[tuple[QueuedJob, Blocker]]:
    now = now or utcnow()
    # Only the queued jobs, not the whole run (which may have hundreds).
    queued = [
        QueuedJob(*row)
        for row in session.execute(
            select(Job.id, Job.key, Job.runs_on)
            .where(Job.run_id == run_id, Job.state == states.QUEUED)
            .order_by(Job.position)
        )
    ]
    if not queued:
        return []
    refusal = requester_refusal(session, run)
    if refusal is not None:
        blocker = Blocker("not_authorized", f"Not authorized: {refusal}.")
        return [(job, blocker) for job in queued]
    if providers is None:
        providers = provider_states(session, access, now)
    # Jobs with the same labels wait for the same reason: explain each label set once.
    explained: dict[tuple[str, ...], Blocker] = {}
    result = []
    for job in queued:
        labels = tuple(sorted(job.runs_on))
        if labels not in explained:
            explained[labels] = _explain(job, providers)
        result.append((job, explained[labels]))
    return result


def _explain(job: QueuedJob, providers: tuple[ProviderState, ...]) -> Blocker:
    if not providers:
        return Blocker(
            "no_provider",
            "No provider may run jobs of this repository; a site administrator can give one "
            "access.",
        )
    wanted = normalize_job_labels(job.runs_on)
    matching = [p for p in providers if wanted <= p.label_set]
    if not matching:
        # Labels that no provider of the repository has at all, so that the fix is obvious.
        carried = set().union(*(p.label_set for p in providers))
        missing = ", ".join(sorted(wanted - carried))
        lacking = f"; none has {missing}" if missing else ""
        foreign = sorted(label for label in wanted if other_os(label))
        if foreign:
            return Blocker(
                "no_such_provider",
                f"No provider with the labels {_labels(job)} exists: forge-ci providers run "
                f"Linux containers, and {', '.join(foreign)} selects Windows or macOS. The job "
                "waits until a provider with these labels is registered; the run's other jobs "
                "run meanwhile (those that need this one wait with it).",
            )
        return Blocker(
            "no_matching_labels",
            f"No provider that may run jobs of this repository has every label this job "
            f"needs ({_labels(job)}){lacking}, so it waits until one does. Change the job's "
            f"runs-on to labels a provider has (runs-on: self-hosted), or have the operator "
            f"add the labels to a provider (forge-ci provider labels NAME --labels ...).",
        )
    active = [p for p in matching if p.state == "active"]
    if not active:
        return Blocker("providers_paused", "Every provider with these labels is paused.")
    recent = [p for p in active if p.recent]
    if not recent:
        return Blocker(
            "no_recent_contact",
            "No provider with these labels has been in contact in the last minute.",
        )
    if all(p.busy for p in recent):
        return Blocker("providers_busy", "Every provider with these labels is busy.")
    return Blocker("waiting", "Waiting for a provider to claim it.")
