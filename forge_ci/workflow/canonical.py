"""Canonical JSON (RFC 8785, JCS) for plan digests.

A run's plan is stored and compared by digest, so the same plan must always serialise to the
same bytes, whatever produced it: keys sorted by UTF-16 code units, no whitespace, UTF-8, strings
escaped minimally, numbers in ECMAScript's shortest form (``1e21``, ``1e-7``, ``0.1``).

Most plans hold no float and only keys of the Basic Multilingual Plane; for those, the standard
library's C encoder (sorted keys, no whitespace, minimal escapes) writes exactly these bytes, about
three times faster than the walk below, which every other value still takes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

#: JSON string quoting with only the escapes RFC 8785 requires (the C encoder when available).
_quote: Callable[[str], str] = encode_basestring


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 serialisation of a JSON-able value (dict, list, str, int, float, bool, None)."""
    if _c_encodable(value):
        return _c_dumps(value).encode("utf-8")
    out: list[str] = []
    _write(value, out.append)
    return "".join(out).encode("utf-8")


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical serialisation."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


#: The C encoder, configured as RFC 8785 writes: its key sort is code point order, which is UTF-16
#: order for keys without characters beyond U+FFFF, and it quotes with ``encode_basestring``.
_c_dumps = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode


#: More containers than a plan of 1 MiB can hold (each takes at least two bytes: ``[]``).
_MAX_CONTAINERS = 1 << 20


def _c_encodable(value: Any) -> bool:
    """Whether the C encoder writes ``value`` exactly as :func:`_write` would.

    Only exact dicts with str keys within the BMP, lists, tuples, str, int, bool and None; a
    float (formatted differently), any other type or key (refused by :func:`_write`) goes the
    slow way, which also raises its errors. A loop over a stack, not recursion: it visits every
    value of a plan. A value holding itself would never end it, so after more containers than a
    1 MiB plan can hold it gives up (and the walk raises ``RecursionError``, as it always did).
    """
    pending = [value]
    pop, extend = pending.pop, pending.extend
    containers = 0
    while pending:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        containers += 1
        if containers > _MAX_CONTAINERS:
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or not (key.isascii() or max(key) <= "\uffff"):
                    return False
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        else:
            return False
    return True


def _write(value: Any, emit: Callable[[str], None]) -> None:
    # Plans reach 1 MiB, so this walk is hot: exact type checks, the C string encoder, and the
    # plain sort when every key is ASCII (code point order is then UTF-16 order).
    kind = type(value)
    if kind is str:
        emit(_quote(value))
    elif kind is dict:
        keys = list(value)
        for key in keys:
            if type(key) is not str:
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
        if all(key.isascii() for key in keys):
            keys.sort()
        else:
            keys.sort(key=_utf16_key)
        emit("{")
        first = True
        for key in keys:
            if not first:
                emit(",")
            first = False
            emit(_quote(key))
            emit(":")
            _write(value[key], emit)
        emit("}")
    elif kind is list or kind is tuple:
        emit("[")
        first = True
        for item in value:
            if not first:
                emit(",")
            first = False
            _write(item, emit)
        emit("]")
    elif value is None:
        emit("null")
    elif value is True:
        emit("true")
    elif value is False:
        emit("false")
    elif kind is int:
        emit(str(value))
    elif kind is float:
        emit(es_number(value))
    else:
        raise TypeError(f"{kind.__name__} is not JSON-able")


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def es_number(value: float) -> str:
    """A finite float as ECMAScript's Number.prototype.toString writes it."""
    if not math.isfinite(value):
        raise ValueError("JSON has no NaN or Infinity")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + es_number(-value)
    mantissa, _, exponent_text = repr(value).partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    stripped = digits.rstrip("0")
    # value = int(stripped) * 10 ** scale, and n is the decimal point position of ECMAScript.
    scale = exponent - len(fraction) + (len(digits) - len(stripped))
    count = len(stripped)
    n = count + scale
    if count <= n <= 21:
        return stripped + "0" * (n - count)
    if 0 < n <= 21:
        return stripped[:n] + "." + stripped[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + stripped
    sign = "+" if n - 1 >= 0 else "-"
    head = stripped[0] + ("." + stripped[1:] if count > 1 else "")
    return f"{head}e{sign}{abs(n - 1)}"
