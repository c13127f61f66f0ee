"""Each function: what it accepts, what it refuses, and the memory budget they share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forge_ci.workflow.expressions import (
    MAX_MEMORY_BYTES,
    SUPPORTED_FUNCTIONS,
    ExpressionError,
    JobStatus,
    evaluate,
    parse_expression,
)


def ev(text: str, contexts: dict[str, Any] | None = None, status: JobStatus | None = None) -> Any:
    return evaluate(parse_expression(text), contexts or {}, status=status, expression=text)


def eval_error(text: str, contexts: dict[str, Any] | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError) as caught:
        ev(text, contexts)
    assert caught.value.kind == "evaluation"
    return caught.value


def test_supported_functions() -> None:
    assert SUPPORTED_FUNCTIONS == {
        "contains",
        "startsWith",
        "endsWith",
        "format",
        "join",
        "toJSON",
        "fromJSON",
        "case",
        "hashFiles",
        "success",
        "failure",
        "cancelled",
        "always",
    }


# -- contains / startsWith / endsWith -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("contains('Hello World', 'o w')", True),
        ("contains('Hello', 'xyz')", False),
        ("contains('abc', '')", True),
        ("contains(123, 2)", True),
        ("contains('true', true)", True),
        ("contains(null, '')", True),
        ("contains(labels, 'BUG')", True),
        ("contains(labels, 'feature')", False),
        ("contains(numbers, '2')", True),
        ("contains(numbers, 3)", False),
        ("contains(labels.*, 'bug')", True),
        ("contains(obj, 'a')", False),
        ("contains('Object', obj)", False),
        ("contains(empty, null)", False),
    ],
)
def test_contains(text: str, expected: bool) -> None:
    contexts = {
        "labels": ["bug", "docs"],
        "numbers": [1, 2.0],
        "obj": {"a": 1},
        "empty": [],
    }
    assert ev(text, contexts) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("startsWith('refs/heads/main', 'REFS/heads/')", True),
        ("startsWith('refs/heads/main', 'heads')", False),
        ("startsWith('abc', '')", True),
        ("startsWith(12.5, 12)", True),
        ("startsWith(obj, 'O')", False),
        ("startsWith('Object', obj)", False),
        ("endsWith('file.TXT', '.txt')", True),
        ("endsWith('file.txt', 'file')", False),
        ("endsWith(true, 'UE')", True),
        ("endsWith(obj, 't')", False),
    ],
)
def test_starts_and_ends_with(text: str, expected: bool) -> None:
    assert ev(text, {"obj": {}}) is expected


# -- format ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("format('Hello {0} {1}', 'Mona', 'the Octocat')", "Hello Mona the Octocat"),
        ("format('{0}{0}{1}', 'a', 'b')", "aab"),
        ("format('{{ {0} }}', 'x')", "{ x }"),
        ("format('{{{0}}}', 'x')", "{x}"),
        ("format('{0}', null)", ""),
        ("format('{0}|{1}|{2}', 1.50, true, fromJSON('[1]'))", "1.5|true|Array"),
        ("format('{00}', 'zero')", "zero"),
        ("format('no placeholders')", "no placeholders"),
        ("format(null)", ""),
        ("format(12)", "12"),
    ],
)
def test_format(text: str, expected: str) -> None:
    assert ev(text) == expected


def test_format_evaluates_an_argument_only_when_referenced() -> None:
    assert ev("format('{0}', 'used', fromJSON('not json'))") == "used"


@pytest.mark.parametrize(
    ("fmt", "args"),
    [
        ("{", ""),
        ("}", ""),
        ("{0", ", 1"),
        ("{0}}", ", 1"),
        ("{}", ", 1"),
        ("{x}", ", 1"),
        ("{-1}", ", 1"),
        ("{ 0}", ", 1"),
        ("{256}", ", 1"),
        ("{0:x", ", 1"),
    ],
)
def test_format_refuses_invalid_format_strings(fmt: str, args: str) -> None:
    text = f"format('{fmt}'{args})"
    error = eval_error(text)
    assert error.message == f"The following format string is invalid: {fmt}"
    assert error.offset == 0
    assert str(error).endswith(f"Located at position 1 within expression: {text}")


def test_format_refuses_references_beyond_the_arguments() -> None:
    error = eval_error("format('{0} {2}', 'a', 'b')")
    assert error.message == (
        "The following format string references more arguments than were supplied: {0} {2}"
    )


def test_format_refuses_format_specifiers() -> None:
    error = eval_error("format('{0:yyyy}', 'x')")
    assert (
        error.message == "The format specifiers 'yyyy' are not valid for objects of type 'String'"
    )


def test_format_error_points_at_the_call() -> None:
    error = eval_error("a == format('{0')", {"a": 1})
    assert error.offset == 5


# -- join --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("join(items)", "a,b,c"),
        ("join(items, ' | ')", "a | b | c"),
        ("join(items, 1.0)", "a1b1c"),
        ("join(items, null)", "abc"),
        ("join(items, items)", "a,b,c"),
        ("join(mixed, '-')", "-true-1.5-Array-Object"),
        ("join(one, fromJSON('bad json'))", "only"),
        ("join(objects.*.name, ', ')", "x, y"),
        ("join('text')", "text"),
        ("join(2)", "2"),
        ("join(null)", ""),
        ("join(obj)", ""),
        ("join(empty)", ""),
    ],
)
def test_join(text: str, expected: str) -> None:
    contexts = {
        "items": ["a", "b", "c"],
        "mixed": [None, True, 1.5, [], {}],
        "one": ["only"],
        "objects": [{"name": "x"}, {"name": "y"}],
        "obj": {"a": "b"},
        "empty": [],
    }
    assert ev(text, contexts) == expected


# -- toJSON / fromJSON -------------------------------------------------------------------


def test_to_json_is_indented_by_two_spaces() -> None:
    value = {"a": [1, 2.5, {"b": None}], "c": {}, "d": [], "e": "x", "f": True}
    assert ev("toJSON(v)", {"v": value}) == json.dumps(value, indent=2)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (False, "false"),
        (3.0, "3"),
        (1e20, "1E+20"),
        (-0.0, "0"),
        (float("nan"), "NaN"),
        ('quote " backslash \\ tab \t', '"quote \\" backslash \\\\ tab \\t"'),
        ("ünïcødé", '"ünïcødé"'),
        ("\x01\u2028", '"\\u0001\\u2028"'),
        ((1, "a"), '[\n  1,\n  "a"\n]'),
    ],
)
def test_to_json_values(value: object, expected: str) -> None:
    assert ev("toJSON(v)", {"v": value}) == expected


def test_to_json_of_a_filtered_array() -> None:
    assert ev("toJSON(v.*.n)", {"v": [{"n": 1}, {"n": 2}]}) == "[\n  1,\n  2\n]"


def test_to_json_of_deep_values_does_not_recurse() -> None:
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    text = ev("toJSON(v)", {"v": deep})
    assert json.loads(text) == deep
    for _ in range(3000):
        deep = [deep]
    error = eval_error("toJSON(v)", {"v": deep})
    assert error.message == "The maximum allowed memory size was exceeded"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fromJSON('{\"a\": [1, true, null]}')", {"a": [1.0, True, None]}),
        ("fromJSON('\"s\"')", "s"),
        ("fromJSON(' 12 ')", 12.0),
        ("fromJSON('123456789012345678901234567890')", 1.2345678901234568e29),
        ("fromJSON('{\"A\": 1}').a", 1.0),
        ("fromJSON(true)", True),
        ("fromJSON(1)", 1.0),
    ],
)
def test_from_json(text: str, expected: object) -> None:
    value = ev(text)
    assert value == expected
    assert type(value) is type(expected)


def test_from_json_numbers_are_floats() -> None:
    assert ev("fromJSON('[1, 2]')") == [1.0, 2.0]
    assert all(isinstance(each, float) for each in ev("fromJSON('[1, 2]')"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fromJSON('')", "fromJSON cannot read an empty string as JSON"),
        ("fromJSON('   ')", "fromJSON cannot read an empty string as JSON"),
        ("fromJSON(null)", "fromJSON cannot read an empty string as JSON"),
        ("fromJSON('{')", "Error parsing fromJSON: "),
        ("fromJSON('tru')", "Error parsing fromJSON: "),
        ("fromJSON('[1] [2]')", "Error parsing fromJSON: "),
    ],
)
def test_from_json_refusals(text: str, message: str) -> None:
    assert eval_error(text).message.startswith(message)


def test_from_json_of_deep_nesting_is_an_expression_error() -> None:
    error = eval_error("fromJSON(v)", {"v": "[" * 100_000 + "]" * 100_000})
    assert error.message.startswith("Error parsing fromJSON")


# -- case --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("case(true, 'a', 'b')", "a"),
        ("case(false, 'a', 'b')", "b"),
        ("case(false, 'a', 1 == 1, 'b', 'c')", "b"),
        ("case(x == 'y', fromJSON('[1]'), 'c')", [1.0]),
        ("case(true, 'a', fromJSON('not json'))", "a"),
    ],
)
def test_case(text: str, expected: object) -> None:
    assert ev(text, {"x": "Y"}) == expected


def test_case_predicates_must_be_booleans() -> None:
    error = eval_error("case(true && 'yes', 'a', 'b')")
    assert error.message == "case predicate must evaluate to a boolean value"
    assert error.offset == 10


# -- status functions --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["success", "failure", "cancelled", "always"])
def test_status_functions_need_a_job_status(name: str) -> None:
    error = eval_error(f"{name}()")
    assert error.message == f"{name}() is only available in job and step 'if' conditions"


def test_status_functions_read_the_job_status() -> None:
    failed = JobStatus.for_job(["success", "failure"])
    assert ev("failure() && !success() && always() && !cancelled()", status=failed) is True
    assert ev("success()", status=JobStatus.for_job(["success", "success"])) is True
    assert ev("success()", status=JobStatus.for_job([])) is True


# -- memory ------------------------------------------------------------------------------


def test_memory_budget_refuses_strings_that_grow_too_large() -> None:
    big = "x" * 100_000
    assert len(ev("format('{0}{0}', v)", {"v": big})) == 200_000
    error = eval_error("format('{0}{0}{0}{0}{0}{0}', v)", {"v": big})
    assert error.message == "The maximum allowed memory size was exceeded"
    assert 2 * 6 * len(big) > MAX_MEMORY_BYTES


def test_memory_budget_is_released_when_a_value_is_dropped() -> None:
    big = "x" * 150_000
    # Each comparison holds one large string at a time; together they would exceed the budget.
    text = " && ".join(["format('{0}{0}', v) != ''"] * 10)
    assert ev(text, {"v": big}) is True


def test_memory_budget_applies_to_join() -> None:
    error = eval_error("join(items, v)", {"items": ["a"] * 1000, "v": "y" * 1000})
    assert error.message == "The maximum allowed memory size was exceeded"
