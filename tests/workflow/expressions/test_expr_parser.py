"""Parsing: precedence, accesses, calls, the limits, and where errors point."""

from __future__ import annotations

import pickle

import pytest

from forge_ci.workflow.expressions import (
    MAX_DEPTH,
    Call,
    Compare,
    ContextRef,
    ExpressionError,
    Index,
    Literal,
    Logical,
    Node,
    Not,
    Wildcard,
    evaluate,
    parse_expression,
)


def show(node: Node | Wildcard) -> str:
    """A compact S-expression of a tree, to compare shapes."""
    if isinstance(node, Literal):
        return repr(node.value)
    if isinstance(node, ContextRef):
        return node.name
    if isinstance(node, Wildcard):
        return "*"
    if isinstance(node, Index):
        return f"(idx {show(node.target)} {show(node.index)})"
    if isinstance(node, Not):
        return f"(! {show(node.operand)})"
    if isinstance(node, Compare):
        return f"({node.operator} {show(node.left)} {show(node.right)})"
    if isinstance(node, Logical):
        return f"({node.operator} {' '.join(show(each) for each in node.operands)})"
    assert isinstance(node, Call)
    return f"({node.name} {' '.join(show(arg) for arg in node.args)})".replace(" )", ")")


def tree(text: str) -> str:
    return show(parse_expression(text))


def parse_error(text: str, **kwargs: object) -> ExpressionError:
    with pytest.raises(ExpressionError) as caught:
        parse_expression(text, **kwargs)  # type: ignore[arg-type]
    assert caught.value.is_syntax_error
    return caught.value


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("a || b && c", "(|| a (&& b c))"),
        ("a && b || c", "(|| (&& a b) c)"),
        ("a == b && c != d", "(&& (== a b) (!= c d))"),
        ("a < b == c >= d", "(== (< a b) (>= c d))"),
        ("a < b < c", "(< (< a b) c)"),
        ("a == b == c", "(== (== a b) c)"),
        ("!a == b", "(== (! a) b)"),
        ("!a < b", "(< (! a) b)"),
        ("!!a", "(! (! a))"),
        ("!a.b", "(! (idx a 'b'))"),
        ("(a || b) && c", "(&& (|| a b) c)"),
        ("a || b || c", "(|| a b c)"),
        ("(a || b) || c", "(|| a b c)"),
        ("a || (b || c)", "(|| a b c)"),
        ("a || (b && c)", "(|| a (&& b c))"),
    ],
)
def test_precedence_and_associativity(text: str, shape: str) -> None:
    assert tree(text) == shape


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("a.b", "(idx a 'b')"),
        ("a['b']", "(idx a 'b')"),
        ("a[0]", "(idx a 0.0)"),
        ("a[b.c]", "(idx a (idx b 'c'))"),
        ("a.*", "(idx a *)"),
        ("a[*]", "(idx a *)"),
        ("a.*.name", "(idx (idx a *) 'name')"),
        ("a.b-c.d_e", "(idx (idx a 'b-c') 'd_e')"),
        ("a.true.null", "(idx (idx a 'true') 'null')"),
        ("fromJSON('[]')[0]", "(idx (fromJSON '[]') 0.0)"),
        ("(a).b", "(idx a 'b')"),
        ("(a || b)['c']", "(idx (|| a b) 'c')"),
    ],
)
def test_property_and_index_access(text: str, shape: str) -> None:
    assert tree(text) == shape


def test_dotted_records_how_an_access_was_written() -> None:
    dotted = parse_expression("a.b")
    indexed = parse_expression("a['b']")
    assert isinstance(dotted, Index) and dotted.dotted
    assert isinstance(indexed, Index) and not indexed.dotted


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("'abc'.length", 5, "Unexpected symbol: '.length'"),
        ("1[0]", 1, "Unexpected symbol: '['"),
        ("true.x", 4, "Unexpected symbol: '.x'"),
        ("a.1", 2, "Unexpected symbol: '1'"),
        ("a.(", 2, "Unexpected symbol: '('"),
        ("a.", 1, "Unexpected end of expression: '.'"),
        ("a[", 1, "Unexpected end of expression: '['"),
        ("a[0", 2, "Unexpected end of expression: '0'"),
        ("a[0)", 3, "Unexpected symbol: ')'"),
        ("(a", 1, "Unexpected end of expression: 'a'"),
        ("(a]", 2, "Unexpected symbol: ']'"),
        ("a b", 2, "Unexpected symbol: 'b'"),
        ("1 <", 2, "Unexpected end of expression: '<'"),
        ("== 1", 0, "Unexpected symbol: '=='"),
        ("!", 0, "Unexpected end of expression: '!'"),
        ("'a' 'b'", 4, "Unexpected symbol: 'b'"),
        ("()", 1, "Unexpected symbol: ')'"),
    ],
)
def test_syntax_errors_point_at_the_token(text: str, offset: int, message: str) -> None:
    error = parse_error(text)
    assert (error.offset, error.message) == (offset, message)


def test_empty_expression_is_null() -> None:
    assert parse_expression("") == Literal(0, None)
    assert parse_expression("  \n ") == Literal(0, None)


def test_node_offsets() -> None:
    node = parse_expression("a.b == format('{0}', 1)")
    assert isinstance(node, Compare) and node.offset == 4
    assert isinstance(node.left, Index) and node.left.offset == 1
    assert isinstance(node.left.target, ContextRef) and node.left.target.offset == 0
    assert isinstance(node.right, Call) and node.right.offset == 7
    assert [arg.offset for arg in node.right.args] == [14, 21]


def test_function_names_are_case_insensitive_and_canonical() -> None:
    node = parse_expression("TOJSON(fromjson('1'))")
    assert isinstance(node, Call) and node.name == "toJSON"
    assert isinstance(node.args[0], Call) and node.args[0].name == "fromJSON"
    assert tree("StartsWith('a', 'b')") == "(startsWith 'a' 'b')"
    assert tree("success()") == "(success)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("contains('a')", "Too few parameters supplied: 'contains'"),
        ("contains('a', 'b', 'c')", "Too many parameters supplied: 'contains'"),
        ("join()", "Too few parameters supplied: 'join'"),
        ("toJSON(1, 2)", "Too many parameters supplied: 'toJSON'"),
        ("success(1)", "Too many parameters supplied: 'success'"),
        ("format()", "Too few parameters supplied: 'format'"),
        ("case(true, 1)", "Too few parameters supplied: 'case'"),
        (
            "case(true, 1, false, 2)",
            "Even number of parameters supplied, requires an odd number of parameters: 'case'",
        ),
    ],
)
def test_function_arity_is_checked_when_parsing(text: str, message: str) -> None:
    error = parse_error(text)
    assert (error.kind, error.message, error.offset) == ("parsing", message, 0)


def test_format_takes_up_to_256_arguments() -> None:
    assert parse_expression("format('x'" + ", 1" * 255 + ")")
    assert parse_error("format('x'" + ", 1" * 256 + ")").message.startswith("Too many")


def test_unknown_function_is_a_parse_error() -> None:
    error = parse_error("true && nosuch(1)")
    assert (error.message, error.offset) == ("Unrecognized function: 'nosuch'", 8)


@pytest.mark.parametrize("spelling", ["hashFiles", "HASHFILES", "hashfiles"])
def test_hashfiles_parses_and_needs_a_file_hasher(spelling: str) -> None:
    node = parse_expression(f"format('{{0}}', {spelling}('--follow-symbolic-links', '*.lock'))")
    calls: list[tuple[list[str], bool]] = []
    assert evaluate(node, {}, files=lambda p, f: calls.append((p, f)) or "d1") == "d1"
    assert calls == [(["*.lock"], True)]
    with pytest.raises(ExpressionError, match="cannot be used here") as error:
        evaluate(node, {})
    assert error.value.offset == 14
    bad = parse_expression("hashFiles('--nofollow', 'x')")
    with pytest.raises(ExpressionError, match="Invalid glob option --nofollow"):
        evaluate(bad, {}, files=lambda p, f: "")
    assert parse_error("hashFiles()").message == "Too few parameters supplied: 'hashFiles'"


def test_trailing_comma_in_call_is_refused() -> None:
    error = parse_error("contains('a', 'b',)")
    assert (error.message, error.offset) == ("Unexpected symbol: ')'", 18)
    assert parse_error("contains('a',,'b')").message == "Unexpected symbol: ','"


def test_allowed_contexts_restrict_names_case_insensitively() -> None:
    allowed = ["github", "Matrix"]
    assert tree("GITHUB.sha == matrix.os") == "(== (idx GITHUB 'sha') (idx matrix 'os'))"
    assert parse_expression("github.sha", allowed_contexts=allowed)
    assert parse_expression("MATRIX.os", allowed_contexts=allowed)
    error = parse_error("github.sha == secrets.token", allowed_contexts=allowed)
    assert (error.message, error.offset) == ("Unrecognized named-value: 'secrets'", 14)
    assert parse_error("env", allowed_contexts=[]).message == "Unrecognized named-value: 'env'"


def test_allowed_contexts_do_not_apply_to_property_names_or_functions() -> None:
    assert parse_expression("github.secrets", allowed_contexts=["github"])
    assert parse_expression("toJSON(github)", allowed_contexts=["github"])


def _nested_not(count: int) -> str:
    return "!" * count + "true"


def test_depth_limit_on_unary_chains() -> None:
    assert parse_expression(_nested_not(MAX_DEPTH - 1))
    error = parse_error(_nested_not(MAX_DEPTH))
    assert error.message == f"Exceeded max expression depth {MAX_DEPTH}"


def test_depth_limit_on_property_chains() -> None:
    assert parse_expression("a" + ".b" * (MAX_DEPTH - 1))
    assert parse_error("a" + ".b" * MAX_DEPTH).message.startswith("Exceeded max expression depth")


def test_depth_limit_on_nested_groups() -> None:
    assert parse_expression("(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1))
    error = parse_error("(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH)
    assert error.message.startswith("Exceeded max expression depth")


def test_depth_limit_on_comparison_chains_counts_the_tree() -> None:
    # Comparisons nest without recursion; GitHub's runner still counts their depth.
    assert parse_expression(" == ".join(["1"] * MAX_DEPTH))
    error = parse_error(" == ".join(["1"] * (MAX_DEPTH + 1)))
    assert error.message.startswith("Exceeded max expression depth")


def test_logical_chains_are_flat_so_long_ones_are_fine() -> None:
    node = parse_expression(" || ".join(["a"] * 500))
    assert isinstance(node, Logical) and len(node.operands) == 500


@pytest.mark.parametrize("opener", ["(", "!", "f(", "a[", "["])
def test_pathological_nesting_is_an_expression_error_not_a_recursion_error(opener: str) -> None:
    error = parse_error(opener * 5000 + "1")
    assert "depth" in error.message or "Unexpected" in error.message


def test_errors_survive_pickling() -> None:
    error = parse_error("1 ==")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.message, copy.offset, copy.expression) == (
        "parsing",
        "Unexpected end of expression: '=='",
        2,
        "1 ==",
    )
    assert str(copy) == str(error)


def test_repeated_texts_share_one_immutable_tree() -> None:
    first = parse_expression("matrix.os == 'linux'")
    assert parse_expression("matrix.os == 'linux'") is first
    with pytest.raises(AttributeError):
        first.offset = 3  # type: ignore[misc]


def test_the_cache_keeps_allowed_contexts_apart_and_never_hides_errors() -> None:
    assert parse_expression("cached.name", allowed_contexts=["cached"])
    for _ in range(2):
        assert parse_error("cached.name", allowed_contexts=["other"]).message == (
            "Unrecognized named-value: 'cached'"
        )
    long_text = "a == '" + "x" * 500 + "'"
    assert parse_expression(long_text) == parse_expression(long_text)
