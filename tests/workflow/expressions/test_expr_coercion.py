"""GitHub's value model: truthiness, number and string conversion, loose comparison."""

from __future__ import annotations

import math

import pytest

from forge_ci.workflow.expressions import ExpressionError, is_truthy, number_to_string, to_string
from forge_ci.workflow.expressions.coercion import (
    MISSING,
    fold,
    get_member,
    greater_than,
    kind_of,
    less_than,
    loose_equals,
    parse_number,
    to_number,
)


@pytest.mark.parametrize("value", [None, False, 0, 0.0, -0.0, math.nan, ""])
def test_falsy_values(value: object) -> None:
    assert is_truthy(value) is False


@pytest.mark.parametrize("value", [True, 1, -1, 0.5, math.inf, "0", "false", " ", [], {}])
def test_truthy_values(value: object) -> None:
    assert is_truthy(value) is True


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("", 0.0),
        ("   ", 0.0),
        (" 12 ", 12.0),
        ("\xa012\ufeff", 12.0),
        ("+1.5", 1.5),
        ("-1.5", -1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
        ("0x1F", 31.0),
        ("0X1f", 31.0),
        ("0o17", 15.0),
        ("0b101", 5.0),
        ("0123", 123.0),
        ("Infinity", math.inf),
        ("+Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("1e999", math.inf),
        ("0x" + "f" * 300, math.inf),
    ],
)
def test_parse_number_follows_javascript_number(text: str, number: float) -> None:
    assert parse_number(text) == number


@pytest.mark.parametrize(
    "text",
    ["abc", "1_000", "1,000", "0x", "-0x10", "1 2", "infinity", "Inf", "NaN", "١٢", "1e", "."],
)
def test_parse_number_refusals_are_nan(text: str) -> None:
    assert math.isnan(parse_number(text))


@pytest.mark.parametrize(
    ("value", "number"),
    [(None, 0.0), (True, 1.0), (False, 0.0), (3, 3.0), ("7", 7.0), (10**400, math.inf)],
)
def test_to_number(value: object, number: float) -> None:
    assert to_number(value) == number


@pytest.mark.parametrize("value", [[], {}, "x"])
def test_to_number_of_non_numbers_is_nan(value: object) -> None:
    assert math.isnan(to_number(value))


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1"),
        (-2.0, "-2"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.5, "0.5"),
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.333333333333333"),
        (123456.789, "123456.789"),
        (0.84551240822557006, "0.84551240822557"),
        (123456789012345.0, "123456789012345"),
        (1e15, "1E+15"),
        (1234567890123456789.0, "1.23456789012346E+18"),
        (1e21, "1E+21"),
        (0.0001, "0.0001"),
        (0.00001, "1E-05"),
        (-1.5e-7, "-1.5E-07"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_number_to_string_is_dotnet_g15(number: float, text: str) -> None:
    assert number_to_string(number) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (7, "7"),
        (10**400, "Infinity"),
        ("x", "x"),
        ([1], "Array"),
        ((), "Array"),
        ({"a": 1}, "Object"),
    ],
)
def test_to_string(value: object, text: str) -> None:
    assert to_string(value) == text


def test_values_that_are_not_json_are_refused() -> None:
    with pytest.raises(ExpressionError) as caught:
        kind_of({1, 2})
    assert caught.value.kind == "evaluation"
    assert "set" in caught.value.message


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (None, None),
        (None, 0),
        (None, False),
        (None, ""),
        (True, 1),
        (False, "0"),
        (True, "1"),
        ("abc", "ABC"),
        ("ÜBER", "über"),
        ("ς", "Σ"),
        (1, "1.0"),
        (1, 1.0),
        (16, "0x10"),
        (0, " "),
        (-0.0, 0),
    ],
)
def test_loose_equality_holds(left: object, right: object) -> None:
    assert loose_equals(left, right)
    assert loose_equals(right, left)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (None, "null"),
        (True, "true"),
        (math.nan, math.nan),
        ("NaN", math.nan),
        ([], []),
        ({}, {}),
        ([], 0),
        ({}, "Object"),
        ("a", "b"),
        ("i", "İ"),
        ("ı", "I"),
        ("straße", "STRASSE"),
        (1, "one"),
    ],
)
def test_loose_equality_fails(left: object, right: object) -> None:
    assert not loose_equals(left, right)
    assert not loose_equals(right, left)


def test_objects_and_arrays_equal_only_themselves() -> None:
    shared: dict[str, object] = {"a": 1}
    assert loose_equals(shared, shared)
    assert not loose_equals(shared, {"a": 1})


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (2, 1),
        ("b", "A"),
        ("B", "a"),
        ("10", 9),
        (True, False),
        (1, None),
        (True, 0),
        ("ı", "I"),
    ],
)
def test_greater_than(left: object, right: object) -> None:
    assert greater_than(left, right)
    assert less_than(right, left)
    assert not greater_than(right, left)


@pytest.mark.parametrize(
    ("left", "right"),
    [(math.nan, 1), ("x", 1), ([], []), ({}, 1), ("a", "A"), ("A", "a"), (1, [])],
)
def test_unordered_pairs(left: object, right: object) -> None:
    assert not greater_than(left, right)
    assert not less_than(left, right)


def test_string_order_is_utf16_code_units_like_dotnet() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which sorts before U+FFFF in UTF-16.
    assert less_than("\U0001f600", "\uffff")
    assert greater_than("\uffff", "\U0001f600")
    assert less_than("a", "\U0001f600")


def test_fold_uses_single_character_uppercase() -> None:
    assert fold("abc") == "ABC"
    assert fold("straße") == "STRAßE"
    assert fold("ıi") == "ıI"
    assert fold("ǆ") == "Ǆ"
    assert len(fold("ﬁ\U0001f600")) == 2


def test_get_member_is_case_insensitive_and_prefers_an_exact_match() -> None:
    obj = {"Name": 1, "NAME": 2, "other": None}
    assert get_member(obj, "NAME") == 2
    assert get_member(obj, "name") == 1
    assert get_member(obj, "OTHER") is None
    assert get_member(obj, "missing") is MISSING
