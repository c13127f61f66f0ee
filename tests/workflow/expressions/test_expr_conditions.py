"""``if:`` conditions: bare or wrapped, implicit success(), and the mixed-text refusal."""

from __future__ import annotations

import pytest

from forge_ci.workflow.expressions import (
    ExpressionError,
    JobStatus,
    evaluate,
    parse_condition,
    parse_expression,
)

FAILED = JobStatus.for_step("failure")
PASSING = JobStatus.for_step("success")
CONTEXTS = {"github": {"ref": "refs/heads/main"}}


def holds(text: str, status: JobStatus) -> bool:
    return bool(evaluate(parse_condition(text), CONTEXTS, status=status))


@pytest.mark.parametrize(
    "text",
    [
        "github.ref == 'refs/heads/main'",
        "${{ github.ref == 'refs/heads/main' }}",
        "  ${{github.ref == 'refs/heads/main'}}  ",
    ],
)
def test_condition_without_status_function_implies_success(text: str) -> None:
    assert holds(text, PASSING) is True
    assert holds(text, FAILED) is False


@pytest.mark.parametrize("text", ["always()", "${{ failure() }}", "!cancelled() && true"])
def test_condition_with_a_status_function_is_kept(text: str) -> None:
    node = parse_condition(text)
    assert node == parse_expression(text.replace("${{", "").replace("}}", "").strip())
    assert holds(text, FAILED) is True


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_condition_is_success(text: str) -> None:
    assert holds(text, PASSING) is True
    assert holds(text, FAILED) is False


def test_status_function_inside_a_string_does_not_count() -> None:
    assert holds("contains('always()', 'always')", FAILED) is False


def test_mixed_text_and_expression_is_refused() -> None:
    text = "${{ github.ref }} == 'refs/heads/main'"
    with pytest.raises(ExpressionError) as caught:
        parse_condition(text)
    assert caught.value.kind == "parsing"
    assert caught.value.message.startswith("An 'if' condition must be one expression")
    assert caught.value.offset == 0


@pytest.mark.parametrize(
    ("text", "offset"),
    [("  github.ref ==", 13), ("  ${{ github.ref == }}", 17), ("  ${{ github.ref", 2)],
)
def test_errors_are_located_in_the_original_text(text: str, offset: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_condition(text)
    assert caught.value.offset == offset
    assert caught.value.expression == text


def test_allowed_contexts_apply() -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_condition("${{ secrets.x }}", allowed_contexts=["github"])
    assert caught.value.message == "Unrecognized named-value: 'secrets'"
