"""The located YAML tree the workflow checks walk, and the typing of its scalars.

The loader turns YAML events into these three node kinds. Scalars keep their source text and style
instead of a resolved Python value, because the same scalar means different things in different
places: ``on`` is a key, ``yes`` is a string where a string is expected and an error where a
boolean is expected, ``3.10`` is the string "3.10" in ``env`` and the number 3.1 in a matrix (as
GitHub does). Typing follows the YAML 1.2 core schema, never the YAML 1.1 one.

Positions are 1-based lines and columns; ``index``/``end_index`` are 0-based character offsets into
the text the loader parsed (after a leading byte-order mark was removed).
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Plain scalars that the YAML 1.2 core schema reads as null.
NULL_SPELLINGS = frozenset({"", "~", "null", "Null", "NULL"})
TRUE_SPELLINGS = frozenset({"true", "True", "TRUE"})
FALSE_SPELLINGS = frozenset({"false", "False", "FALSE"})
#: YAML 1.1 booleans: strings here, but named in messages because people expect them to work.
YAML11_BOOLEANS = frozenset(
    {
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
    }
)

_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(nan|NaN|NAN)\Z")

#: Integers beyond this lose precision in JSON consumers (JavaScript numbers, RFC 8785).
MAX_SAFE_INTEGER = 2**53 - 1
#: Decimal literals with more digits are out of every range before they are converted: Python
#: refuses to convert more than 4,300 digits (and a long conversion is slow), and 2**53 has 16.
MAX_DECIMAL_DIGITS = 32


class Node:
    """A located YAML node."""

    __slots__ = ("line", "column", "index", "end_index")

    kind = "node"

    def __init__(self, line: int, column: int, index: int, end_index: int) -> None:
        self.line = line
        self.column = column
        self.index = index
        self.end_index = end_index


class Scalar(Node):
    """A scalar: its decoded text and its style ('' plain, quote characters, '|' or '>')."""

    __slots__ = ("value", "style")

    kind = "scalar"

    def __init__(
        self, value: str, style: str, line: int, column: int, index: int, end_index: int
    ) -> None:
        # Node.__init__ written out: one call less for each of a file's many scalars.
        self.line = line
        self.column = column
        self.index = index
        self.end_index = end_index
        self.value = value
        self.style = style

    @property
    def plain(self) -> bool:
        return self.style == ""

    def __repr__(self) -> str:
        return f"Scalar({self.value!r}@{self.line}:{self.column})"


class Mapping(Node):
    """A mapping with string keys (the loader rejects every other key), in source order."""

    __slots__ = ("items", "_by_key")

    kind = "mapping"

    def __init__(self, line: int, column: int, index: int) -> None:
        super().__init__(line, column, index, index)
        self.items: list[tuple[Scalar, Node]] = []
        self._by_key: dict[str, Node] = {}

    def add(self, key: Scalar, value: Node) -> None:
        self.items.append((key, value))
        self._by_key.setdefault(key.value, value)

    def get(self, key: str) -> Node | None:
        return self._by_key.get(key)

    def __getitem__(self, key: str) -> Node:
        return self._by_key[key]

    def key_node(self, key: str) -> Scalar | None:
        for item_key, _ in self.items:
            if item_key.value == key:
                return item_key
        return None

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def __repr__(self) -> str:
        return f"Mapping({[k.value for k, _ in self.items]}@{self.line}:{self.column})"


class Sequence(Node):
    """A sequence, in source order."""

    __slots__ = ("items",)

    kind = "sequence"

    def __init__(self, line: int, column: int, index: int) -> None:
        super().__init__(line, column, index, index)
        self.items: list[Node] = []

    def __repr__(self) -> str:
        return f"Sequence({len(self.items)}@{self.line}:{self.column})"


def is_null(node: Node) -> bool:
    """A plain scalar the core schema reads as null (``~``, ``null``, nothing at all)."""
    return isinstance(node, Scalar) and node.style == "" and node.value in NULL_SPELLINGS


def scalar_type(node: Scalar) -> str:
    """The YAML 1.2 core type of a scalar: null, bool, int, float or str.

    Only plain scalars are typed; quoted and block scalars are always strings.
    """
    if node.style != "":
        return "str"
    text = node.value
    if text in NULL_SPELLINGS:
        return "null"
    if text in TRUE_SPELLINGS or text in FALSE_SPELLINGS:
        return "bool"
    if _INT.match(text) or _OCT.match(text) or _HEX.match(text):
        return "int"
    if _FLOAT.match(text) or _INF.match(text) or _NAN.match(text):
        return "float"
    return "str"


def typed_value(node: Scalar) -> Any:
    """The JSON value of a scalar under the core schema (used for matrix values).

    Raises ``ValueError`` for numbers JSON cannot carry exactly: infinities, NaN and integers
    beyond 2**53.
    """
    kind = scalar_type(node)
    text = node.value
    if kind == "null":
        return None
    if kind == "bool":
        return text in TRUE_SPELLINGS
    if kind == "int":
        number = integer(node)
        if number is None or abs(number) > MAX_SAFE_INTEGER:
            raise ValueError(f"the number {_shown(text)} is too large (at most {MAX_SAFE_INTEGER})")
        return number
    if kind == "float":
        if _NAN.match(text) or _INF.match(text):
            raise ValueError(f"{text} is not a finite number")
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{_shown(text)} is not a finite number")
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        return value
    return text


def integer(node: Scalar) -> int | None:
    """The value of a scalar typed ``int``; ``None`` when it has more than 32 decimal digits.

    Every integer forge-ci reads is bounded far below that, so callers report ``None`` as out of
    range, located at the node, instead of letting ``int()`` raise (issue #12).
    """
    text = node.value
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > MAX_DECIMAL_DIGITS:
        return None
    # Leading zeros count against Python's conversion limit too, so they go first.
    return -int(digits) if text.startswith("-") else int(digits)


def _shown(text: str) -> str:
    """A literal in a message, shortened like :func:`describe` does."""
    return text if len(text) <= 40 else text[:37] + "..."


def describe(node: Node) -> str:
    """A short description of a node for messages: 'a mapping', 'null', "'yes'"."""
    if isinstance(node, Mapping):
        return "a mapping"
    if isinstance(node, Sequence):
        return "a sequence"
    assert isinstance(node, Scalar)
    if is_null(node):
        return "null (an empty value)"
    text = node.value if len(node.value) <= 40 else node.value[:37] + "..."
    return repr(text)
