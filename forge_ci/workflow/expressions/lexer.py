"""Tokens of an expression, split the way GitHub splits them.

GitHub's lexer reads a *run* of characters up to the next boundary (space, bracket, comma, dot or
operator character) and then judges the whole run, so ``foo.b@r`` fails on ``b@r`` and
``1 =2`` on ``=2``; numbers also run through dots. A ``.`` is a property access after a name,
``]``, ``)`` or ``*`` and the start of a number anywhere else (``.5``). Keywords (``true``,
``false``, ``null``, ``NaN``, ``Infinity``) are case-sensitive and are plain names after a dot
(``foo.true``). Each run is matched with one regular expression so that lexing costs a few
operations per token, not per character.
"""

from __future__ import annotations

import math
import re
from typing import Final

from .coercion import parse_number
from .errors import MAX_EXPRESSION_LENGTH, ExpressionError

EOF: Final = 0
LPAREN: Final = 1
RPAREN: Final = 2
LBRACKET: Final = 3
RBRACKET: Final = 4
COMMA: Final = 5
DOT: Final = 6
BANG: Final = 7
NOT_EQUAL: Final = 8
EQUAL: Final = 9
GREATER: Final = 10
GREATER_EQUAL: Final = 11
LESS: Final = 12
LESS_EQUAL: Final = 13
AND: Final = 14
OR: Final = 15
STAR: Final = 16
NUMBER: Final = 17
STRING: Final = 18
IDENTIFIER: Final = 19
TRUE: Final = 20
FALSE: Final = 21
NULL: Final = 22

#: (kind, offset, lexeme, value); value is the number, the unescaped string or the keyword value.
Token = tuple[int, int, str, object]

_SKIPPED: Final = frozenset(" \t\r\n")
_SINGLE: Final = {
    "(": LPAREN,
    ")": RPAREN,
    "[": LBRACKET,
    "]": RBRACKET,
    ",": COMMA,
    "*": STAR,
}
_WITH_EQUALS: Final = {
    "!": (BANG, NOT_EQUAL),
    "<": (LESS, LESS_EQUAL),
    ">": (GREATER, GREATER_EQUAL),
}
_DOUBLED: Final = {"=": EQUAL, "&": AND, "|": OR}
_PROPERTY_DOT_AFTER: Final = frozenset({IDENTIFIER, RBRACKET, RPAREN, STAR})
_KEYWORDS: Final[dict[str, tuple[int, object]]] = {
    "true": (TRUE, True),
    "false": (FALSE, False),
    "null": (NULL, None),
    "NaN": (NUMBER, math.nan),
    "Infinity": (NUMBER, math.inf),
}

# JavaScript's \s, which ends a run (only four of them are skipped as spaces between tokens).
_JS_SPACE_CLASS: Final = r"\t\n\v\f\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_RUN: Final = re.compile(r"[^()\[\],.!<>=&|" + _JS_SPACE_CLASS + "]*")
_NUMBER_RUN: Final = re.compile(r"[^()\[\],!<>=&|" + _JS_SPACE_CLASS + "]*")
_STRING: Final = re.compile(r"'(?:[^']|'')*'")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an EOF token; lexing errors are ExpressionErrors."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(
            "parsing",
            f"Exceeded max expression length {MAX_EXPRESSION_LENGTH}",
            MAX_EXPRESSION_LENGTH,
            text,
        )
    tokens: list[Token] = []
    append = tokens.append
    previous = EOF
    i = 0
    length = len(text)
    while i < length:
        char = text[i]
        if char in _SKIPPED:
            i += 1
            continue
        start = i
        single = _SINGLE.get(char)
        if single is not None:
            i += 1
            append((single, start, char, None))
        elif char == "'":
            match = _STRING.match(text, i)
            if match is None:
                raise _unexpected(text, start, text[start:])
            i = match.end()
            lexeme = match.group()
            append((STRING, start, lexeme, lexeme[1:-1].replace("''", "'")))
        elif char in _WITH_EQUALS:
            plain, with_equals = _WITH_EQUALS[char]
            if text.startswith("=", i + 1):
                i += 2
                append((with_equals, start, text[start:i], None))
            else:
                i += 1
                append((plain, start, char, None))
        elif char in _DOUBLED:
            if not text.startswith(char, i + 1):
                # A lone "=", "&" or "|": GitHub reports the whole run it belongs to.
                raise _unexpected(text, start, text[start : _end_of_run(_RUN, text, i + 1)])
            i += 2
            append((_DOUBLED[char], start, text[start:i], None))
        elif char == "." and previous in _PROPERTY_DOT_AFTER:
            i += 1
            append((DOT, start, char, None))
        elif char in ".+-" or "0" <= char <= "9":
            i = _end_of_run(_NUMBER_RUN, text, i + 1)
            lexeme = text[start:i]
            number = parse_number(lexeme)
            if math.isnan(number):
                raise _unexpected(text, start, lexeme)
            append((NUMBER, start, lexeme, number))
        else:
            i = _end_of_run(_RUN, text, i + 1)
            lexeme = text[start:i]
            keyword = _KEYWORDS.get(lexeme) if previous != DOT else None
            if keyword is not None:
                append((keyword[0], start, lexeme, keyword[1]))
            elif _IDENTIFIER.fullmatch(lexeme):
                append((IDENTIFIER, start, lexeme, None))
            else:
                raise _unexpected(text, start, lexeme)
        previous = tokens[-1][0]
    append((EOF, length, "", None))
    return tokens


def _end_of_run(pattern: re.Pattern[str], text: str, start: int) -> int:
    match = pattern.match(text, start)
    return start if match is None else match.end()


def _unexpected(text: str, offset: int, symbol: str) -> ExpressionError:
    return ExpressionError("lexing", f"Unexpected symbol: '{symbol}'", offset, text)
