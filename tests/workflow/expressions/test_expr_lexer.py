"""Lexing: how text splits into tokens, and which text is refused where."""

from __future__ import annotations

import math

import pytest

from forge_ci.workflow.expressions import MAX_EXPRESSION_LENGTH, ExpressionError
from forge_ci.workflow.expressions import lexer as lx
from forge_ci.workflow.expressions.lexer import tokenize


def kinds(text: str) -> list[int]:
    return [token[0] for token in tokenize(text)][:-1]


def values(text: str) -> list[object]:
    return [token[3] for token in tokenize(text)][:-1]


def lexing_error(text: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as caught:
        tokenize(text)
    assert caught.value.kind == "lexing"
    return caught.value


def test_tokens_carry_kind_offset_and_lexeme() -> None:
    tokens = tokenize("github.ref == 'refs/heads/main' && !cancelled()")
    assert [(kind, offset, lexeme) for kind, offset, lexeme, _ in tokens] == [
        (lx.IDENTIFIER, 0, "github"),
        (lx.DOT, 6, "."),
        (lx.IDENTIFIER, 7, "ref"),
        (lx.EQUAL, 11, "=="),
        (lx.STRING, 14, "'refs/heads/main'"),
        (lx.AND, 32, "&&"),
        (lx.BANG, 35, "!"),
        (lx.IDENTIFIER, 36, "cancelled"),
        (lx.LPAREN, 45, "("),
        (lx.RPAREN, 46, ")"),
        (lx.EOF, 47, ""),
    ]


def test_operators() -> None:
    assert kinds("a==b!=c<d<=e>f>=g&&h||!i") == [
        lx.IDENTIFIER, lx.EQUAL, lx.IDENTIFIER, lx.NOT_EQUAL, lx.IDENTIFIER, lx.LESS,
        lx.IDENTIFIER, lx.LESS_EQUAL, lx.IDENTIFIER, lx.GREATER, lx.IDENTIFIER,
        lx.GREATER_EQUAL, lx.IDENTIFIER, lx.AND, lx.IDENTIFIER, lx.OR, lx.BANG, lx.IDENTIFIER,
    ]  # fmt: skip


def test_spaces_between_tokens_are_skipped() -> None:
    assert kinds(" \t\r\n1 \n") == [lx.NUMBER]


@pytest.mark.parametrize("space", ["\v", "\f", "\xa0", "\u2028"])
def test_other_whitespace_is_not_a_separator(space: str) -> None:
    # GitHub skips only space, tab, CR and LF between tokens.
    assert lexing_error(f"1 {space} 2").offset == 2


def test_keywords_are_case_sensitive() -> None:
    assert kinds("true false null True NULL") == [
        lx.TRUE, lx.FALSE, lx.NULL, lx.IDENTIFIER, lx.IDENTIFIER,
    ]  # fmt: skip
    assert values("true false null") == [True, False, None]


def test_keywords_after_a_dot_are_property_names() -> None:
    assert kinds("foo.true foo.null foo.NaN") == [lx.IDENTIFIER, lx.DOT, lx.IDENTIFIER] * 3


def test_nan_and_infinity_are_numbers() -> None:
    nan, infinity = values("NaN Infinity")
    assert isinstance(nan, float) and math.isnan(nan)
    assert infinity == math.inf


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0.0),
        ("42", 42.0),
        ("-1", -1.0),
        ("+1", 1.0),
        ("1.5", 1.5),
        (".5", 0.5),
        ("-.5", -0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1E+3", 1000.0),
        ("1.2e-2", 0.012),
        ("0x1F", 31.0),
        ("0xff", 255.0),
        ("0o17", 15.0),
        ("0b101", 5.0),
        ("0123", 123.0),
        ("-Infinity", -math.inf),
        ("+Infinity", math.inf),
    ],
)
def test_numbers(text: str, value: float) -> None:
    assert kinds(text) == [lx.NUMBER]
    assert values(text) == [value]


@pytest.mark.parametrize("text", ["0xZZ", "-0xFF", "1..2", "1-2", "-Inf", "1_000", "1e", "0x", "-"])
def test_malformed_numbers_are_refused_whole(text: str) -> None:
    error = lexing_error(text)
    assert error.message == f"Unexpected symbol: '{text}'"
    assert error.offset == 0


def test_dot_starts_a_number_unless_it_follows_a_name_bracket_paren_or_star() -> None:
    assert kinds("a.b") == [lx.IDENTIFIER, lx.DOT, lx.IDENTIFIER]
    assert kinds("a[0].b") == [
        lx.IDENTIFIER, lx.LBRACKET, lx.NUMBER, lx.RBRACKET, lx.DOT, lx.IDENTIFIER,
    ]  # fmt: skip
    assert kinds("f().b") == [lx.IDENTIFIER, lx.LPAREN, lx.RPAREN, lx.DOT, lx.IDENTIFIER]
    assert kinds("a.*.b") == [lx.IDENTIFIER, lx.DOT, lx.STAR, lx.DOT, lx.IDENTIFIER]
    assert kinds("1 .5") == [lx.NUMBER, lx.NUMBER]
    assert values(".25") == [0.25]


def test_strings_unescape_every_doubled_quote() -> None:
    assert values("'it''s'") == ["it's"]
    assert values("'a''b''c'") == ["a'b'c"]
    assert values("''") == [""]
    assert values("''''") == ["'"]
    assert values("'${{ }}'") == ["${{ }}"]
    assert values("'new\nline'") == ["new\nline"]


def test_unterminated_string_reports_the_rest_of_the_text() -> None:
    error = lexing_error("a == 'abc")
    assert error.offset == 5
    assert error.message == "Unexpected symbol: ''abc'"
    assert "Located at position 6 within expression: a == 'abc" in str(error)


@pytest.mark.parametrize(
    ("text", "offset", "symbol"),
    [
        ("1 = 2", 2, "="),
        ("1 =2", 2, "=2"),
        ("a & b", 2, "&"),
        ("a | b", 2, "|"),
        ("foo.b@r", 4, "b@r"),
        ("1 @abc 2", 2, "@abc"),
        ('"hello"', 0, '"hello"'),
        ("a }} b", 2, "}}"),
        ("héllo", 0, "héllo"),
        ("github/workflow.md", 0, "github/workflow"),
        ("..github", 0, "..github"),
    ],
)
def test_illegal_runs_are_refused(text: str, offset: int, symbol: str) -> None:
    error = lexing_error(text)
    assert error.offset == offset
    assert error.message == f"Unexpected symbol: '{symbol}'"


def test_identifiers_allow_dashes_and_underscores() -> None:
    assert kinds("_a-b_1") == [lx.IDENTIFIER]
    assert tokenize("steps.build-2.outputs")[2][2] == "build-2"


def test_length_limit() -> None:
    longest = "'" + "a" * (MAX_EXPRESSION_LENGTH - 2) + "'"
    assert kinds(longest) == [lx.STRING]
    with pytest.raises(ExpressionError) as caught:
        tokenize(longest + " ")
    assert caught.value.kind == "parsing"
    assert caught.value.message == f"Exceeded max expression length {MAX_EXPRESSION_LENGTH}"
    assert caught.value.offset == MAX_EXPRESSION_LENGTH
