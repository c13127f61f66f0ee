"""Job ``if`` conditions, evaluated on the server when a job's dependencies have finished.

A job's condition (``success()`` when the file has none; ``success() && (...)`` when it names no
status function) sees:

    github          the five fields captured at run creation
    needs.<id>      result and outputs of each job it needs directly
    success()       every job before it (its ancestors) succeeded, and the run is not cancelled
    failure()       some ancestor failed (timed out and lost count as failed)
    cancelled()     the run was cancelled
    always()        true

Conclusions map to the four results GitHub expressions know: ``timed_out`` and ``lost`` read as
``failure``. A matrix job's ``needs.<id>.result`` summarizes its legs (any failure -> failure,
else any cancelled -> cancelled, all skipped -> skipped, else success) and its outputs are the
legs' outputs merged in plan order, later legs winning (GitHub leaves that order unspecified;
here it is deterministic).

Cancelling a run cancels its queued jobs at once and asks running ones to stop; a waiting job
whose condition may still be true (``always()``, ``cancelled()``, ``failure()``; see
:func:`may_run_after_cancel`) waits for its dependencies and is then decided as usual, with
``cancelled()`` true: cleanup and notification jobs run, as on GitHub. Cancelling again stops
those too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from forge_ci import states

#: How a conclusion reads in ``needs.<id>.result`` and to the status functions.
RESULT_OF: dict[str, str] = {
    states.SUCCESS: "success",
    states.FAILURE: "failure",
    states.TIMED_OUT: "failure",
    states.LOST: "failure",
    states.CANCELLED: "cancelled",
    states.SKIPPED: "skipped",
}

DEFAULT_CONDITION = "success()"


def may_run_after_cancel(condition: str) -> bool:
    """Whether a job with this ``if`` could still run in a cancelled run: its condition calls
    a status function other than ``success()`` (``always()``, ``cancelled()``, ``failure()``).

    Every other condition carries an implicit or explicit ``success()``, false once the run is
    cancelled, so such a job is cancelled at once. Unparsable conditions never ran before
    either (they fail when evaluated), so they are cancelled too.
    """
    from forge_ci.workflow.expressions import ExpressionError, called_functions, parse_condition

    try:
        node = parse_condition(condition)
    except ExpressionError:
        return False
    return bool(called_functions(node) & {"always", "cancelled", "failure"})


def summarize(conclusions: Iterable[str]) -> str:
    """The ``needs.<id>.result`` of a job from the conclusions of its instances."""
    results = [RESULT_OF[c] for c in conclusions]
    if "failure" in results:
        return "failure"
    if "cancelled" in results:
        return "cancelled"
    if results and all(r == "skipped" for r in results):
        return "skipped"
    return "success"


@dataclass(frozen=True)
class NeedsEntry:
    """What ``needs.<id>`` shows for one job id."""

    result: str
    outputs: dict[str, str]

    def as_context(self) -> dict[str, Any]:
        return {"result": self.result, "outputs": dict(self.outputs)}


@dataclass(frozen=True)
class Decision:
    """Whether a job runs; ``reason`` says why not, ``error`` when the condition failed."""

    run: bool
    reason: str | None = None
    error: str | None = None


def decide(
    condition: str,
    *,
    github: Mapping[str, Any],
    needs: Mapping[str, NeedsEntry],
    ancestor_conclusions: Iterable[str],
    run_cancelled: bool,
) -> Decision:
    """Evaluate a job's condition (see the module docstring)."""
    from forge_ci.workflow.expressions import (
        ExpressionError,
        JobStatus,
        evaluate,
        is_truthy,
        parse_condition,
    )

    status = JobStatus.for_job(
        [RESULT_OF[c] for c in ancestor_conclusions], cancelled=run_cancelled
    )
    from forge_ci.runs.event_payload import queue_contexts

    contexts = queue_contexts(github)
    contexts["needs"] = {name: entry.as_context() for name, entry in needs.items()}
    try:
        value = evaluate(parse_condition(condition), contexts, status=status, expression=condition)
    except ExpressionError as exc:
        return Decision(False, error=f"the job's if condition could not be evaluated: {exc}")
    if is_truthy(value):
        return Decision(True)
    unsuccessful = [
        f"{name} ({entry.result})" for name, entry in needs.items() if entry.result != "success"
    ]
    if condition == DEFAULT_CONDITION and unsuccessful:
        return Decision(False, reason=f"skipped: needs {', '.join(unsuccessful)}")
    if condition == DEFAULT_CONDITION and not status.success():
        return Decision(False, reason="skipped: an earlier job did not succeed")
    return Decision(False, reason=f"skipped: the condition `{condition}` is false")


def forgives(
    value: Any,
    *,
    github: Mapping[str, Any],
    needs: Mapping[str, NeedsEntry],
    matrix: Any,
    strategy: Any,
) -> tuple[bool, str | None]:
    """A job's ``continue-on-error`` from its plan entry: ``True``, or ``{"expr": source}``
    evaluated now (it may read github, needs, matrix and strategy). The second value is why
    an expression could not be evaluated (it then forgives nothing)."""
    if value is True:
        return True, None
    if not isinstance(value, dict) or not isinstance(value.get("expr"), str):
        return False, None
    from forge_ci.workflow.expressions import (
        ExpressionError,
        evaluate,
        is_truthy,
        parse_expression,
    )

    contexts = {
        "github": dict(github),
        "needs": {name: entry.as_context() for name, entry in needs.items()},
        "matrix": matrix,
        "strategy": strategy,
    }
    source = value["expr"]
    try:
        return is_truthy(evaluate(parse_expression(source), contexts, expression=source)), None
    except ExpressionError as exc:
        return False, f"continue-on-error could not be evaluated: {exc}"
