"""The runner's status-function truth table (actions/runner ConditionFunctionsL0.cs), replayed.

Each case gives the job status seen by a step (null, Success, Failure, Cancelled) and whether
``success()`` / ``failure()`` / ``cancelled()`` / ``always()`` is truthy. Cases that also give an
``action_status`` concern steps inside composite actions, which forge-ci does not run (downloaded
actions are outside its subset); they are left out, and a test pins how many there are (10).
"""

from __future__ import annotations

from typing import Any

import pytest
from expr_corpus import load_corpus, require_corpus

from forge_ci.workflow.expressions import JobStatus, evaluate, is_truthy, parse_expression

CORPUS = "actions-runner/status-functions.json"
#: Cases about composite actions (they give an action_status), left out: forge-ci runs none.
COMPOSITE_CASES = 10


def _params() -> list[Any]:
    data = load_corpus(CORPUS)
    if not data:
        return [pytest.param(None, id="corpus-missing")]
    return [
        pytest.param(case, id=f"{case['expr']} job={case['job_status']}")
        for case in data["cases"]
        if "action_status" not in case
    ]


@pytest.mark.parametrize("case", _params())
def test_status_function(case: dict[str, Any] | None) -> None:
    if case is None:
        require_corpus(CORPUS)
        return
    job_status = case["job_status"]
    status = JobStatus.for_step(None if job_status is None else job_status.lower())
    value = evaluate(parse_expression(case["expr"]), {}, status=status)
    assert is_truthy(value) is case["expected"]


def test_table_covers_every_status_function_and_job_status() -> None:
    cases = require_corpus(CORPUS)["cases"]
    step_cases = [case for case in cases if "action_status" not in case]
    assert len(step_cases) == 16
    assert len(cases) - len(step_cases) == COMPOSITE_CASES
    assert {case["expr"] for case in step_cases} == {
        "success()",
        "failure()",
        "cancelled()",
        "always()",
    }
    assert {case["job_status"] for case in step_cases} == {None, "Success", "Failure", "Cancelled"}
