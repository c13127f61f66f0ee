"""``toJSON`` and ``fromJSON``: GitHub's JSON text for expression values, and back.

GitHub writes JSON indented by two spaces, with ``": "`` after keys, numbers in the expression
language's own number format (so ``NaN`` and ``Infinity`` appear bare) and strings escaped as
Newtonsoft.Json escapes them. The writer is iterative, so a deeply nested value cannot exhaust
Python's stack, and charges every piece it writes to the evaluation's memory budget before the
text is joined.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, cast

from .coercion import ARRAY, BOOLEAN, NULL, NUMBER, OBJECT, kind_of, to_string
from .errors import UNLOCATED, ExpressionError

_INDENT: Final = "  "
# Newtonsoft escapes these line separators too; Python's json module leaves them raw.
_EXTRA_ESCAPES: Final = str.maketrans(
    {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def json_string(text: str) -> str:
    """A JSON string literal for ``text``, escaped like GitHub's (non-ASCII kept as is)."""
    return json.dumps(text, ensure_ascii=False).translate(_EXTRA_ESCAPES)


def _scalar(value: object, kind: int) -> str:
    if kind == NULL:
        return "null"
    if kind == BOOLEAN:
        return "true" if value else "false"
    if kind == NUMBER:
        return to_string(value)
    assert isinstance(value, str)
    return json_string(value)


def to_json(value: object, reserve: Callable[[int], None]) -> str:
    """GitHub's ``toJSON(value)``; ``reserve(n)`` is told of every ``n`` characters written."""
    out: list[str] = []
    # One frame per open array or object: (items, is_object, depth, [is_first]).
    frames: list[tuple[Iterator[Any], bool, int, list[bool]]] = []

    def write(piece: str) -> None:
        reserve(len(piece))
        out.append(piece)

    def open_value(item: object, depth: int) -> None:
        kind = kind_of(item)
        if kind == ARRAY:
            assert isinstance(item, list | tuple)
            if not item:
                write("[]")
            else:
                write("[")
                frames.append((iter(item), False, depth + 1, [True]))
        elif kind == OBJECT:
            assert isinstance(item, Mapping)
            if not item:
                write("{}")
            else:
                write("{")
                frames.append((iter(item.items()), True, depth + 1, [True]))
        else:
            write(_scalar(item, kind))

    open_value(value, 0)
    while frames:
        items, is_object, depth, first = frames[-1]
        entry = next(items, _END)
        if entry is _END:
            frames.pop()
            write("\n" + _INDENT * (depth - 1) + ("}" if is_object else "]"))
            continue
        prefix = ("\n" if first[0] else ",\n") + _INDENT * depth
        first[0] = False
        if is_object:
            key, item = cast(tuple[object, object], entry)
            write(prefix + json_string(to_string(key)) + ": ")
        else:
            item = entry
            write(prefix)
        open_value(item, depth)
    return "".join(out)


_END: Final = object()


def from_json(text: str) -> object:
    """GitHub's ``fromJSON(text)``: numbers become floats, as every number in expressions is."""
    if not text.strip():
        raise ExpressionError(
            "evaluation", "fromJSON cannot read an empty string as JSON", UNLOCATED
        )
    try:
        return json.loads(text, parse_int=float)
    except ValueError as error:
        raise ExpressionError("evaluation", f"Error parsing fromJSON: {error}", UNLOCATED) from None
    except RecursionError:
        raise ExpressionError(
            "evaluation", "Error parsing fromJSON: the JSON is nested too deeply", UNLOCATED
        ) from None
