"""actionlint's corpora: 1,858 real-world expressions and its syntax test tables.

Real-world expressions must all lex and parse, the 97 that call ``hashFiles`` included (the
runner evaluates it over the workspace).

``expr-syntax-cases.json`` transcribes actionlint's parser and lexer tests. Its parser tables are
GitHub's grammar and are replayed as they are. actionlint's lexer is stricter than GitHub in a
few places (it lints number spellings such as ``0123`` and ``1.e1`` that GitHub reads as
numbers, and it lexes text that must end in ``}}``); for those inputs GitHub's own behaviour,
as GitHub's test data shows it (see test_expr_corpus_languageservices.py), is asserted instead,
listed in ``GITHUB_DIFFERS`` with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from expr_corpus import load_corpus, require_corpus

from forge_ci.workflow.expressions import ExpressionError, called_functions, parse_expression

REALWORLD = "actionlint/derived/realworld-expressions.json"
SYNTAX = "actionlint/derived/expr-syntax-cases.json"

#: Expected count of real-world expressions calling hashFiles.
HASHFILES_EXPRESSIONS = 97

#: Inputs where GitHub disagrees with actionlint: input -> (GitHub accepts it, why).
GITHUB_DIFFERS: dict[str, tuple[bool, str]] = {
    "-0xaf": (False, "GitHub reads numbers as JavaScript's Number(), which refuses a signed hex"),
    "42": (True, "actionlint's lexer wants a closing '}}'; '42' is a number"),
    "1.e1": (True, "Number('1.e1') is 10"),
    "0.": (True, "Number('0.') is 0"),
    "0123": (True, "Number('0123') is 123; actionlint lints the leading zero"),
    "0x0123": (True, "Number('0x0123') is 291"),
    "0x0e1": (True, "Number('0x0e1') is 225"),
    "1e01": (True, "Number('1e01') is 10"),
    "1.0e01": (True, "Number('1.0e01') is 10"),
    "-.0": (True, "Number('-.0') is -0"),
    "0.e1": (True, "Number('0.e1') is 0"),
    "": (True, "GitHub's evaluator reads an empty expression as null; templates refuse ${{ }}"),
}


def test_realworld_expressions_parse() -> None:
    expressions: list[str] = require_corpus(REALWORLD)
    assert len(expressions) == 1858
    hashing: list[str] = []
    for text in expressions:
        node = parse_expression(text)
        if "hashfiles" in {name.lower() for name in called_functions(node)}:
            hashing.append(text)
    assert len(hashing) == HASHFILES_EXPRESSIONS


def _syntax_params() -> list[Any]:
    cases = load_corpus(SYNTAX)
    if not cases:
        return [pytest.param(None, id="corpus-missing")]
    return [pytest.param(case, id=f"{case['what']}: {case['input']!r}") for case in cases]


@pytest.mark.parametrize("case", _syntax_params())
def test_syntax_case(case: dict[str, Any] | None) -> None:
    if case is None:
        require_corpus(SYNTAX)
        return
    text = case["input"]
    expected_valid = case["valid"]
    if text in GITHUB_DIFFERS:
        expected_valid = GITHUB_DIFFERS[text][0]
    try:
        parse_expression(text)
    except ExpressionError as error:
        assert not expected_valid, f"{text!r} should parse: {error}"
        assert error.is_syntax_error
        assert 0 <= error.offset <= len(text)
        return
    assert expected_valid, f"{text!r} should be refused ({case.get('actionlint_error_contains')})"


def test_github_differs_names_real_cases() -> None:
    cases = require_corpus(SYNTAX)
    inputs = {case["input"] for case in cases}
    assert set(GITHUB_DIFFERS) <= inputs
