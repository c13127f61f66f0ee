"""Step states reported by the runner: pending -> running -> completed, strictly in order.

Rules (every change goes through :func:`forge_ci.states.require_transition`):

- a step starts only after every earlier step has completed; so at most one runs at a time;
- success and timed_out need the step to have run; a step that never ran may end skipped (its
  condition was false), cancelled, or failure (its condition could not be evaluated);
- repeating a report is acknowledged; contradicting an earlier one is a conflict;
- when the attempt ends, running steps are recorded as interrupted and pending ones skipped.

A completed report may carry the step's annotations and summary: stored masked, once (a
repeated report changes nothing).

A job succeeds only if every step succeeded, was skipped by its condition, or failed while
``continue-on-error`` was true (:func:`success_refusal`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.coordinator.errors import StepConflict, UnknownStep
from forge_ci.models import Attempt, AttemptAnnotation, AttemptStep
from forge_ci.protocol import StepRequest

#: Conclusions a step may reach without having run.
WITHOUT_RUNNING = frozenset({states.SKIPPED, states.CANCELLED, states.FAILURE})
#: Step conclusions that ``continue-on-error`` forgives.
FORGIVABLE = frozenset({states.FAILURE, states.TIMED_OUT})


def _find(attempt: Attempt, step_id: str) -> AttemptStep:
    for step in attempt.steps:
        if step.step_id == step_id:
            return step
    raise UnknownStep(f"step {step_id!r} is not a step of this job")


def _unfinished_before(attempt: Attempt, step: AttemptStep) -> AttemptStep | None:
    for earlier in attempt.steps:
        if earlier.position >= step.position:
            return None
        if earlier.state != states.COMPLETED:
            return earlier
    return None


def report_step(
    session: Session,
    attempt: Attempt,
    request: StepRequest,
    now: datetime,
    mask: Callable[[str], str] | None = None,
) -> None:
    """Apply one step report to a running attempt (the caller holds its lock).

    A completed report's annotations and summary are stored through ``mask`` (the attempt's
    masker); without one (no credential) they are not stored at all.
    """
    step = _find(attempt, request.step_id)
    exit_code = None if request.exit_code < 0 else request.exit_code
    if request.state == states.RUNNING:
        if step.state == states.RUNNING:
            return
        if step.state == states.COMPLETED:
            raise StepConflict(f"step {step.step_id} already completed ({step.conclusion})")
        blocking = _unfinished_before(attempt, step)
        if blocking is not None:
            raise StepConflict(
                f"step {step.step_id} cannot start before step {blocking.step_id} has ended"
            )
        states.require_transition("step", step.state, states.RUNNING)
        step.state = states.RUNNING
        step.started_at = now
        return
    conclusion = request.conclusion
    if step.state == states.COMPLETED:
        same = (
            step.conclusion == conclusion
            and step.exit_code == exit_code
            and step.continue_on_error == request.continue_on_error
        )
        if same:
            return
        raise StepConflict(
            f"step {step.step_id} already completed ({step.conclusion}); "
            f"it cannot become {conclusion}"
        )
    blocking = _unfinished_before(attempt, step)
    if blocking is not None:
        raise StepConflict(
            f"step {step.step_id} cannot end before step {blocking.step_id} has ended"
        )
    if step.state == states.PENDING and conclusion not in WITHOUT_RUNNING:
        raise StepConflict(f"step {step.step_id} never started, so it cannot end with {conclusion}")
    states.require_transition("step", step.state, states.COMPLETED, conclusion)
    step.state = states.COMPLETED
    step.conclusion = conclusion
    step.exit_code = exit_code
    step.continue_on_error = request.continue_on_error
    step.completed_at = now
    if mask is not None:
        _keep_effects(session, attempt, step, request, mask)


def _keep_effects(
    session: Session,
    attempt: Attempt,
    step: AttemptStep,
    request: StepRequest,
    mask: Callable[[str], str],
) -> None:
    if request.summary:
        step.summary = mask(request.summary)
    if not request.annotations:
        return
    position = (
        session.scalar(
            select(func.count())
            .select_from(AttemptAnnotation)
            .where(AttemptAnnotation.attempt_id == attempt.id)
        )
        or 0
    )
    for offset, item in enumerate(request.annotations):
        session.add(
            AttemptAnnotation(
                attempt_id=attempt.id,
                position=position + offset,
                step_id=step.step_id,
                level=item.level,
                message=mask(item.message),
                file=mask(item.file),
                title=mask(item.title),
                line=item.line,
                end_line=item.end_line,
                col=item.col,
                end_column=item.end_column,
            )
        )


def success_refusal(attempt: Attempt) -> str | None:
    """Why the attempt may not be recorded as a success, or None when it may."""
    for step in attempt.steps:
        if step.state != states.COMPLETED:
            return f"step {step.step_id} did not finish"
        if step.conclusion in (states.SUCCESS, states.SKIPPED):
            continue
        if step.continue_on_error and step.conclusion in FORGIVABLE:
            continue
        return f"step {step.step_id} ended with {step.conclusion}"
    return None


def finalize_steps(attempt: Attempt, conclusion: str, now: datetime) -> None:
    """The attempt ended: interrupted steps end with it, steps that never ran are skipped."""
    for step in attempt.steps:
        if step.state == states.RUNNING:
            ended = states.TIMED_OUT if conclusion == states.TIMED_OUT else states.CANCELLED
            states.require_transition("step", step.state, states.COMPLETED, ended)
            step.state = states.COMPLETED
            step.conclusion = ended
            step.status_reason = f"interrupted: the attempt ended ({conclusion})"
            step.completed_at = now
        elif step.state == states.PENDING:
            states.require_transition("step", step.state, states.COMPLETED, states.SKIPPED)
            step.state = states.COMPLETED
            step.conclusion = states.SKIPPED
            step.status_reason = f"not run: the attempt ended ({conclusion})"
            step.completed_at = now
