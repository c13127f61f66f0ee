"""Evaluation: operators, property access, filtered arrays, contexts and JobStatus."""

from __future__ import annotations

from typing import Any

import pytest

from forge_ci.workflow.expressions import (
    ExpressionError,
    FilteredArray,
    JobStatus,
    evaluate,
    parse_expression,
)

GITHUB: dict[str, Any] = {
    "event_name": "push",
    "ref": "refs/heads/main",
    "sha": "0123abcd",
    "event": {
        "commits": [{"id": "c1", "author": {"name": "Mona"}}, {"id": "c2", "author": {}}],
        "labels": [{"name": "bug"}, {"name": "docs"}],
        "count": 3,
    },
}


def ev(text: str, contexts: dict[str, Any] | None = None, status: JobStatus | None = None) -> Any:
    contexts = {"github": GITHUB} if contexts is None else contexts
    return evaluate(parse_expression(text), contexts, status=status, expression=text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("github.sha", "0123abcd"),
        ("GITHUB.SHA", "0123abcd"),
        ("github['Event_Name']", "push"),
        ("github.event.commits[0].id", "c1"),
        ("github.event.commits[1.9].id", "c2"),
        ("github.event.commits['1'].id", "c2"),
        ("github.event.commits[2]", None),
        ("github.event.commits[-1]", None),
        ("github.event.commits[1].author.name", None),
        ("github.nothing.deeper.still", None),
        ("github.sha.length", None),
        ("github.event.count[0]", None),
        ("github.event.labels.*.name", ["bug", "docs"]),
        ("github.event.labels[*]['NAME']", ["bug", "docs"]),
        ("github.event.commits.*.author.name", ["Mona"]),
        ("github.event.*", [GITHUB["event"]["commits"], GITHUB["event"]["labels"], 3]),
        ("github.sha.*", []),
        ("github.event.labels.*.*", ["bug", "docs"]),
        ("github.event.labels.*[0]", []),
    ],
)
def test_property_access(text: str, expected: object) -> None:
    assert ev(text) == expected


def test_wildcards_make_filtered_arrays() -> None:
    result = ev("github.event.labels.*.name")
    assert isinstance(result, FilteredArray)
    assert ev("fromJSON('[[1,2],[3]]')[*][*]") == [1.0, 2.0, 3.0]


def test_index_of_a_non_collection_is_not_evaluated() -> None:
    assert ev("s[fromJSON('')]", {"s": "text"}) is None
    assert ev("n[fromJSON('')]", {"n": None}) is None
    with pytest.raises(ExpressionError):
        ev("o[fromJSON('')]", {"o": {}})


def test_exact_key_wins_over_case_insensitive_match() -> None:
    assert ev("o.key", {"o": {"KEY": 1, "key": 2}}) == 2
    assert ev("o.Key", {"o": {"KEY": 1, "key": 2}}) == 1


def test_present_null_is_not_missing_under_a_wildcard() -> None:
    assert ev("o.*.v", {"o": [{"v": None}, {}]}) == [None]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 && 'a' && 2", 2.0),
        ("1 && '' && 2", ""),
        ("null || 0 || 'x'", "x"),
        ("null || 0", 0.0),
        ("!''", True),
        ("!github", False),
        ("github.event.count >= 3", True),
        ("github.event.count > '2'", True),
        ("github.ref == 'REFS/HEADS/MAIN'", True),
        ("github.ref != 'refs/heads/main'", False),
        ("github.event <= github.event", True),
        ("github.event < github.event", False),
        ("null == false", True),
        ("'' == 0", True),
    ],
)
def test_operators(text: str, expected: object) -> None:
    assert ev(text) == expected


def test_logical_operators_short_circuit() -> None:
    assert ev("false && fromJSON('')") is False
    assert ev("true || fromJSON('')") is True
    with pytest.raises(ExpressionError):
        ev("true && fromJSON('')")


def test_context_names_are_case_insensitive() -> None:
    assert ev("MATRIX.os", {"matrix": {"os": "linux"}}) == "linux"
    assert ev("matrix.os", {"Matrix": {"os": "linux"}}) == "linux"


def test_unknown_context_at_evaluation_is_an_error() -> None:
    with pytest.raises(ExpressionError) as caught:
        ev("github.sha == secrets.token")
    error = caught.value
    assert (error.kind, error.message, error.offset) == (
        "evaluation",
        "Unrecognized named-value: 'secrets'",
        14,
    )
    assert str(error).endswith("within expression: github.sha == secrets.token")


def test_contexts_may_hold_ints_tuples_and_huge_numbers() -> None:
    contexts = {"c": {"n": 3, "t": ("a", "b"), "big": 10**400}}
    assert ev("c.n == 3.0 && c.t[1] == 'b' && c.big > 1e308", contexts) is True
    assert ev("format('{0}', c.big)", contexts) == "Infinity"


def test_values_that_are_not_json_are_an_evaluation_error() -> None:
    with pytest.raises(ExpressionError) as caught:
        ev("c.s == 1", {"c": {"s": {1}}})
    assert caught.value.kind == "evaluation"
    assert caught.value.offset == 4


def test_literal_values() -> None:
    assert ev("null") is None
    assert ev("'it''s'") == "it's"
    assert ev("0x10") == 16.0
    assert ev("") is None


# -- JobStatus ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("results", "cancelled", "success", "failure"),
    [
        ((), False, True, False),
        (("success", "success"), False, True, False),
        (("success", "failure"), False, False, True),
        (("skipped",), False, False, False),
        (("success", "cancelled"), False, False, False),
        (("failure",), True, False, False),
        ((), True, False, False),
    ],
)
def test_job_status_for_jobs(
    results: tuple[str, ...], cancelled: bool, success: bool, failure: bool
) -> None:
    status = JobStatus.for_job(results, cancelled=cancelled)
    assert ev("success()", status=status) is success
    assert ev("failure()", status=status) is failure
    assert ev("cancelled()", status=status) is cancelled
    assert ev("always()", status=status) is True


@pytest.mark.parametrize(
    ("job_status", "success", "failure", "cancelled"),
    [
        (None, True, False, False),
        ("success", True, False, False),
        ("failure", False, True, False),
        ("cancelled", False, False, True),
    ],
)
def test_job_status_for_steps(
    job_status: str | None, success: bool, failure: bool, cancelled: bool
) -> None:
    status = JobStatus.for_step(job_status)
    assert (status.success(), status.failure(), status.cancelled) == (success, failure, cancelled)


def test_job_status_refuses_unknown_results() -> None:
    with pytest.raises(ValueError, match="unknown job results"):
        JobStatus(("succeeded",))
