"""Property tests: no input makes the package raise anything but ExpressionError.

Arbitrary text goes into ``parse_expression`` and ``split_template``; whatever parses is
evaluated against arbitrary JSON contexts, with and without a job status, and rendered. Text is
drawn both from all of Unicode and from the language's own pieces, so that most examples get
past the lexer and reach deep parses and evaluations. RecursionError, TypeError, OverflowError
and the like would fail these tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_ci.workflow.expressions import (
    ExpressionError,
    JobStatus,
    called_functions,
    evaluate,
    parse_expression,
    referenced_contexts,
    referenced_paths,
    render_template,
    split_template,
    to_string,
)

NAMES = ["github", "env", "matrix", "a", "B"]
PIECES = [
    *NAMES, "(", ")", "[", "]", ",", ".", "*", "!", "==", "!=", "<", "<=", ">", ">=", "&&",
    "||", " ", "'", "''", "'x'", "'{0}'", "'{'", "'}}'", "0", "1", "-1", ".5", "1e3", "0x1f",
    "NaN", "Infinity", "null", "true", "false", "contains(", "startsWith(", "endsWith(",
    "format(", "join(", "toJSON(", "fromJSON(", "case(", "success()", "failure()",
    "cancelled()", "always()", "hashFiles(", "nosuch(", "'[1,{\"a\":2}]'", "'{\"b\":[]}'",
    "${{", "}}", "=", "&", "|", "@", "\\", "\n", "é", "\U0001f600",
]  # fmt: skip

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(NAMES), children, max_size=4)
    ),
    max_leaves=25,
)
contexts = st.dictionaries(st.sampled_from(NAMES), json_values, max_size=5)
full_contexts = st.fixed_dictionaries({name: json_values for name in NAMES})
statuses = st.none() | st.builds(
    JobStatus,
    st.lists(st.sampled_from(["success", "failure", "cancelled", "skipped"]), max_size=3).map(
        tuple
    ),
    st.booleans(),
)
texts = st.text(max_size=80) | st.lists(st.sampled_from(PIECES), max_size=40).map("".join)

ATOMS = [
    *NAMES, "null", "true", "false", "0", "-0.5", "1e3", "0x1f", "NaN", "Infinity", "''", "'x'",
    "'X'", "'{0}{1}'", "'{{'", "'[1,{\"a\":null}]'", "'{\"a\":{\"b\":[2]}}'", "'7'", "' 7 '",
]  # fmt: skip
CALLS = [
    "contains({0}, {1})", "startsWith({0}, {1})", "endsWith({0}, {1})", "format({0})",
    "format({0}, {1})", "format({0}, {1}, {2})", "join({0})", "join({0}, {1})", "toJSON({0})",
    "fromJSON({0})", "case({0}, {1}, {2})", "success()", "failure()", "cancelled()", "always()",
]  # fmt: skip
OPERATORS = ["==", "!=", "<", "<=", ">", ">=", "&&", "||"]


def _compound(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda x: f"!{x}"),
        st.tuples(inner, st.sampled_from([".a", ".b", ".*", "[*]", "[0]", "['A']"])).map(
            lambda t: f"({t[0]}){t[1]}"
        ),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(st.sampled_from(CALLS), inner, inner, inner).map(
            lambda t: t[0].format(t[1], t[2], t[3])
        ),
    )


#: Expressions that are valid by construction, so that evaluation gets exercised in depth.
expressions = st.recursive(st.sampled_from(ATOMS), _compound, max_leaves=30)


def _exercise(text: str, values: dict[str, Any], status: JobStatus | None) -> None:
    try:
        node = parse_expression(text)
    except ExpressionError:
        pass
    else:
        referenced_contexts(node)
        referenced_paths(node)
        called_functions(node)
        try:
            to_string(evaluate(node, values, status=status, expression=text))
        except ExpressionError:
            pass
    try:
        parts = split_template(text)
    except ExpressionError:
        return
    try:
        render_template(parts, values, status=status)
    except ExpressionError:
        pass


@SETTINGS
@given(texts, contexts, statuses)
def test_only_expression_errors_escape(
    text: str, values: dict[str, Any], status: JobStatus | None
) -> None:
    _exercise(text, values, status)


@SETTINGS
@given(texts, contexts, statuses)
def test_only_expression_errors_escape_from_templates(
    text: str, values: dict[str, Any], status: JobStatus | None
) -> None:
    _exercise("lead ${{ " + text + " }} tail", values, status)


@SETTINGS
@given(expressions, full_contexts, statuses)
def test_valid_expressions_evaluate_or_fail_cleanly(
    text: str, values: dict[str, Any], status: JobStatus | None
) -> None:
    try:
        node = parse_expression(text)
    except ExpressionError as error:
        # Only the nesting limit refuses an expression built from the grammar.
        assert error.message.startswith("Exceeded max expression depth"), str(error)
        return
    try:
        to_string(evaluate(node, values, status=status, expression=text))
    except ExpressionError as error:
        assert error.kind == "evaluation"
        assert 0 <= error.offset < len(text)


@SETTINGS
@given(st.lists(st.sampled_from(["(", "!", "[", "a.", "f(", "fromJSON(", "a[", " "]), min_size=40))
def test_deep_nesting_never_overflows_the_stack(openers: list[str]) -> None:
    text = "".join(openers) * 20 + "1"
    try:
        parse_expression(text)
    except ExpressionError:
        pass


def test_error_offsets_stay_inside_the_text() -> None:
    @SETTINGS
    @given(texts)
    def check(text: str) -> None:
        try:
            parse_expression(text)
        except ExpressionError as error:
            assert error.is_syntax_error
            assert 0 <= error.offset <= len(text)

    check()
