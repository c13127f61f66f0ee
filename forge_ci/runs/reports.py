"""What a run's steps reported beside their logs: annotations and step summaries.

``::error``/``::warning``/``::notice`` annotations and ``$GITHUB_STEP_SUMMARY`` texts are
stored per attempt (masked, by the coordinator); a run shows those of each job's latest
attempt. A summary is Markdown on GitHub; forge-ci shows it as plain text, never as HTML.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.models import AttemptAnnotation, AttemptStep
from forge_ci.runs.details import RunDetails


@dataclass(frozen=True)
class AnnotationView:
    job_id: int
    job_name: str
    step_id: str
    step_name: str
    level: str
    message: str
    file: str
    title: str
    line: int
    col: int

    @property
    def place(self) -> str:
        """``file:line:col`` as far as it is known."""
        if not self.file:
            return ""
        parts = [self.file]
        if self.line:
            parts.append(str(self.line))
            if self.col:
                parts.append(str(self.col))
        return ":".join(parts)


@dataclass(frozen=True)
class SummaryView:
    job_id: int
    job_name: str
    step_id: str
    step_name: str
    text: str


@dataclass(frozen=True)
class RunReports:
    annotations: list[AnnotationView]
    summaries: list[SummaryView]

    def for_job(self, job_id: int) -> RunReports:
        return RunReports(
            [item for item in self.annotations if item.job_id == job_id],
            [item for item in self.summaries if item.job_id == job_id],
        )


def run_reports(session: Session, details: RunDetails) -> RunReports:
    """The annotations and summaries of the latest attempt of each job of ``details``."""
    jobs = {}
    for job in details.jobs:
        attempt = job.latest_attempt
        if attempt is not None:
            jobs[attempt.id] = job
    if not jobs:
        return RunReports([], [])
    names: dict[tuple[int, str], str] = {}
    summaries: list[SummaryView] = []
    rows = session.execute(
        select(AttemptStep.attempt_id, AttemptStep.step_id, AttemptStep.name, AttemptStep.summary)
        .where(AttemptStep.attempt_id.in_(jobs))
        .order_by(AttemptStep.attempt_id, AttemptStep.position)
    )
    for attempt_id, step_id, name, summary in rows:
        names[(attempt_id, step_id)] = name
        if summary:
            job = jobs[attempt_id]
            summaries.append(SummaryView(job.id, job.name, step_id, name, summary))
    annotations = []
    for row in session.scalars(
        select(AttemptAnnotation)
        .where(AttemptAnnotation.attempt_id.in_(jobs))
        .order_by(AttemptAnnotation.attempt_id, AttemptAnnotation.position)
    ):
        job = jobs[row.attempt_id]
        annotations.append(
            AnnotationView(
                job.id,
                job.name,
                row.step_id,
                names.get((row.attempt_id, row.step_id), row.step_id),
                row.level,
                row.message,
                row.file,
                row.title,
                row.line,
                row.col,
            )
        )
    order = {job.id: index for index, job in enumerate(details.jobs)}
    annotations.sort(key=lambda item: order[item.job_id])
    summaries.sort(key=lambda item: order[item.job_id])
    return RunReports(annotations, summaries)
