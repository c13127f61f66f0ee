"""GitHub's value model: kinds, truthiness, conversions and loose comparison.

Values are JSON-like Python objects: ``None``, ``bool``, ``int``/``float`` (all numbers behave as
IEEE doubles), ``str``, mappings (objects) and lists or tuples (arrays). The rules follow GitHub's
runner (``EvaluationResult.cs``), which follows JavaScript's abstract equality except that strings
compare case-insensitively and objects are never converted to primitives:

* ``null`` and booleans become numbers when compared with anything of another kind;
* a string compared with a number becomes a number (JavaScript's ``Number()``);
* objects and arrays are equal only to themselves;
* ``NaN`` is equal to nothing and ordered with nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import UNLOCATED, ExpressionError

NULL: Final = 0
BOOLEAN: Final = 1
NUMBER: Final = 2
STRING: Final = 3
ARRAY: Final = 4
OBJECT: Final = 5

#: Kind names as GitHub prints them (``format('{0}', fromJSON('[]'))`` is ``Array``).
KIND_NAMES: Final = ("Null", "Boolean", "Number", "String", "Array", "Object")

#: What :func:`get_member` returns for an absent key (None is a present null).
MISSING: Final = object()

# JavaScript's WhiteSpace and LineTerminator, which Number() trims; Python's str.strip() differs.
_JS_SPACE: Final = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_RADIX: Final = {
    "x": (16, re.compile(r"[0-9a-fA-F]+")),
    "o": (8, re.compile(r"[0-7]+")),
    "b": (2, re.compile(r"[01]+")),
}


def kind_of(value: object) -> int:
    """The kind of a value; anything that is not JSON-like is an evaluation error."""
    if value is None:
        return NULL
    # bool before int: True is an int to Python but a boolean to GitHub.
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if isinstance(value, list | tuple):
        return ARRAY
    if isinstance(value, Mapping):
        return OBJECT
    raise ExpressionError(
        "evaluation", f"a value of type {type(value).__name__} is not a JSON value", UNLOCATED
    )


def is_primitive(value: object) -> bool:
    """True for null, booleans, numbers and strings."""
    return kind_of(value) < ARRAY


def is_truthy(value: object) -> bool:
    """GitHub truthiness: ``null``, ``false``, ``0``, ``-0``, ``NaN`` and ``''`` are falsy."""
    kind = kind_of(value)
    if kind == NULL:
        return False
    if kind == BOOLEAN or kind == STRING:
        return bool(value)
    if kind == NUMBER:
        number = _float(value)
        return number != 0 and not math.isnan(number)
    return True


def to_number(value: object) -> float:
    """A value as a number: null is 0, booleans 1/0, strings as ``Number()``, others NaN."""
    kind = kind_of(value)
    if kind == NUMBER:
        return _float(value)
    if kind == NULL:
        return 0.0
    if kind == BOOLEAN:
        return 1.0 if value else 0.0
    if kind == STRING:
        assert isinstance(value, str)
        return parse_number(value)
    return math.nan


def parse_number(text: str) -> float:
    """JavaScript's ``Number(text)``, which GitHub follows when a string meets a number.

    Surrounding whitespace is ignored and an empty string is 0; decimal with optional sign,
    fraction and exponent, ``0x``/``0o``/``0b`` integers (unsigned) and ``Infinity`` are numbers;
    anything else is NaN.
    """
    text = text.strip(_JS_SPACE)
    if not text:
        return 0.0
    if _DECIMAL.fullmatch(text):
        return float(text)
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    if len(text) > 2 and text[0] == "0":
        radix = _RADIX.get(text[1].lower())
        if radix is not None and radix[1].fullmatch(text, 2):
            return _float(int(text[2:], radix[0]))
    return math.nan


def number_to_string(number: float) -> str:
    """A number as GitHub prints it: .NET's ``G15`` format (15 significant digits).

    ``1.0`` is ``1``, ``-0`` is ``0``, ``1e15`` is ``1E+15``, ``1e-5`` is ``1E-05``,
    ``0.1 + 0.2`` is ``0.3``; infinities are ``Infinity`` / ``-Infinity`` and NaN is ``NaN``.
    """
    if number == 0:
        # Also -0: GitHub prints "0" for it (corpus: format('{0}', -0)).
        return "0"
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    # Python's "g" switches to exponent notation at the same thresholds as .NET's "G"
    # (exponent < -4 or >= precision) and also writes at least two exponent digits.
    return format(number, ".15g").replace("e", "E")


def to_string(value: object) -> str:
    """A value as a string: null is ``''``, objects and arrays are ``Object`` / ``Array``."""
    kind = kind_of(value)
    if kind == STRING:
        assert isinstance(value, str)
        return value
    if kind == NULL:
        return ""
    if kind == BOOLEAN:
        return "true" if value else "false"
    if kind == NUMBER:
        return number_to_string(_float(value))
    return KIND_NAMES[kind]


def _float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:
        # A Python int beyond the double range is an infinity, as in JavaScript and .NET.
        return math.inf if value > 0 else -math.inf


class _UpperTable(dict[int, int]):
    """Per-character simple uppercase mapping for str.translate, filled on first use.

    GitHub compares strings with .NET's OrdinalIgnoreCase: each UTF-16 unit is uppercased on its
    own, so a character whose uppercase is several characters (``ß``) stays itself, and the
    Turkish dotless ``ı`` does not become ``I``.
    """

    def __missing__(self, code: int) -> int:
        upper = chr(code).upper()
        mapped = ord(upper) if len(upper) == 1 and code != 0x131 else code
        self[code] = mapped
        return mapped


_UPPER: Final = _UpperTable()


def fold(text: str) -> str:
    """The case-insensitive key of a string (same length as the string)."""
    if text.isascii():
        return text.upper()
    return text.translate(_UPPER)


def _ordinal_compare(left: str, right: str) -> int:
    """-1, 0 or 1 as .NET's OrdinalIgnoreCase orders the two strings."""
    # .NET orders strings by UTF-16 code units; code points order the same way unless a
    # character outside the Basic Multilingual Plane is involved.
    left, right = fold(left), fold(right)
    if _is_bmp(left) and _is_bmp(right):
        return (left > right) - (left < right)
    left_units = left.encode("utf-16-be", "surrogatepass")
    right_units = right.encode("utf-16-be", "surrogatepass")
    return (left_units > right_units) - (left_units < right_units)


def _is_bmp(text: str) -> bool:
    return text.isascii() or not text or max(text) <= "\uffff"


def _coerce(left: object, right: object) -> tuple[object, object, int, int]:
    left_kind = kind_of(left)
    right_kind = kind_of(right)
    while left_kind != right_kind:
        if left_kind == NUMBER and right_kind == STRING:
            right, right_kind = to_number(right), NUMBER
        elif left_kind == STRING and right_kind == NUMBER:
            left, left_kind = to_number(left), NUMBER
        elif left_kind in (NULL, BOOLEAN):
            left, left_kind = to_number(left), NUMBER
        elif right_kind in (NULL, BOOLEAN):
            right, right_kind = to_number(right), NUMBER
        else:
            break
    return left, right, left_kind, right_kind


def loose_equals(left: object, right: object) -> bool:
    """GitHub's ``==``."""
    left, right, kind, right_kind = _coerce(left, right)
    if kind != right_kind:
        return False
    if kind == NUMBER:
        # NaN is unequal to everything, which float comparison already gives.
        return _float(left) == _float(right)
    if kind == STRING:
        assert isinstance(left, str) and isinstance(right, str)
        return left == right or fold(left) == fold(right)
    if kind == NULL:
        return True
    if kind == BOOLEAN:
        return left == right
    return left is right


def greater_than(left: object, right: object) -> bool:
    """GitHub's ``>`` (``>=`` is ``>`` or ``==``)."""
    left, right, kind, right_kind = _coerce(left, right)
    if kind != right_kind:
        return False
    if kind == NUMBER:
        return _float(left) > _float(right)
    if kind == STRING:
        assert isinstance(left, str) and isinstance(right, str)
        return _ordinal_compare(left, right) > 0
    if kind == BOOLEAN:
        return bool(left) and not right
    return False


def less_than(left: object, right: object) -> bool:
    """GitHub's ``<`` (``<=`` is ``<`` or ``==``)."""
    left, right, kind, right_kind = _coerce(left, right)
    if kind != right_kind:
        return False
    if kind == NUMBER:
        return _float(left) < _float(right)
    if kind == STRING:
        assert isinstance(left, str) and isinstance(right, str)
        return _ordinal_compare(left, right) < 0
    if kind == BOOLEAN:
        return not left and bool(right)
    return False


def get_member(obj: Mapping[Any, Any], key: str) -> object:
    """``obj[key]`` with GitHub's case-insensitive keys; an exact match wins; else MISSING."""
    try:
        return obj[key]
    except KeyError:
        pass
    folded = fold(key)
    for name, value in obj.items():
        if isinstance(name, str) and fold(name) == folded:
            return value
    return MISSING
