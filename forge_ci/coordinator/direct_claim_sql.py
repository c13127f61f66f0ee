"""The direct claim path's statements: written in Core, compiled once per process and dialect
(on first use: no work at import time) and run on the bare cursor (:mod:`.driver_sql`).

See :mod:`forge_ci.coordinator.direct_claims` for what each one does in a claim.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from sqlalchemy import (
    Integer,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

from forge_ci import states
from forge_ci.coordinator.claim_rows import CLAIMED_COLUMNS, STEP_COLUMNS
from forge_ci.coordinator.driver_sql import Prepared, column_values, insert_with_defaults
from forge_ci.db import DriverConnection
from forge_ci.models import (
    Attempt,
    AttemptStep,
    Job,
    Membership,
    Provider,
    ProviderGrant,
    QueueCount,
    QueuedJob,
    Repository,
    Run,
    RunSequence,
    User,
)
from forge_ci.models.base import table_of
from forge_ci.models.queue import leave_statements


@cache
def generic_plans_statement() -> Any:
    """PostgreSQL, the claim transaction's first statement (sent with the look, in its round
    trip): every statement of the transaction runs on its generic plan. psycopg prepares a
    statement run five times on a connection; the server then plans each execution for its
    values (a custom plan) or reuses one plan for all (generic), and in its ``auto`` mode
    weighs the two by estimates that move with the tables' statistics. The take costs about
    5 ms to plan and 0.5 ms to run on either plan, the look 1 ms and 0.3 ms, so a custom plan
    made a claim several times slower, and which one the server chose flipped as autovacuum
    analyzed the queue tables (claim rates swung 3-4x between runs: bench/README.md). The
    claim's statements seek by key and index, whatever the values."""
    return text("SET LOCAL plan_cache_mode = force_generic_plan")


@cache
def look_statement(versioned: bool = False) -> Any:
    """The look (also the SQLite pre-check, whose rows the claim uses while they are true).
    ``versioned`` (SQLite's pre-check): each row also carries ``PRAGMA data_version`` as read
    in the statement's own snapshot (see ``direct_claims.EarlyLook``)."""
    p = table_of(Provider)
    other = table_of(Provider).alias("other_providers")
    a = table_of(Attempt)
    counts = table_of(QueueCount)
    entries = table_of(QueuedJob)
    # The provider's own flags do not depend on the candidate row: uncorrelated subqueries (on
    # the provider found by its credential), so the database computes each once, by index.
    me = select(other.c.id).where(other.c.token_hash == bindparam("provider_hash"))
    replay = (
        select(a.c.id)
        .where(a.c.provider_id == me.scalar_subquery(), a.c.request_id == bindparam("request_id"))
        .scalar_subquery()
    )
    # The provider's attempts cancelled by its own change, by their partial index (the
    # provider's attempts ever cancelled that way; by the state index this read every unended
    # attempt of the forge, and by the provider's index every attempt of its history). Both
    # databases choose the index unasked (tests/forge_ci/coordinator/test_claim_plans.py).
    waiting = (
        select(a.c.id)
        .where(
            a.c.provider_id == me.scalar_subquery(),
            a.c.cancelled_by_provider_change.is_(True),
            a.c.state.in_([literal(states.LEASED), literal(states.RUNNING)]),
        )
        .exists()
    )
    reused = or_(
        select(a.c.id).where(a.c.token_hash == bindparam("digest")).exists(),
        select(other.c.id).where(other.c.token_hash == bindparam("digest")).exists(),
    )
    granted = select(table_of(ProviderGrant).c.repository_id).where(
        table_of(ProviderGrant).c.provider_id == p.c.id
    )

    # The label set's oldest entry (null: none, though the count says queued), one index seek.
    head_at = (
        select(entries.c.queued_at)
        .where(
            entries.c.repository_id == counts.c.repository_id,
            entries.c.labels == counts.c.labels,
        )
        .order_by(entries.c.queued_at)
        .limit(1)
        .scalar_subquery()
    )

    sequences = table_of(RunSequence)
    scoped = p.outerjoin(
        counts,
        and_(counts.c.queued > 0, or_(p.c.scope == "all", counts.c.repository_id.in_(granted))),
    ).outerjoin(sequences, sequences.c.repository_id == counts.c.repository_id)
    version = "(SELECT data_version FROM pragma_data_version())"
    return (
        select(
            *([literal_column(version).label("data_version")] if versioned else []),
            p.c.id,
            p.c.token_hash,
            p.c.state,
            p.c.labels.label("provider_labels"),
            p.c.last_contact_at,
            p.c.egress_policy,
            replay.label("replay"),
            waiting.label("waiting"),
            reused.label("reused"),
            counts.c.repository_id,
            counts.c.labels,
            sequences.c.served_at.label("served"),
            head_at.label("head_at"),
            sequences.c.repository_id.is_not(None).label("has_row"),
        )
        .select_from(scoped)
        .where(p.c.token_hash == bindparam("provider_hash"))
        .with_for_update(read=True, key_share=True, of=p)  # PostgreSQL only
    )


@cache
def wait_statement() -> Any:
    """PostgreSQL: wait for a busy repository's scheduling row."""
    sequences = table_of(RunSequence)
    query = select(sequences.c.repository_id).where(
        sequences.c.repository_id == bindparam("repository_id")
    )
    return query.with_for_update()


@dataclass(frozen=True)
class TakenRun:
    """What the direct path reads of the taken job's run (see ``contexts.SnapshotRun``)."""

    id: int
    number: int
    repository_id: int
    ref: str
    sha: str
    workflow_path: str
    workflow_name: str | None
    requested_by_id: int | None
    requested_by_name: str
    context: dict[str, Any]
    actions: dict[str, Any] | None
    state: str


@dataclass(frozen=True)
class TakenJob:
    """What the direct path reads of the taken job: its own entry of the plan, not the plan."""

    id: int
    key: str
    job_id: str
    name: str
    needs: list[str]
    state: str
    plan_job: dict[str, Any]

    def definition(self) -> dict[str, Any]:
        return self.plan_job


RUN_COLUMNS = tuple(f.name for f in fields(TakenRun))
JOB_COLUMNS = ("id", "key", "job_id", "name", "needs", "state")


def _reserved_id() -> Any:
    """PostgreSQL: the id the attempt will have, taken from its sequence by the take, so that
    the attempt and its steps are inserted in one statement: once per claim that takes a row
    (a claim that then leaves the job to another round leaves a gap)."""
    sequence = func.pg_get_serial_sequence(literal("attempts"), literal("id"))
    return func.nextval(sequence).label("reserved_id")


def take_statement(dialect: str, labels: int) -> Any:
    """The take of ``labels`` label sets from one repository, without a lock (it has no
    scheduling row, or the transaction holds it). On PostgreSQL the row also holds the
    attempt's reserved id."""
    counts = table_of(QueueCount)
    statement = _take(
        counts.c.repository_id == bindparam("repository_id"),
        counts.c.labels.in_([bindparam(f"labels_{i}") for i in range(labels)]),
    )
    if dialect == "postgresql":
        statement = statement.add_columns(_reserved_id())
    return statement


def first_free_take_statement() -> Any:
    """PostgreSQL: the take from the first of several repositories (``repositories``, an array
    in fairness order) whose scheduling row no other claimer holds, and that row locked, in one
    round trip: the rows of the repositories whose counts say work is queued for
    ``label_keys`` (the label sets the provider may take, the same for every repository) are
    locked in that order ``SKIP LOCKED`` until one is had, and only then is that repository's
    head taken, by index seeks (a busy repository costs one probe of its counts, not a take).
    The row names the repository it locked (``locked_repository``) and holds the attempt's
    reserved id, and the take's columns, which are null when the take found nothing there
    (a count out of step with the queue: the caller passes that repository over, knowing it
    holds its lock). No row: each was busy or has nothing queued any more."""
    counts, sequences = table_of(QueueCount), table_of(RunSequence)
    label_keys = bindparam("label_keys", type_=ARRAY(counts.c.labels.type))
    wanted = (
        func.unnest(bindparam("repositories", type_=ARRAY(Integer)))
        .table_valued("repository_id", with_ordinality="ord")
        .render_derived("wanted")
    )
    queued = (
        select(counts.c.repository_id)
        .where(
            counts.c.repository_id == wanted.c.repository_id,
            counts.c.labels == any_(label_keys),
            counts.c.queued > 0,
        )
        .exists()
    )
    free = (
        select(sequences.c.repository_id)
        .select_from(wanted.join(sequences, sequences.c.repository_id == wanted.c.repository_id))
        .where(queued)
        .order_by(wanted.c.ord)
        .limit(1)
        .with_for_update(of=sequences, skip_locked=True)
        .cte("free")
    )
    taken = _take(
        counts.c.repository_id == free.c.repository_id,
        counts.c.labels == any_(label_keys),
    ).lateral("taken")
    return select(
        free.c.repository_id.label("locked_repository"), *taken.c, _reserved_id()
    ).select_from(free.outerjoin(taken, true()))


def _take(repository: Any, labels: Any) -> Any:
    """The oldest head of the label sets ``labels`` selects, in the repository ``repository``
    selects (clauses on ``job_queue_counts``)."""
    jobs, runs, entries = table_of(Job), table_of(Run), table_of(QueuedJob)
    users, memberships, attempts = table_of(User), table_of(Membership), table_of(Attempt)
    counts, others = table_of(QueueCount), table_of(QueuedJob).alias("heads")
    # The head of each of the repository's label sets, by index seek (flat in queue depth),
    # and the oldest of those heads, read by the statement that takes the repository lock (not
    # in the look): a claim that took a head before it cannot make us pass over an older job of
    # another label set. One that commits between this statement's snapshot and its lock left
    # us a taken job: its move finds it no longer queued, and the claim's next round takes
    # again (forge_ci/coordinator/direct_claims.py, ``_left_queue``).
    head = (
        select(others.c.job_id)
        .where(others.c.repository_id == counts.c.repository_id, others.c.labels == counts.c.labels)
        .order_by(others.c.queued_at, others.c.job_id)
        .limit(1)
        .scalar_subquery()
    )
    last_number = (
        select(func.max(attempts.c.number))
        .where(attempts.c.job_id == entries.c.job_id)
        .scalar_subquery()
    )
    return (
        select(
            *(jobs.c[name].label(f"job_{name}") for name in JOB_COLUMNS),
            *(runs.c[name].label(f"run_{name}") for name in RUN_COLUMNS),
            jobs.c.plan.label("plan_job"),
            table_of(Repository).c.owner_id,
            users.c.id.label("user_id"),
            users.c.name.label("user_name"),
            users.c.is_admin,
            users.c.is_active,
            memberships.c.role,
            last_number.label("last_number"),
            entries.c.labels.label("queue_labels"),
            counts.c.repository_id.label("queue_repository"),
        )
        .select_from(counts)
        .join(entries, entries.c.job_id == head)
        .join(jobs, jobs.c.id == entries.c.job_id)
        .join(runs, runs.c.id == jobs.c.run_id)
        .join(table_of(Repository), table_of(Repository).c.id == runs.c.repository_id)
        .outerjoin(users, users.c.id == runs.c.requested_by_id)
        .outerjoin(
            memberships,
            and_(
                memberships.c.repository_id == runs.c.repository_id,
                memberships.c.user_id == runs.c.requested_by_id,
            ),
        )
        .where(repository, labels, counts.c.queued > 0)
        .order_by(entries.c.queued_at, entries.c.job_id)
        .limit(1)
    )


def move_job() -> Any:
    return _to_running(table_of(Job), "job_pk")


def move_run() -> Any:
    return _to_running(table_of(Run), "run_pk")


def _to_running(table: Any, key: str) -> Any:
    """queued -> running of the row ``key`` names, stamped ``moved_at``; ``revision`` grows with
    the shown change, as the ORM's counter does (models/revisions.py)."""
    return (
        update(table)
        .where(table.c.id == bindparam(key), table.c.state == states.QUEUED)
        .values(
            state=states.RUNNING,
            started_at=bindparam("moved_at", type_=table.c.started_at.type),
            revision=table.c.revision + 1,
        )
    )


def mark_served() -> Any:
    """The scheduling row of the repository ``repository_pk`` stamped with the claim's time
    ``moved_at``: its fairness key, ``served_at``, which never goes back (a claim that waited
    for a lock, or a coordinator whose clock is behind, leaves a later stamp standing, as the
    latest attempt's ``claimed_at`` did)."""
    sequences = table_of(RunSequence)
    moved_at = bindparam("moved_at", type_=sequences.c.served_at.type)
    stamp = case(
        (or_(sequences.c.served_at.is_(None), sequences.c.served_at < moved_at), moved_at),
        else_=sequences.c.served_at,
    )
    return (
        update(sequences)
        .where(sequences.c.repository_id == bindparam("repository_pk"))
        .values(served_at=stamp)
    )


def insert_attempt() -> Any:
    attempts = table_of(Attempt)
    return insert_with_defaults(attempts, CLAIMED_COLUMNS).returning(attempts.c.id)


def start_statement(run_queued: bool) -> Any:
    """PostgreSQL: the claim's writes in one round trip, as data-modifying CTEs: the job moves
    queued -> running (``move_job``), its queue entry goes and its count drops (as
    ``models.queue.leave_queue``), its repository is stamped as served (``mark_served``), the
    run moves when ``run_queued`` (``move_run``), and the attempt (with its reserved ``id``)
    and its steps (the arrays ``step_positions``, ``step_ids`` and ``step_names``) are
    inserted, each only if the job moved; the attempt's id is returned (no row: the job had
    left the queue, and nothing was written)."""
    jobs, runs, attempts = table_of(Job), table_of(Run), table_of(Attempt)
    entries, counts = table_of(QueuedJob), table_of(QueueCount)
    moved = move_job().returning(jobs.c.id).cte("moved")
    left = (
        delete(entries)
        .where(entries.c.job_id.in_(select(moved.c.id)))
        .returning(entries.c.repository_id, entries.c.labels)
        .cte("left_queue")
    )
    counted = (
        update(counts)
        .where(counts.c.repository_id == left.c.repository_id, counts.c.labels == left.c.labels)
        .values(queued=counts.c.queued - 1)
        .returning(counts.c.repository_id)
        .cte("counted")
    )
    served = (
        mark_served()
        .where(select(moved.c.id).exists())
        .returning(table_of(RunSequence).c.repository_id)
        .cte("served")
    )
    ctes = [left, counted, served]
    if run_queued:
        ctes.append(
            move_run().where(select(moved.c.id).exists()).returning(runs.c.id).cte("run_moved")
        )
    values = column_values(attempts, ("id", *CLAIMED_COLUMNS))
    values["job_id"] = moved.c.id
    inserted = (
        insert(attempts)
        .from_select(list(values), select(*values.values()).select_from(moved))
        .returning(attempts.c.id)
        .cte("new_attempt")
    )
    ctes.append(_steps_of(inserted))
    return select(inserted.c.id).add_cte(*ctes)


def _steps_of(inserted: Any) -> Any:
    """The CTE inserting the steps of the attempt ``inserted`` returns, from bound arrays."""
    steps = table_of(AttemptStep)
    planned = (
        func.unnest(
            bindparam("step_positions", type_=ARRAY(Integer)),
            bindparam("step_ids", type_=ARRAY(steps.c.step_id.type)),
            bindparam("step_names", type_=ARRAY(steps.c.name.type)),
        )
        .table_valued("position", "step_id", "name")
        .render_derived("planned")
    )
    values = column_values(steps, STEP_COLUMNS)
    values.update(
        attempt_id=inserted.c.id,
        position=planned.c.position,
        step_id=planned.c.step_id,
        name=planned.c.name,
        state=literal(states.PENDING, steps.c.state.type),
    )
    chosen = select(*values.values()).select_from(inserted.join(planned, true()))
    return insert(steps).from_select(list(values), chosen).cte("new_steps")


def leave_statement(index: int) -> Any:
    return leave_statements()[index]


def insert_step() -> Any:
    return insert_with_defaults(table_of(AttemptStep), STEP_COLUMNS)


def touch_statement(columns: tuple[str, ...]) -> Any:
    providers = table_of(Provider)
    values = {name: bindparam(name, type_=providers.c[name].type) for name in columns}
    return update(providers).where(providers.c.id == bindparam("provider_pk")).values(values)


_PREPARED: dict[tuple[Any, ...], Prepared] = {}


def prepared(connection: Connection | DriverConnection, build: Any, *args: Any) -> Prepared:
    """``build(*args)`` compiled for the connection's dialect, once per process."""
    key = (build, connection.dialect.name, args)
    found = _PREPARED.get(key)
    if found is None:
        many = build is insert_step
        found = _PREPARED[key] = Prepared(build(*args), connection.dialect, many=many)
    return found
