"""What ``GET /-/metrics`` reports, in Prometheus' text exposition format (version 0.0.4).

Everything is read from the database at scrape time, in one read-only transaction, so every
web process reports the same figures and nothing is lost across restarts:

======================================================  =====================================
``forge_ci_runs{state}``                                 runs by state (gauge)
``forge_ci_jobs{state}``                                 jobs by state (gauge)
``forge_ci_queue_jobs{labels}``                          queued jobs per ``runs-on`` label set
``forge_ci_queue_oldest_age_seconds{labels}``            age of the oldest of them
``forge_ci_claim_latency_seconds`` (histogram)           queued -> claimed, every attempt
``forge_ci_log_bytes_ingested_total``                    log bytes stored, every attempt
``forge_ci_provider_last_contact_timestamp_seconds``     per provider (absent: never)
``forge_ci_provider_up{provider,state}``                 1 per registered provider
======================================================  =====================================

A label set is the job's ``runs-on`` labels, sorted and joined with commas.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.models import Attempt, Job, Provider, Run

#: Upper bounds (seconds) of the claim latency histogram's buckets.
CLAIM_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass
class Family:
    """One metric family: its samples as (suffix, labels, value)."""

    name: str
    kind: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> None:
        self.samples.append((suffix, labels, value))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def collect(session: Session, now: datetime | None = None) -> list[Family]:
    """Every metric family, read in ``session`` (a read-only one)."""
    now = now or datetime.now(UTC)
    runs = Family("forge_ci_runs", "gauge", "Workflow runs by state.")
    counts = dict(session.execute(select(Run.state, func.count()).group_by(Run.state)).all())
    for state in (states.QUEUED, states.RUNNING, states.COMPLETED):
        runs.add(counts.get(state, 0), state=state)
    jobs = Family("forge_ci_jobs", "gauge", "Jobs by state.")
    counts = dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
    for state in (states.WAITING, states.QUEUED, states.RUNNING, states.COMPLETED):
        jobs.add(counts.get(state, 0), state=state)

    queue = Family("forge_ci_queue_jobs", "gauge", "Queued jobs per runs-on label set.")
    oldest = Family(
        "forge_ci_queue_oldest_age_seconds",
        "gauge",
        "Seconds the oldest queued job of each runs-on label set has waited.",
    )
    waiting: dict[str, list[datetime]] = defaultdict(list)
    for runs_on, queued_at, created_at in session.execute(
        select(Job.runs_on, Job.queued_at, Job.created_at).where(Job.state == states.QUEUED)
    ):
        waiting[",".join(sorted(runs_on or []))].append(_aware(queued_at or created_at))
    for labels, moments in sorted(waiting.items()):
        queue.add(len(moments), labels=labels)
        oldest.add(max(0.0, (now - min(moments)).total_seconds()), labels=labels)

    latency = Family(
        "forge_ci_claim_latency_seconds",
        "histogram",
        "Seconds from a job being queued to a provider claiming it, over every attempt.",
    )
    delays = sorted(
        max(0.0, (_aware(claimed) - _aware(queued)).total_seconds())
        for claimed, queued in session.execute(
            select(Attempt.claimed_at, Job.queued_at)
            .join(Job, Job.id == Attempt.job_id)
            .where(Job.queued_at.is_not(None))
        )
        if queued is not None
    )
    for bound in CLAIM_BUCKETS:
        latency.add(sum(1 for d in delays if d <= bound), "_bucket", le=_number(bound))
    latency.add(len(delays), "_bucket", le="+Inf")
    latency.add(sum(delays), "_sum")
    latency.add(len(delays), "_count")

    log_bytes = Family(
        "forge_ci_log_bytes_ingested_total", "counter", "Log bytes stored, over every attempt."
    )
    log_bytes.add(session.scalar(select(func.coalesce(func.sum(Attempt.log_bytes), 0))) or 0)

    contact = Family(
        "forge_ci_provider_last_contact_timestamp_seconds",
        "gauge",
        "When each provider last reached the server (Unix time).",
    )
    registered = Family("forge_ci_provider_up", "gauge", "Registered providers, by state.")
    for name, state, last in session.execute(
        select(Provider.name, Provider.state, Provider.last_contact_at).order_by(Provider.name)
    ):
        registered.add(1, provider=name, state=state)
        if last is not None:
            contact.add(_aware(last).timestamp(), provider=name)
    return [runs, jobs, queue, oldest, latency, log_bytes, contact, registered]


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else f"{value:.1f}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(families: Iterable[Family]) -> str:
    """The text exposition format of ``families``."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {family.help}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for suffix, labels, value in family.samples:
            text = ",".join(f'{key}="{_escape(val)}"' for key, val in labels.items())
            number = f"{value:.17g}" if isinstance(value, float) else str(value)
            lines.append(
                f"{family.name}{suffix}{{{text}}} {number}"
                if text
                else f"{family.name}{suffix} {number}"
            )
    return "\n".join(lines) + "\n"
