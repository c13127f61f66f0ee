"""Templates: splitting text around ${{ }} and rendering it at run time."""

from __future__ import annotations

from typing import Any

import pytest

from forge_ci.workflow.expressions import (
    ExpressionError,
    JobStatus,
    Literal,
    TemplateExpr,
    parse_expression,
    render_template,
    split_template,
)


def sources(text: str) -> list[str | tuple[str, int]]:
    """Literal parts as strings, expressions as (source, offset)."""
    return [
        part if isinstance(part, str) else (part.source, part.offset)
        for part in split_template(text)
    ]


def split_error(text: str, **kwargs: Any) -> ExpressionError:
    with pytest.raises(ExpressionError) as caught:
        split_template(text, **kwargs)
    assert caught.value.is_syntax_error
    assert caught.value.expression == text
    return caught.value


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("", []),
        ("plain text", ["plain text"]),
        ("${{ github.sha }}", [("github.sha", 4)]),
        ("${{github.sha}}", [("github.sha", 3)]),
        ("build-${{ github.sha }}", ["build-", ("github.sha", 10)]),
        ("${{ a }}${{ b }}", [("a", 4), ("b", 12)]),
        ("x ${{ a }} y ${{ b }} z", ["x ", ("a", 6), " y ", ("b", 17), " z"]),
        ("${{ format('}}{0}', 'x') }}", [("format('}}{0}', 'x')", 4)]),
        ("${{ 'it''s }}' }}", [("'it''s }}'", 4)]),
        ("${{ a }}}", [("a", 4), "}"]),
        ("{{ not an expression }} $ {", ["{{ not an expression }} $ {"]),
        ("${{ '${{' }}", [("'${{'", 4)]),
        ("${{\n  a &&\n  b\n}}", [("a &&\n  b", 6)]),
    ],
)
def test_split_template(text: str, parts: list[str | tuple[str, int]]) -> None:
    assert sources(text) == parts
    for part in split_template(text):
        if isinstance(part, TemplateExpr):
            assert text[part.offset : part.offset + len(part.source)] == part.source
            assert part.node == parse_expression(part.source)


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("x ${{ github.sha", 2),
        ("x ${{ 'abc }}", 2),
        ("${{ a }} ${{", 9),
        ("${{ a }", 0),
    ],
)
def test_unclosed_expression_is_an_error_at_its_start(text: str, offset: int) -> None:
    error = split_error(text)
    assert error.kind == "parsing"
    assert error.message.startswith("The expression is not closed.")
    assert error.offset == offset


@pytest.mark.parametrize("text", ["${{}}", "a ${{ }} b", "${{ \n }}"])
def test_empty_expression_is_an_error(text: str) -> None:
    error = split_error(text)
    assert error.message == "An expression was expected"
    assert error.offset == text.index("${{")


def test_errors_inside_an_expression_are_located_in_the_text() -> None:
    text = "echo ${{ github.sha == }}"
    error = split_error(text)
    assert error.message == "Unexpected end of expression: '=='"
    assert text[error.offset : error.offset + 2] == "=="
    assert "Located at position 21 within expression: echo ${{" in str(error)


def test_allowed_contexts_apply_to_every_expression() -> None:
    text = "${{ github.sha }}-${{ secrets.token }}"
    error = split_error(text, allowed_contexts=["github"])
    assert error.message == "Unrecognized named-value: 'secrets'"
    assert error.offset == text.index("secrets")


def test_hashfiles_in_a_template_needs_the_runners_files() -> None:
    parts = split_template("key-${{ hashFiles('**/lock', 'x') }}")
    seen: list[tuple[list[str], bool]] = []

    def files(patterns: list[str], follow: bool) -> str:
        seen.append((patterns, follow))
        return "abc"

    assert render_template(parts, {}, files=files) == "key-abc"
    assert seen == [(["**/lock", "x"], False)]
    with pytest.raises(ExpressionError, match="evaluated by the runner in a step"):
        render_template(parts, {})


CONTEXTS = {
    "github": {"sha": "abc", "event": {"number": 7}, "head_ref": ""},
    "matrix": {"n": 1.5, "flag": True, "list": [1]},
    "env": {"NAME": "${{ github.sha }}"},
}


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("plain", "plain"),
        ("", ""),
        ("${{ github.sha }}", "abc"),
        ("sha=${{ github.sha }}, pr=${{ github.event.number }}", "sha=abc, pr=7"),
        ("[${{ github.head_ref }}]", "[]"),
        ("${{ github.missing }}", ""),
        ("${{ matrix.n }} ${{ matrix.flag }}", "1.5 true"),
        ("list: ${{ matrix.list }}", "list: Array"),
        ("${{ toJSON(matrix.list) }}", "[\n  1\n]"),
        ("${{ env.NAME }}", "${{ github.sha }}"),
    ],
)
def test_render_template(text: str, rendered: str) -> None:
    assert render_template(split_template(text), CONTEXTS) == rendered


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("${{ github.event }}", "A mapping was not expected"),
        ("${{ matrix.list }}", "A sequence was not expected"),
    ],
)
def test_render_refuses_a_whole_value_object_or_array(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        render_template(split_template(text), CONTEXTS)
    assert (caught.value.kind, caught.value.message) == ("evaluation", message)


def test_render_errors_are_located_in_the_expression_source() -> None:
    with pytest.raises(ExpressionError) as caught:
        render_template(split_template("x ${{ format('{0') }}"), CONTEXTS)
    assert caught.value.offset == 0
    assert caught.value.expression == "format('{0')"


def test_render_passes_the_job_status() -> None:
    parts = split_template("${{ failure() }}")
    assert render_template(parts, {}, status=JobStatus.for_step("failure")) == "true"
    with pytest.raises(ExpressionError):
        render_template(parts, {})


def test_render_accepts_hand_made_parts() -> None:
    parts: list[str | TemplateExpr] = ["a", TemplateExpr("null", 0, Literal(0, None)), "b"]
    assert render_template(parts, {}) == "ab"
